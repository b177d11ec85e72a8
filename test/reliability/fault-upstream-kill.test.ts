/**
 * Issue 8 item 1, "upstream process killed mid-stream": the dev cluster runs as a child process and
 * is SIGKILLed while a session streams through the in-process proxy. Within 1 s the client must get
 * a Failure Status where the protocol carries one (translation: channel 3) and a close; nothing may
 * hang. Passthrough SPDY carries no proxy Status (the proxy never parses SPDY): the client
 * connection closes. The tunnel closes the WebSocket.
 *
 * The translation and tunnel rows are about the proxy's own translator and tunnel: their proxy runs
 * with `--upstream-streaming spdy` (issue 32: by default it asks the 1.36 dev cluster in WebSocket
 * first, which takes both). The default path — v5 and the tunnel passed through, counted
 * `proxied_to_upstream` — has rows of its own: as SPDY passthrough, no Status from the proxy, the
 * connection closes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ServeFlags } from '../../src/config.js';
import type { RunningServer } from '../../src/server.js';
import { scrapeCounter } from '../helpers/metrics.js';
import { startProxy } from '../proxy/scripted-upstream.js';
import {
  ENDLESS_STDOUT,
  execPath,
  spdyExec,
  startClusterChild,
  startSourceServer,
  tunnelForward,
  writeEndlessly,
  wsExec,
  type ClusterChild,
  type SourceServer,
} from './fault-fixture.js';

const WITHIN_MS = 1_000;
const MiB = 1024 * 1024;

let cluster: ClusterChild | undefined;
let proxy: RunningServer | undefined;
let source: SourceServer | undefined;

async function start(flags: ServeFlags = {}): Promise<{ cluster: ClusterChild; proxy: RunningServer }> {
  cluster = await startClusterChild();
  proxy = await startProxy(cluster.url, flags);
  return { cluster, proxy };
}

/** The proxy's own translator and tunnel (never asking the upstream in WebSocket first). */
const TRANSLATING: ServeFlags = { upstreamStreaming: 'spdy' };

const websocketRequests = (url: string, subresource: string, proxyType: string): Promise<number> =>
  scrapeCounter(url, 'apiserver_websocket_streaming_requests_total', { subresource, proxy_type: proxyType });

