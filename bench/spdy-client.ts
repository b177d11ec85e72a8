/**
 * A minimal kubectl-like SPDY/3.1 exec client for the latency benchmarks: POST + `Upgrade: SPDY/3.1`,
 * then the error, stdin, stdout and stderr streams in kubectl's order, each awaited.
 */
import { request } from 'node:http';
import type { Socket } from 'node:net';
import { SpdyConnection, type SpdyStream } from '../src/spdy/index.js';
import { EchoReader, type EchoSession } from './echo.js';

/** The exec request-target every latency session uses (`cat` echoes stdin to stdout). */
export const CAT_EXEC_PATH = '/api/v1/namespaces/default/pods/demo/exec?command=cat&stdin=true&stdout=true&stderr=true';

/** An open SPDY exec session plus when its handshake finished. */
export interface SpdyExecSession extends EchoSession {
  /** Nanoseconds from sending the upgrade request to the last stream reply. */
  handshakeNs: bigint;
  /** `process.hrtime.bigint()` when the upgrade request was sent. */
  startNs: bigint;
}

/** Options of {@link openSpdyExec} and {@link openWsExec}. */
export interface ExecClientOptions {
  /** The exec request-target (default {@link CAT_EXEC_PATH}); it must request stdin, stdout and stderr. */
  path?: string;
  /** Ping the server every this many ms as kubectl does (5,000); default: no pings. */
  pingIntervalMs?: number;
}

/**
 * Open a stream of `conn` with kubectl's `streamtype` header and wait for its SYN_REPLY; the
 * stream's errors are swallowed (a vanished peer destroys every stream with one).
 */
export async function openTypedStream(conn: SpdyConnection, streamtype: string, timeoutMs: number): Promise<SpdyStream> {
  const s = await conn.openStream({ streamtype }, { timeoutMs });
  s.on('error', () => undefined);
  return s;
}

/** Upgrade to SPDY/3.1 at `baseUrl` + {@link CAT_EXEC_PATH}; resolves once all four streams are replied. */
export function openSpdyExec(baseUrl: string, timeoutMs = 30_000, options: ExecClientOptions = {}): Promise<SpdyExecSession> {
  const url = new URL(options.path ?? CAT_EXEC_PATH, baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      agent: false,
      headers: {
        Connection: 'Upgrade',
        Upgrade: 'SPDY/3.1',
        'X-Stream-Protocol-Version': 'v4.channel.k8s.io',
        'Content-Length': '0',
      },
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`SPDY upgrade of ${url} timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    req.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.once('response', (res) => {
      clearTimeout(timer);
      res.resume();
      req.destroy();
      reject(new Error(`SPDY upgrade of ${url}: HTTP ${res.statusCode}`));
    });
    req.once('upgrade', (_res, socket: Socket, head: Buffer) => {
      socket.setNoDelay(true);
      const conn = new SpdyConnection(socket, { isServer: false, head, pingIntervalMs: options.pingIntervalMs });
      void (async () => {
        const open = (streamtype: string): Promise<SpdyStream> => openTypedStream(conn, streamtype, timeoutMs);
        const error = await open('error');
        const stdin = await open('stdin');
        const stdout = await open('stdout');
        const stderr = await open('stderr');
        const handshakeNs = process.hrtime.bigint() - t0;
        clearTimeout(timer);
        error.resume();
        stderr.resume();
        const reader = new EchoReader();
        stdout.on('data', (c: Buffer) => reader.push(c.length));
        stdout.once('end', () => reader.fail(new Error('stdout ended')));
        conn.once('close', () => reader.fail(new Error('SPDY connection closed')));
        const closed = new Promise<void>((r) => (conn.closed ? r() : conn.once('close', () => r())));
        resolve({
          handshakeNs,
          startNs: t0,
          send: (data) => void stdin.write(data),
          expect: (bytes) => reader.expect(bytes),
          async close() {
            stdin.end();
            const t = setTimeout(() => conn.destroy(), 5_000);
            await closed;
            clearTimeout(t);
          },
        });
      })().catch((err: unknown) => {
        clearTimeout(timer);
        conn.destroy();
        reject(err instanceof Error ? err : new Error(String(err)));
      });
    });
    const t0 = process.hrtime.bigint();
    req.end();
  });
}
