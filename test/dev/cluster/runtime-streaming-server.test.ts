/**
 * The dev runtime's streaming server (`runtime-streaming-server.ts`): one request per single-use
 * token, Go's `http.NotFound` for an unknown or used token, 400 for a token used on another
 * subresource's path, at most 1000 tokens waiting, and a SPDY exec served on a good token.
 */
import { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { RUNTIME_MAX_IN_FLIGHT, RuntimeStreamingServer, TooManyStreamingRequestsError, type RuntimeStreamRequest } from '../../../dev/cluster/runtime-streaming-server.js';
import type { Route } from '../../../src/routing/route.js';
import { spdyUpgradeAnswer } from './stream-clients.js';

let cluster: DevCluster;
let runtime: RuntimeStreamingServer;
beforeAll(async () => {
  cluster = await startDevCluster({});
  runtime = await RuntimeStreamingServer.start(cluster.runtime, new WebSocketServer({ noServer: true }));
});
afterAll(async () => {
  await runtime?.close();
  await cluster?.close();
});

const exec = (): RuntimeStreamRequest => ({
  kind: 'exec',
  pod: cluster.pods.get('default', 'demo')!,
  options: { stdin: false, stdout: true, stderr: false, tty: false, container: 'demo', command: ['echo', 'from-runtime'] },
});

/** A SPDY/3.1 upgrade to `path` on the route's server: 101, or the answer's status and body. */
async function upgrade(route: Route, path: string): Promise<{ status: number; body: string }> {
  const { status, body } = await spdyUpgradeAnswer(new URL(path, route.url));
  return { status, body };
}

describe('RuntimeStreamingServer', () => {
  it('routes to /exec/{token} on loopback; the token serves one upgrade, then it is not found', async () => {
    const route = runtime.routeFor(exec());
    const path = route.target('/ignored?x=1');
    expect(path).toMatch(/^\/exec\/[A-Za-z0-9_-]{11}$/);
    expect(route.url.hostname).toBe('127.0.0.1');
    expect(await upgrade(route, path)).toEqual({ status: 101, body: '' });
    expect(await upgrade(route, path)).toEqual({ status: 404, body: '404 page not found\n' });
  });

  it('answers an unknown token 404 and a token on the wrong path 400', async () => {
    const route = runtime.routeFor(exec());
    expect(await upgrade(route, '/exec/AAAAAAAAAAA')).toEqual({ status: 404, body: '404 page not found\n' });
    expect(await upgrade(route, route.target('/').replace('/exec/', '/attach/'))).toEqual({ status: 400, body: 'invalid request\n' });
  });

  it(`refuses more than ${RUNTIME_MAX_IN_FLIGHT} waiting tokens`, async () => {
    const other = await RuntimeStreamingServer.start(cluster.runtime, new WebSocketServer({ noServer: true }));
    try {
      for (let i = 0; i < RUNTIME_MAX_IN_FLIGHT; i++) other.routeFor(exec());
      expect(() => other.routeFor(exec())).toThrow(TooManyStreamingRequestsError);
    } finally {
      await other.close();
    }
  });
});
