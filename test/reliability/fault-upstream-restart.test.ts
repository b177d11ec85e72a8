/**
 * Issue 8 item 1, "upstream restarts between sessions": one session per path works, the dev cluster
 * child process is stopped (SIGTERM, then in a second round SIGKILL) and started again on the same
 * port; meanwhile an upgrade is answered 503 (upstream unreachable); afterwards the next session on
 * every path works again, through the same proxy instance (no stale connection is reused).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { startProxy } from '../proxy/scripted-upstream.js';
import {
  execPath,
  spdyExec,
  startClusterChild,
  startSourceServer,
  tunnelForward,
  wsExec,
  type ClusterChild,
  type SourceServer,
} from './fault-fixture.js';

let cluster: ClusterChild;
let proxy: RunningServer;
let source: SourceServer;

async function passthroughWorks(tag: string): Promise<void> {
  const s = await spdyExec(proxy.url, execPath(['echo', tag], { stdin: false }), { stdin: false });
  await s.closed;
  expect(s.text).toBe(`${tag}\n`);
  expect(JSON.parse(s.status)).toMatchObject({ status: 'Success' });
}

async function translationWorks(tag: string): Promise<void> {
  const s = await wsExec(proxy.url, execPath(['echo', tag], { stdin: false }));
  const { code } = await s.closed;
  expect(s.text).toBe(`${tag}\n`);
  expect(JSON.parse(s.status)).toMatchObject({ status: 'Success' });
  expect(code).toBe(1000);
}

async function tunnelWorks(): Promise<void> {
  const f = await tunnelForward(proxy.url, source.port);
  let text = '';
  f.data.on('data', (c: Buffer) => (text += c.toString()));
  await new Promise<void>((resolve, reject) => {
    f.data.once('end', () => resolve());
    f.data.once('close', () => (f.data.readableEnded ? resolve() : reject(new Error(`data stream closed after ${JSON.stringify(text)}`))));
  });
  expect(text).toBe('hello through the tunnel\n');
  f.conn.destroy();
}

describe('fault: upstream restarts between sessions', () => {
  beforeAll(async () => {
    cluster = await startClusterChild();
    proxy = await startProxy(cluster.url);
    source = await startSourceServer((socket) => socket.end('hello through the tunnel\n'));
  });
  afterAll(async () => {
    await proxy?.close();
    await cluster?.close();
    await source?.close();
  });

  it('every path works before the restart', async () => {
    await passthroughWorks('before');
    await translationWorks('before');
    await tunnelWorks();
  });

  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`after a ${signal} and a restart on the same port, the next session on every path works`, async () => {
      const { port, dataDir } = cluster;
      if (signal === 'SIGKILL') await cluster.kill();
      else await cluster.close();
      // While it is down: the passthrough answers 503 (unreachable), nothing hangs.
      await expect(spdyExec(proxy.url, execPath(['true'], { stdin: false }), { stdin: false })).rejects.toThrow(/HTTP 503/);
      cluster = await startClusterChild({ port, dataDir });
      expect(cluster.port).toBe(port);
      await passthroughWorks(`after-${signal}`);
      await translationWorks(`after-${signal}`);
      await tunnelWorks();
    });
  }
});
