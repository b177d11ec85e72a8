/**
 * Issue 8 item 1, "client vanishes (socket destroyed)": mid-session the client's TCP socket is
 * destroyed without any close handshake. The upstream side must be torn down and the dev cluster's
 * process signalled within 1 s. The exec'd shell traps TERM/HUP/INT and writes which one it got into
 * a marker file in the pod's working directory; for port-forward (no process) the forwarded TCP
 * connection to the target must close within 1 s.
 */
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { headerValue, SpdyConnection, type SpdyStream } from '../../src/spdy/index.js';
import { startProxy, startScriptedUpstream } from '../proxy/scripted-upstream.js';
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
let proxy: RunningServer;
let source: SourceServer;

const podDir = (): string => join(cluster.dataDir, 'default', 'demo');

describe('fault: client vanishes mid-session', () => {
  beforeAll(async () => {
    cluster = await startClusterChild();
    proxy = await startProxy(cluster.url);
    source = await startSourceServer(writeEndlessly);
  });
  afterAll(async () => {
    await proxy?.close();
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
    const s = await wsExec(proxy.url, execPath(signalRecorder(marker)));
    await s.receivedAtLeast('ready\n'.length);
    const goneAt = performance.now();
    s.ws.terminate(); // destroys the socket: no close frame
    const signalledAt = await fileAppears(join(podDir(), marker));
    const signal = readFileSync(join(podDir(), marker), 'utf8').trim();
    console.log(`translation: process got SIG${signal} ${(signalledAt - goneAt).toFixed(0)} ms after the client socket was destroyed`);
    expect(signal).toBe('TERM');
    expect(signalledAt - goneAt).toBeLessThan(WITHIN_MS);
  });

  it('tunnel (SPDY/3.1+portforward.k8s.io): the forwarded connection closes within 1 s', async () => {
    const f = await tunnelForward(proxy.url, source.port);
    const target = await source.next();
    await new Promise<void>((r) => f.data.once('data', () => r()));
    const goneAt = performance.now();
    f.tunnel.socket.destroy();
    const closedAt = await target.closed;
    console.log(`tunnel: forwarded TCP connection closed ${(closedAt - goneAt).toFixed(0)} ms after the client socket was destroyed`);
    expect(closedAt - goneAt).toBeLessThan(WITHIN_MS);
  });

  it('translation against a scripted SPDY upstream: RST_STREAM CANCEL on every stream, before the connection closes', async () => {
    const upstream = await startScriptedUpstream();
    const scripted = await startProxy(upstream.url);
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
