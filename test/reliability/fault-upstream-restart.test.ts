/**
 * Issue 8 item 1, "upstream restarts between sessions": one session per path works, the dev cluster
 * child process is stopped (SIGTERM, then in a second round SIGKILL) and started again on the same
 * port; meanwhile an upgrade is answered 503 (upstream unreachable); afterwards the next session on
 * every path works again, through the same proxy instance (no stale connection is reused).
 *
 * The paths: the default proxy (`--upstream-streaming auto`) passes SPDY, WebSocket v5 and the
 * port-forward tunnel through to the 1.36 dev cluster (which takes all three, issue 32); a second proxy
 * with `--upstream-streaming spdy` runs the proxy's own translator and tunnel. Which way each WebSocket
 * session went is read off the proxies' `apiserver_websocket_streaming_requests_total`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { startProxy } from '../proxy/scripted-upstream.js';
import { scrapeCounter } from '../helpers/metrics.js';
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
/** The default: everything passed through. */
let proxy: RunningServer;
/** `--upstream-streaming spdy`: v5 translated and the tunnel unwrapped here. */
let translating: RunningServer;
let source: SourceServer;

/** Run `session` and check that it moved exactly `proxyType` by one for `subresource` on `through`'s metrics. */
async function counted(through: RunningServer, subresource: string, proxyType: string, session: () => Promise<void>): Promise<void> {
  const read = (): Promise<number> => scrapeCounter(through.url, 'apiserver_websocket_streaming_requests_total', { subresource });
  const way = (): Promise<number> => scrapeCounter(through.url, 'apiserver_websocket_streaming_requests_total', { subresource, proxy_type: proxyType });
  const [all, mine] = [await read(), await way()];
  await session();
  expect({ all: (await read()) - all, [proxyType]: (await way()) - mine }).toEqual({ all: 1, [proxyType]: 1 });
}

async function passthroughWorks(tag: string): Promise<void> {
  const s = await spdyExec(proxy.url, execPath(['echo', tag], { stdin: false }), { stdin: false });
  await s.closed;
  expect(s.text).toBe(`${tag}\n`);
  expect(JSON.parse(s.status)).toMatchObject({ status: 'Success' });
}

/** A v5 exec through `through`: the dev cluster's Status (passed through) or the translator's, then close 1000. */
async function v5Works(through: RunningServer, tag: string): Promise<void> {
  const s = await wsExec(through.url, execPath(['echo', tag], { stdin: false }));
  const { code } = await s.closed;
  expect(s.text).toBe(`${tag}\n`);
  expect(JSON.parse(s.status)).toMatchObject({ status: 'Success' });
  expect(code).toBe(1000);
}

const translationWorks = (tag: string): Promise<void> => counted(translating, 'exec', 'translated_at_apiserver', () => v5Works(translating, tag));
const v5PassthroughWorks = (tag: string): Promise<void> => counted(proxy, 'exec', 'proxied_to_upstream', () => v5Works(proxy, tag));
const tunnelWorks = (): Promise<void> => counted(translating, 'portforward', 'tunneled_at_apiserver', () => forwardWorks(translating));
const tunnelPassthroughWorks = (): Promise<void> => counted(proxy, 'portforward', 'proxied_to_upstream', () => forwardWorks(proxy));

/** Everything, in turn. */
async function everyPathWorks(tag: string): Promise<void> {
  await passthroughWorks(tag);
  await v5PassthroughWorks(tag);
  await tunnelPassthroughWorks();
  await translationWorks(tag);
  await tunnelWorks();
}

async function forwardWorks(through: RunningServer): Promise<void> {
  const f = await tunnelForward(through.url, source.port);
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
    translating = await startProxy(cluster.url, { upstreamStreaming: 'spdy' });
    source = await startSourceServer((socket) => socket.end('hello through the tunnel\n'));
  });
  afterAll(async () => {
    await proxy?.close();
    await translating?.close();
    await cluster?.close();
    await source?.close();
  });

  it('every path works before the restart', async () => {
    await everyPathWorks('before');
  });

  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`after a ${signal} and a restart on the same port, the next session on every path works`, async () => {
      const { port, dataDir } = cluster;
      if (signal === 'SIGKILL') await cluster.kill();
      else await cluster.close();
      // While it is down: the passthrough answers 503 (unreachable), nothing hangs.
      await expect(spdyExec(proxy.url, execPath(['true'], { stdin: false }), { stdin: false })).rejects.toThrow(/HTTP 503/);
      // A v5 passthrough too: an unreachable upstream is no refusal, so nothing falls back to the translator.
      await expect(wsExec(proxy.url, execPath(['true'], { stdin: false }))).rejects.toThrow(/Unexpected server response: 503/);
      cluster = await startClusterChild({ port, dataDir });
      expect(cluster.port).toBe(port);
      await everyPathWorks(`after-${signal}`);
    });
  }
});
