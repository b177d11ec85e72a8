/**
 * Issue 8 item 1, "upstream process killed mid-stream": the dev cluster runs as a child process and
 * is SIGKILLed while a session streams through the in-process proxy. Within 1 s the client must get
 * a Failure Status where the protocol carries one (translation: channel 3) and a close; nothing may
 * hang. Passthrough SPDY carries no proxy Status (the proxy never parses SPDY): the client
 * connection closes. The tunnel closes the WebSocket.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
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

async function start(): Promise<{ cluster: ClusterChild; proxy: RunningServer }> {
  cluster = await startClusterChild();
  proxy = await startProxy(cluster.url);
  return { cluster, proxy };
}

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
    const { cluster, proxy } = await start();
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
  });

  it('tunnel (SPDY/3.1+portforward.k8s.io): the WebSocket closes within 1 s', async () => {
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
    console.log(
      `tunnel: WebSocket close ${f.tunnel.closeCode} and TCP close ${(closedAt - killedAt).toFixed(0)} ms after SIGKILL, ` +
        `SPDY connection inside closed at ${(spdyClosed - killedAt).toFixed(0)} ms, ${received} bytes forwarded`,
    );
    expect(closedAt - killedAt).toBeLessThan(WITHIN_MS);
    expect(spdyClosed - killedAt).toBeLessThan(WITHIN_MS);
    // The upstream TCP connection ended (FIN or reset): close 1000 (EOF) or 1011 (error), per the relay.
    expect([1000, 1011]).toContain(f.tunnel.closeCode);
  });
});
