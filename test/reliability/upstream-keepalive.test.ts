/**
 * Issue 26, finding 4: a pooled keep-alive connection that the upstream has closed must not fail a
 * caller's request. The upstream here closes kept-alive connections as a request arrives on them
 * (what a server closing an idle connection at that moment looks like from the client: the request
 * was written, no answer, FIN or reset), at random. GET, HEAD and OPTIONS without a body are retried
 * once on a fresh connection, as Go's http.Transport retries them; a request whose body was sent, and
 * an upgrade, never are.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { startPipelinedUpstream, type PipelinedUpstream } from '../security/pipelined-upstream.js';

/** A small deterministic PRNG (mulberry32), so a failure can be replayed. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('pooled upstream connections the upstream closed', () => {
  let upstream: PipelinedUpstream;
  let proxy: RunningServer;
  const random = prng(26);
  let dropped = 0;
  let dropping = true;
  beforeAll(async () => {
    upstream = await startPipelinedUpstream({
      // Any request after the first on a connection may find it closed: about a third of them do.
      answer: (r) => {
        if (!dropping || r.index === 0 || random() >= 0.35) return undefined;
        dropped++;
        return { drop: dropped % 2 === 0 ? 'fin' : 'reset' };
      },
    });
    proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: upstream.url }));
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it('1,000 sequential GETs (and HEAD, OPTIONS) all succeed while the upstream closes connections under them', async () => {
    const failures: string[] = [];
    const methods = ['GET', 'GET', 'GET', 'HEAD', 'OPTIONS'];
    for (let i = 0; i < 1000; i++) {
      const method = methods[i % methods.length]!;
      const res = await fetch(`${proxy.url}/api/v1/namespaces/default/pods?i=${i}`, { method });
      const body = await res.text();
      if (res.status !== 200) failures.push(`${method} #${i}: ${res.status} ${body}`);
    }
    expect(failures).toEqual([]);
    // The upstream did close connections under the proxy, many times.
    expect(dropped).toBeGreaterThan(100);
    // Each request reached the upstream at most twice (once on the closed connection, once retried).
    const perRequest = new Map<string, number>();
    for (const r of upstream.callerRequests()) perRequest.set(r.target, (perRequest.get(r.target) ?? 0) + 1);
    expect(Math.max(...perRequest.values())).toBeLessThanOrEqual(2);
    expect(perRequest.size).toBe(1000);
  });

  it('never retries a request whose body was sent: the caller gets the 503, the upstream saw it once', async () => {
    upstream.requests.length = 0;
    // Warm one pooled connection, then make the next request on it find it closed.
    dropping = false;
    expect((await fetch(`${proxy.url}/api/v1/namespaces/default/pods?warm`)).status).toBe(200);
    const before = dropped;
    dropping = true;
    let status = 200;
    for (let i = 0; i < 50 && dropped === before; i++) {
      const res = await fetch(`${proxy.url}/api/v1/namespaces/default/configmaps?post=${i}`, { method: 'POST', body: '{"kind":"ConfigMap"}', headers: { 'content-type': 'application/json' } });
      await res.text();
      status = res.status;
    }
    expect(dropped).toBeGreaterThan(before);
    expect(status).toBe(503);
    const posts = upstream.callerRequests().filter((r) => r.method === 'POST');
    const last = posts[posts.length - 1]!;
    expect(posts.filter((r) => r.target === last.target)).toHaveLength(1);
  });
});
