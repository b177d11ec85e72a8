/** DiscoveryCache: documents served synchronously, refreshed on start, on change and on the interval (driven timers). */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DiscoveryCache, type DiscoveryTimers } from '../../../src/aggregation/discovery-cache.js';
import type { DiscoveryFetch, DiscoveryResponse } from '../../../src/aggregation/discovery-fetch.js';
import { discoveryETag } from '../../../src/aggregation/discovery-negotiation.js';
import { apiService } from './helpers.js';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const upstreamDoc = fixture('upstream-apigroupdiscoverylist.json').document;
const metrics = fixture('metrics-server-v1beta1.json');
const V2 = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';
const json = (status: number, body: unknown, contentType = 'application/json'): DiscoveryResponse => ({ status, headers: { 'content-type': contentType }, body: Buffer.from(JSON.stringify(body)) });

/** Manual timers: nothing runs until the test advances the clock. */
function manualTimers() {
  let now = 0;
  let seq = 0;
  const pending = new Map<number, { at: number; fn: () => void }>();
  const timers: DiscoveryTimers = {
    setTimeout: (fn, ms) => {
      pending.set(++seq, { at: now + ms, fn });
      return seq;
    },
    clearTimeout: (h) => void pending.delete(h as number),
  };
  return {
    timers,
    /** Move the clock forward, running what falls due; returns how many timers ran. */
    advance(ms: number): number {
      now += ms;
      let ran = 0;
      for (const [id, t] of [...pending].sort((a, b) => a[1].at - b[1].at)) {
        if (t.at <= now) {
          pending.delete(id);
          t.fn();
          ran++;
        }
      }
      return ran;
    },
    nextDelay: () => Math.min(...[...pending.values()].map((t) => t.at - now)),
  };
}

function backend() {
  let up = true;
  let calls = 0;
  const fetch: DiscoveryFetch = async (path) => {
    calls++;
    if (!up) throw new Error('connect ECONNREFUSED');
    if (path === '/apis') return json(406, {});
    if (path === '/apis/metrics.k8s.io/v1beta1') return json(200, metrics.list);
    return json(404, {});
  };
  return { fetch, setUp: (v: boolean) => (up = v), calls: () => calls };
}

const metricsAPIService = apiService('v1beta1.metrics.k8s.io', 100, 100, { backend: 'kube-system/metrics-server' });
const upstreamFetch: DiscoveryFetch = async () => json(200, upstreamDoc, V2);

const freshness = (cache: DiscoveryCache, group: string) =>
  JSON.parse(cache.document('v2').body.toString()).items.find((i: { metadata: { name: string } }) => i.metadata.name === group)?.versions.map((v: { freshness?: string }) => v.freshness);

