/**
 * A minimal kubectl-like WebSocket `v5.channel.k8s.io` exec client for the latency benchmarks:
 * binary frames `[channel] + payload`, channel 0 stdin, 1 stdout, 2 stderr, 3 error, 255 close.
 */
import WebSocket from 'ws';
import { EchoReader, type EchoSession } from './echo.js';
import { CAT_EXEC_PATH, type ExecClientOptions } from './spdy-client.js';

export interface WsExecSession extends EchoSession {
  /** Nanoseconds from starting the upgrade request to the initial (empty) frame. */
  handshakeNs: bigint;
  /** `process.hrtime.bigint()` when the upgrade request was started. */
  startNs: bigint;
}

/** Open a v5 exec session at `baseUrl` + {@link CAT_EXEC_PATH}; resolves on the initial frame. */
export function openWsExec(baseUrl: string, timeoutMs = 30_000, options: ExecClientOptions = {}): Promise<WsExecSession> {
  const url = new URL(options.path ?? CAT_EXEC_PATH, baseUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    // kubectl (gorilla/websocket) offers no compression.
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    const reader = new EchoReader();
    let ready = false;
    const timer = setTimeout(() => ws.terminate(), timeoutMs);
    const closed = new Promise<void>((r) => ws.once('close', () => r()));
    // client-go's WebSocket executor pings every 5 s (its heartbeat); `ws` answers the server's pings.
    const pinger =
      options.pingIntervalMs !== undefined && options.pingIntervalMs > 0
        ? setInterval(() => {
            if (ws.readyState === WebSocket.OPEN) ws.ping();
          }, options.pingIntervalMs).unref()
        : undefined;
    ws.once('close', () => clearInterval(pinger));
    ws.on('error', (err) => {
      if (!ready) reject(err);
    });
    ws.once('close', (code) => {
      clearTimeout(timer);
      reader.fail(new Error(`WebSocket closed (${code})`));
      if (!ready) reject(new Error(`WebSocket ${url} closed (${code}) before the initial frame`));
    });
    ws.on('message', (raw: WebSocket.RawData, isBinary: boolean) => {
      const data = raw as Buffer;
      if (!isBinary || data.length === 0) return;
      const channel = data[0];
      if (channel !== 1) return;
      if (!ready) {
        ready = true;
        clearTimeout(timer);
        const handshakeNs = process.hrtime.bigint() - t0;
        resolve({
          handshakeNs,
          startNs: t0,
          send: (payload) => ws.send(Buffer.concat([Buffer.from([0]), payload]), { binary: true }),
          expect: (bytes) => reader.expect(bytes),
          async close() {
            // v5: close stdin (channel 255, stream 0); `cat` exits and the proxy closes the socket.
            if (ws.readyState === WebSocket.OPEN) ws.send(Buffer.from([255, 0]), { binary: true });
            const t = setTimeout(() => ws.terminate(), 5_000);
            await closed;
            clearTimeout(t);
          },
        });
        if (data.length === 1) return;
      }
      reader.push(data.length - 1);
    });
  });
}