describe('fault: upstream process killed mid-stream', () => {
  afterEach(async () => {
    await proxy?.close();
    await cluster?.kill();
    await source?.close();
    proxy = cluster = source = undefined;
  });

  it('passthrough (SPDY): the client connection closes within 1 s', async () => {
    const { cluster, proxy } = await start();
    const s = await spdyExec(proxy.url, execPath(ENDLESS_STDOUT, { stdin: false }), { stdin: false });
    await s.receivedAtLeast(MiB);
    const killedAt = performance.now();
    process.kill(cluster.pid, 'SIGKILL');
    const closedAt = await s.closed;
    console.log(`passthrough: closed ${(closedAt - killedAt).toFixed(0)} ms after SIGKILL, ${s.received} stdout bytes, error stream ${JSON.stringify(s.status)}`);
    expect(closedAt - killedAt).toBeLessThan(WITHIN_MS);
    // The kubelet's Status never came; the proxy adds none inside SPDY.
    expect(s.status).toBe('');
  });

  it('translation (WebSocket v5): a Failure Status on channel 3, then close, within 1 s', async () => {
    const { cluster, proxy } = await start(TRANSLATING);
    const s = await wsExec(proxy.url, execPath(ENDLESS_STDOUT, { stdin: false }));
    await s.receivedAtLeast(MiB);
    const killedAt = performance.now();
    process.kill(cluster.pid, 'SIGKILL');
    const { code, at } = await s.closed;
    console.log(`translation: close ${code} ${(at - killedAt).toFixed(0)} ms after SIGKILL, ${s.received} stdout bytes, channel 3 ${s.status}`);
    expect(at - killedAt).toBeLessThan(WITHIN_MS);
    const status = JSON.parse(s.status) as { status: string; code?: number; reason?: string; message?: string };
    expect(status.status).toBe('Failure');
    expect(status.code).toBe(500);
    expect(status.reason).toBe('InternalError');
    expect(code).toBe(1000);
    expect(await websocketRequests(proxy.url, 'exec', 'translated_at_apiserver')).toBe(1);
  });

  it('passthrough (WebSocket v5, the 1.36 cluster takes it): the WebSocket closes within 1 s, no Status from the proxy', async () => {
    const { cluster, proxy } = await start();
    const s = await wsExec(proxy.url, execPath(ENDLESS_STDOUT, { stdin: false }));
    await s.receivedAtLeast(MiB);
    const killedAt = performance.now();
    process.kill(cluster.pid, 'SIGKILL');
    const { code, at } = await s.closed;
    console.log(`v5 passthrough: close ${code} ${(at - killedAt).toFixed(0)} ms after SIGKILL, ${s.received} stdout bytes, channel 3 ${JSON.stringify(s.status)}`);
    expect(at - killedAt).toBeLessThan(WITHIN_MS);
    // The dev cluster's Status never came and the proxy, which does not parse the stream, adds none:
    // the connection just ends (1006, no close frame).
    expect(s.status).toBe('');
    expect(code).toBe(1006);
    expect(await websocketRequests(proxy.url, 'exec', 'proxied_to_upstream')).toBe(1);
    expect(await websocketRequests(proxy.url, 'exec', 'translated_at_apiserver')).toBe(0);
  });

  it('tunnel (SPDY/3.1+portforward.k8s.io): the WebSocket closes within 1 s', async () => {
    const { cluster, proxy } = await start(TRANSLATING);
    source = await startSourceServer(writeEndlessly);
    const f = await tunnelForward(proxy.url, source.port);
    let received = 0;
    let reached!: () => void;
    const oneMiB = new Promise<void>((r) => (reached = r));
    f.data.on('data', (c: Buffer) => {
      received += c.length;
      if (received >= MiB) reached();
    });
    await oneMiB;
    const killedAt = performance.now();
    process.kill(cluster.pid, 'SIGKILL');
    const closedAt = await f.socketClosed;
    const spdyClosed = await new Promise<number>((r) => (f.conn.closed ? r(performance.now()) : f.conn.once('close', () => r(performance.now()))));
    console.log(
      `tunnel: WebSocket close ${f.tunnel.closeCode} and TCP close ${(closedAt - killedAt).toFixed(0)} ms after SIGKILL, ` +
        `SPDY connection inside closed at ${(spdyClosed - killedAt).toFixed(0)} ms, ${received} bytes forwarded`,
    );
    expect(closedAt - killedAt).toBeLessThan(WITHIN_MS);
    expect(spdyClosed - killedAt).toBeLessThan(WITHIN_MS);
    // The upstream TCP connection ended (FIN or reset): close 1000 (EOF) or 1011 (error), per the relay.
    expect([1000, 1011]).toContain(f.tunnel.closeCode);
    expect(await websocketRequests(proxy.url, 'portforward', 'tunneled_at_apiserver')).toBe(1);
  });

  it('tunnel passed through (the 1.36 cluster takes it): the connection closes within 1 s, no close frame from the proxy', async () => {
    const { cluster, proxy } = await start();
    source = await startSourceServer(writeEndlessly);
    const f = await tunnelForward(proxy.url, source.port);
    let received = 0;
    let reached!: () => void;
    const oneMiB = new Promise<void>((r) => (reached = r));
    f.data.on('data', (c: Buffer) => {
      received += c.length;
      if (received >= MiB) reached();
    });
    await oneMiB;
    const killedAt = performance.now();
    process.kill(cluster.pid, 'SIGKILL');
    const closedAt = await f.socketClosed;
    const spdyClosed = await new Promise<number>((r) => (f.conn.closed ? r(performance.now()) : f.conn.once('close', () => r(performance.now()))));
    console.log(`tunnel passthrough: TCP close ${(closedAt - killedAt).toFixed(0)} ms after SIGKILL (close frame ${f.tunnel.closeCode}), ${received} bytes forwarded`);
    expect(closedAt - killedAt).toBeLessThan(WITHIN_MS);
    expect(spdyClosed - killedAt).toBeLessThan(WITHIN_MS);
    // The dev cluster died before any close frame; the proxy passes bytes, it writes none of its own.
    expect(f.tunnel.closeCode).toBeUndefined();
    expect(await websocketRequests(proxy.url, 'portforward', 'proxied_to_upstream')).toBe(1);
    expect(await websocketRequests(proxy.url, 'portforward', 'tunneled_at_apiserver')).toBe(0);
  });
});