describe('DiscoveryCache', () => {
  it('serves documents before the first fetch, then merged ones, with a matching ETag per format', async () => {
    const t = manualTimers();
    const b = backend();
    const cache = new DiscoveryCache({ fetchUpstream: upstreamFetch, fetchBackend: () => b.fetch, apiServices: [metricsAPIService], timers: t.timers });
    expect(freshness(cache, 'metrics.k8s.io')).toEqual(['Stale']); // never synced
    await cache.start();
    expect(freshness(cache, 'metrics.k8s.io')).toEqual(['Current']);
    for (const format of ['v2', 'v2beta1', 'legacy'] as const) {
      const d = cache.document(format);
      expect(d.etag).toBe(discoveryETag(d.body));
    }
    expect(cache.document('v2beta1').contentType).toBe('application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList');
    expect(JSON.parse(cache.document('v2beta1').body.toString()).apiVersion).toBe('apidiscovery.k8s.io/v2beta1');
    expect(JSON.parse(cache.document('legacy').body.toString()).groups.map((g: { name: string }) => g.name)).toEqual([
      'apiregistration.k8s.io', 'apps', 'autoscaling', 'stable.example.com', 'metrics.k8s.io',
    ]);
    cache.close();
  });

  it('never fetches per read, and refreshes on the interval', async () => {
    const t = manualTimers();
    const b = backend();
    const cache = new DiscoveryCache({ fetchUpstream: upstreamFetch, fetchBackend: () => b.fetch, apiServices: [metricsAPIService], timers: t.timers, refreshIntervalMs: 60_000 });
    await cache.start();
    const after = b.calls();
    for (let i = 0; i < 100; i++) cache.document('v2');
    expect(b.calls()).toBe(after);
    expect(t.nextDelay()).toBe(60_000);

    b.setUp(false);
    const updated = new Promise<void>((r) => cache.once('updated', () => r()));
    expect(t.advance(60_000)).toBe(1);
    await updated;
    expect(freshness(cache, 'metrics.k8s.io')).toEqual(['Stale']);
    expect(cache.status.errors.get('v1beta1.metrics.k8s.io')).toContain('ECONNREFUSED');
    // Last known resources are kept while Stale.
    const item = JSON.parse(cache.document('v2').body.toString()).items.find((i: { metadata: { name: string } }) => i.metadata.name === 'metrics.k8s.io');
    expect(item.versions[0].resources).toHaveLength(2);
    cache.close();
  });

  it('changes the documents at once on a new APIService set, and refreshes on invalidate()', async () => {
    const t = manualTimers();
    const b = backend();
    const cache = new DiscoveryCache({ fetchUpstream: upstreamFetch, fetchBackend: () => b.fetch, apiServices: [], timers: t.timers });
    await cache.start();
    const before = cache.document('v2').etag;
    cache.setAPIServices([metricsAPIService]);
    expect(cache.document('v2').etag).not.toBe(before);
    expect(freshness(cache, 'metrics.k8s.io')).toEqual(['Stale']);
    const updated = new Promise<void>((r) => cache.once('updated', () => r()));
    expect(t.advance(0)).toBe(1); // the invalidation's refresh
    await updated;
    expect(freshness(cache, 'metrics.k8s.io')).toEqual(['Current']);

    cache.setAPIServices([]);
    expect(freshness(cache, 'metrics.k8s.io')).toEqual(['Stale']); // the upstream's own, stale entry is back
    cache.close();
  });

  it('coalesces invalidations during a refresh into one more refresh', async () => {
    const t = manualTimers();
    let upstreamCalls = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const fetchUpstream: DiscoveryFetch = async () => {
      upstreamCalls++;
      if (upstreamCalls === 1) await gate;
      return json(200, upstreamDoc, V2);
    };
    const cache = new DiscoveryCache({ fetchUpstream, fetchBackend: () => backend().fetch, apiServices: [], timers: t.timers });
    const first = cache.start();
    cache.invalidate();
    cache.invalidate();
    void cache.refresh();
    release();
    await first;
    expect(upstreamCalls).toBe(2);
    expect(cache.status.refreshes).toBe(2);
    cache.close();
  });

  it('answers /apis/<group> for a registered group and leaves the others to the upstream', async () => {
    const t = manualTimers();
    const cache = new DiscoveryCache({ fetchUpstream: upstreamFetch, fetchBackend: () => backend().fetch, apiServices: [metricsAPIService], timers: t.timers });
    await cache.start();
    const g = cache.apiGroup('metrics.k8s.io');
    expect(JSON.parse(g!.body.toString())).toMatchObject({ kind: 'APIGroup', name: 'metrics.k8s.io', preferredVersion: { version: 'v1beta1' } });
    expect(g!.etag).toBe(discoveryETag(g!.body));
    expect(cache.apiGroup('apps')).toBeUndefined();
    cache.close();
  });

  it('keeps the last upstream document when the upstream cannot be read', async () => {
    const t = manualTimers();
    let upstreamUp = true;
    const cache = new DiscoveryCache({
      fetchUpstream: async () => {
        if (!upstreamUp) throw new Error('connect ECONNREFUSED');
        return json(200, upstreamDoc, V2);
      },
      fetchBackend: () => backend().fetch,
      apiServices: [],
      timers: t.timers,
    });
    await cache.start();
    const before = cache.document('legacy').body.toString();
    upstreamUp = false;
    await cache.refresh();
    expect(cache.document('legacy').body.toString()).toBe(before);
    expect(cache.status.upstreamErrors).toEqual(['connect ECONNREFUSED']);
    cache.close();
  });
});
