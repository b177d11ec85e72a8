/**
 * Issue 8 item 1, "client vanishes (socket destroyed)": mid-session the client's TCP socket is
 * destroyed without any close handshake. The upstream side must be torn down and the dev cluster's
 * process signalled within 1 s. The exec'd shell traps TERM/HUP/INT and writes which one it got into
 * a marker file in the pod's working directory; for port-forward (no process) the forwarded TCP
 * connection to the target must close within 1 s.
 *
 * The translation and tunnel rows are about the proxy's own translator and tunnel: their proxy runs
 * with `--upstream-streaming spdy` (issue 32: by default it would ask the 1.36 dev cluster in
 * WebSocket first, which takes both). The default path, v5 and the tunnel passed through to that
 * cluster (counted `proxied_to_upstream`), has rows of its own.
 */
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { headerValue, SpdyConnection, type SpdyStream } from '../../src/spdy/index.js';
import { startProxy, startScriptedUpstream } from '../proxy/scripted-upstream.js';
import { scrapeCounter } from '../helpers/metrics.js';
import {
  execPath,
  fileAppears,
  signalRecorder,
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

let cluster: ClusterChild;
/** The default (`--upstream-streaming auto`): every protocol passed through to the 1.36 dev cluster. */
let proxy: RunningServer;
/** `--upstream-streaming spdy`: v5 translated and the tunnel unwrapped here. */
let translating: RunningServer;
let source: SourceServer;

const websocketRequests = (url: string, subresource: string, proxyType: string): Promise<number> =>
  scrapeCounter(url, 'apiserver_websocket_streaming_requests_total', { subresource, proxy_type: proxyType });

const podDir = (): string => join(cluster.dataDir, 'default', 'demo');

describe('fault: client vanishes mid-session', () => {
  beforeAll(async () => {
    cluster = await startClusterChild();
    proxy = await startProxy(cluster.url);
    translating = await startProxy(cluster.url, { upstreamStreaming: 'spdy' });
    source = await startSourceServer(writeEndlessly);
  });
  afterAll(async () => {
    await proxy?.close();
    await translating?.close();
    await cluster?.close();
    await source?.close();
  });

  it('passthrough (SPDY): the upstream connection closes and the process is signalled within 1 s', async () => {
    const marker = 'signalled-passthrough';
    const s = await spdyExec(proxy.url, execPath(signalRecorder(marker)));
    await s.receivedAtLeast('ready\n'.length);
    const goneAt = performance.now();
    s.conn.destroy();
    const signalledAt = await fileAppears(join(podDir(), marker));
    const signal = readFileSync(join(podDir(), marker), 'utf8').trim();
    console.log(`passthrough: process got SIG${signal} ${(signalledAt - goneAt).toFixed(0)} ms after the client socket was destroyed`);
    expect(signal).toBe('TERM');
    expect(signalledAt - goneAt).toBeLessThan(WITHIN_MS);
  });

  it('translation (WebSocket v5): the upstream streams are reset and the process is signalled within 1 s', async () => {
    const marker = 'signalled-translation';
    const s = await wsExec(translating.url, execPath(signalRecorder(marker)));
    await s.receivedAtLeast('ready\n'.length);
    const goneAt = performance.now();
    s.ws.terminate(); // destroys the socket: no close frame
    const signalledAt = await fileAppears(join(podDir(), marker));
    const signal = readFileSync(join(podDir(), marker), 'utf8').trim();
    console.log(`translation: process got SIG${signal} ${(signalledAt - goneAt).toFixed(0)} ms after the client socket was destroyed`);
    expect(signal).toBe('TERM');
    expect(signalledAt - goneAt).toBeLessThan(WITHIN_MS);
    expect(await websocketRequests(translating.url, 'exec', 'translated_at_apiserver')).toBe(1);
  });

  it('passthrough (WebSocket v5, the 1.36 cluster takes it): the upstream connection closes and the process is signalled within 1 s', async () => {
    const marker = 'signalled-v5-passthrough';
    const before = await websocketRequests(proxy.url, 'exec', 'proxied_to_upstream');
    const s = await wsExec(proxy.url, execPath(signalRecorder(marker)));
    await s.receivedAtLeast('ready\n'.length);
    const goneAt = performance.now();
    s.ws.terminate(); // destroys the socket: no close frame
    const signalledAt = await fileAppears(join(podDir(), marker));
    const signal = readFileSync(join(podDir(), marker), 'utf8').trim();
    console.log(`v5 passthrough: process got SIG${signal} ${(signalledAt - goneAt).toFixed(0)} ms after the client socket was destroyed`);
    expect(signal).toBe('TERM');
    expect(signalledAt - goneAt).toBeLessThan(WITHIN_MS);
    expect(await websocketRequests(proxy.url, 'exec', 'proxied_to_upstream')).toBe(before + 1);
    expect(await websocketRequests(proxy.url, 'exec', 'translated_at_apiserver')).toBe(0);
  });

  it('tunnel (SPDY/3.1+portforward.k8s.io): the forwarded connection closes within 1 s', async () => {
    const f = await tunnelForward(translating.url, source.port);
    const target = await source.next();
    await new Promise<void>((r) => f.data.once('data', () => r()));
    const goneAt = performance.now();
    f.tunnel.socket.destroy();
    const closedAt = await target.closed;
    console.log(`tunnel: forwarded TCP connection closed ${(closedAt - goneAt).toFixed(0)} ms after the client socket was destroyed`);
    expect(closedAt - goneAt).toBeLessThan(WITHIN_MS);
    expect(await websocketRequests(translating.url, 'portforward', 'tunneled_at_apiserver')).toBe(1);
  });

  it('tunnel passed through (the 1.36 cluster takes it): the forwarded connection closes within 1 s', async () => {
    const before = await websocketRequests(proxy.url, 'portforward', 'proxied_to_upstream');
    const f = await tunnelForward(proxy.url, source.port);
    const target = await source.next();
    await new Promise<void>((r) => f.data.once('data', () => r()));
    const goneAt = performance.now();
    f.tunnel.socket.destroy();
    const closedAt = await target.closed;
    console.log(`tunnel passthrough: forwarded TCP connection closed ${(closedAt - goneAt).toFixed(0)} ms after the client socket was destroyed`);
    expect(closedAt - goneAt).toBeLessThan(WITHIN_MS);
    expect(await websocketRequests(proxy.url, 'portforward', 'proxied_to_upstream')).toBe(before + 1);
    expect(await websocketRequests(proxy.url, 'portforward', 'tunneled_at_apiserver')).toBe(0);
  });

  it('translation against a scripted SPDY upstream: RST_STREAM CANCEL on every stream, before the connection closes', async () => {
    const upstream = await startScriptedUpstream();
    // The scripted upstream speaks SPDY only: the proxy's translator dials it at once.
    const scripted = await startProxy(upstream.url, { upstreamStreaming: 'spdy' });
    try {
      // The client's WebSocket opens only once the upstream has said 101 (the translator dials first).
      const opening = wsExec(scripted.url, execPath(['cat']));
      const conn = await upstream.next();
      conn.socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n');
      const server = new SpdyConnection(conn.socket, { isServer: true, head: conn.rest });
      const streams: SpdyStream[] = [];
      const resets: Array<{ type: string; status: number; beforeClose: boolean }> = [];
      let all!: () => void;
      const allOpen = new Promise<void>((r) => (all = r));
      server.on('stream', (stream: SpdyStream) => {
        stream.on('error', () => undefined);
        stream.on('reset', (status: number) => resets.push({ type: String(headerValue(stream.headers, 'streamtype')), status, beforeClose: !server.closed }));
        stream.reply();
        streams.push(stream);
        if (headerValue(stream.headers, 'streamtype') !== 'stdin') stream.resume();
        if (streams.length === 4) all();
      });
      conn.socket.resume();
      const s = await opening;
      await allOpen;
      // The session runs once stdin reaches the upstream (all four SYN_REPLYs arrived at the proxy).
      const stdin = streams.find((x) => headerValue(x.headers, 'streamtype') === 'stdin')!;
      const firstStdin = new Promise<void>((r) => stdin.once('data', () => r()));
      s.send('x');
      await firstStdin;
      const closed = new Promise<void>((r) => server.once('close', () => r()));
      s.ws.terminate();
      await closed;
      console.log(`translation (scripted upstream): resets ${JSON.stringify(resets)}`);
      expect(resets.map((r) => r.type).sort()).toEqual(['error', 'stderr', 'stdin', 'stdout']);
      expect(resets.every((r) => r.status === 5 && r.beforeClose)).toBe(true); // 5 = CANCEL
    } finally {
      await scripted.close();
      await upstream.close();
    }
  });
});
