/** Fetching a server's discovery: aggregated, 304, 406 and plain-JSON fallbacks, failures and timeouts. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  AGGREGATED_ACCEPT,
  fetchBackendDiscovery,
  fetchUpstreamDiscovery,
  isAggregatedContentType,
  type DiscoveryFetch,
  type DiscoveryResponse,
} from '../../../src/aggregation/discovery-fetch.js';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const metrics = fixture('metrics-server-v1beta1.json');
const V2 = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';

type Route = (headers: Readonly<Record<string, string>>) => DiscoveryResponse | 'hang' | Error;
const json = (status: number, body: unknown, headers: Record<string, string> = {}): DiscoveryResponse => ({
  status,
  headers: Object.fromEntries(Object.entries({ 'content-type': 'application/json', ...headers }).map(([k, v]) => [k.toLowerCase(), v])),
  body: Buffer.from(JSON.stringify(body)),
});

/** A scripted server: routes by path; records every request. */
function server(routes: Record<string, Route>) {
  const requests: Array<{ path: string; headers: Readonly<Record<string, string>> }> = [];
  const fetch: DiscoveryFetch = (path, headers, signal) => {
    requests.push({ path, headers });
    const answer = routes[path]?.(headers) ?? json(404, { kind: 'Status', code: 404 });
    if (answer === 'hang') return new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
    if (answer instanceof Error) return Promise.reject(answer);
    return Promise.resolve(answer);
  };
  return { fetch, requests };
}

const aggregatedMetrics = {
  kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {},
  items: [{ metadata: { name: 'metrics.k8s.io' }, versions: [metrics.aggregated] }],
};
const GV = [{ group: 'metrics.k8s.io', version: 'v1beta1' }];

describe('fetchBackendDiscovery', () => {
  it('reads the aggregated document, then revalidates with If-None-Match and takes a 304', async () => {
    const s = server({ '/apis': (h) => (h['if-none-match'] === '"E1"' ? { status: 304, headers: {}, body: Buffer.alloc(0) } : json(200, aggregatedMetrics, { 'content-type': V2, ETag: '"E1"' })) });
    const first = await fetchBackendDiscovery(s.fetch, GV);
    expect(first.via).toBe('aggregated');
    expect(first.etag).toBe('"E1"');
    expect(first.groupVersions.get('v1beta1.metrics.k8s.io')).toEqual({ resources: metrics.aggregated.resources, freshness: 'Current' });
    expect(s.requests[0]).toEqual({ path: '/apis', headers: { accept: AGGREGATED_ACCEPT } });

    const second = await fetchBackendDiscovery(s.fetch, GV, first);
    expect(second.via).toBe('not-modified');
    expect(s.requests[1]!.headers['if-none-match']).toBe('"E1"');
    expect(second.groupVersions.get('v1beta1.metrics.k8s.io')).toEqual(first.groupVersions.get('v1beta1.metrics.k8s.io'));
  });

  it('falls back to legacy per group-version on 406, one request each, no ETag reuse', async () => {
    const s = server({
      '/apis': () => json(406, { kind: 'Status', code: 406 }),
      '/apis/metrics.k8s.io/v1beta1': () => json(200, metrics.list),
      '/apis/metrics.k8s.io/v1': () => json(503, { kind: 'Status', code: 503, message: 'service unavailable' }),
    });
    const r = await fetchBackendDiscovery(s.fetch, [...GV, { group: 'metrics.k8s.io', version: 'v1' }]);
    expect(r.via).toBe('legacy');
    expect(JSON.stringify(r.groupVersions.get('v1beta1.metrics.k8s.io'))).toBe(JSON.stringify({ resources: metrics.aggregated.resources, freshness: 'Current' }));
    expect(r.groupVersions.get('v1.metrics.k8s.io')).toEqual({ resources: [], freshness: 'Stale' });
    expect(r.errors.get('v1.metrics.k8s.io')).toContain('HTTP 503');
    expect(s.requests.map((q) => q.path).sort()).toEqual(['/apis', '/apis/metrics.k8s.io/v1', '/apis/metrics.k8s.io/v1beta1']);
    expect(s.requests.filter((q) => q.path !== '/apis').every((q) => q.headers.accept === 'application/json' && !q.headers['if-none-match'])).toBe(true);
  });

  it('treats a plain APIGroupList answer (no aggregated Content-Type) as legacy', async () => {
    const s = server({
      '/apis': () => json(200, { kind: 'APIGroupList', apiVersion: 'v1', groups: [] }),
      '/apis/metrics.k8s.io/v1beta1': () => json(200, metrics.list),
    });
    const r = await fetchBackendDiscovery(s.fetch, GV);
    expect(r.via).toBe('legacy');
    expect(r.groupVersions.get('v1beta1.metrics.k8s.io')?.freshness).toBe('Current');
  });

  it('keeps the last known resources as Stale when the backend is down, errors, or times out', async () => {
    const up = server({ '/apis': () => json(200, aggregatedMetrics, { 'content-type': V2 }) });
    const good = await fetchBackendDiscovery(up.fetch, GV);
    for (const route of [() => new Error('connect ECONNREFUSED 127.0.0.1:1'), () => json(500, {}), () => 'hang' as const, () => ({ status: 200, headers: { 'content-type': V2 }, body: Buffer.from('{not json') })]) {
      const down = server({ '/apis': route as Route });
      const r = await fetchBackendDiscovery(down.fetch, GV, good, { timeoutMs: 30 });
      expect(r.via).toBe('failed');
      expect(r.groupVersions.get('v1beta1.metrics.k8s.io')).toEqual({ resources: metrics.aggregated.resources, freshness: 'Stale' });
      expect(r.errors.get('v1beta1.metrics.k8s.io')).toMatch(/ECONNREFUSED|HTTP 500|timed out after 30 ms|invalid JSON/);
    }
  });

  it('marks a group-version the backend does not list as Stale with empty resources', async () => {
    const s = server({ '/apis': () => json(200, { ...aggregatedMetrics, items: [] }, { 'content-type': V2 }) });
    const r = await fetchBackendDiscovery(s.fetch, GV);
    expect(r.groupVersions.get('v1beta1.metrics.k8s.io')).toEqual({ resources: [], freshness: 'Stale' });
    expect(r.errors.get('v1beta1.metrics.k8s.io')).toContain('does not list /apis/metrics.k8s.io/v1beta1');
  });
});

describe('fetchUpstreamDiscovery', () => {
  it('returns an aggregated upstream document as is', async () => {
    const doc = fixture('upstream-apigroupdiscoverylist.json').document;
    const s = server({ '/apis': () => json(200, doc, { 'content-type': 'application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io', etag: '"U"' }) });
    const r = await fetchUpstreamDiscovery(s.fetch);
    expect(r).toMatchObject({ via: 'aggregated', etag: '"U"' });
    expect(r.document).toEqual(doc);
  });

  it('builds the document from an old upstream\'s legacy discovery (plain APIGroupList, per-GV lists)', async () => {
    const s = server({
      '/apis': () => json(200, { kind: 'APIGroupList', apiVersion: 'v1', groups: [
        { name: 'apps', versions: [{ groupVersion: 'apps/v1', version: 'v1' }] },
        { name: 'metrics.k8s.io', versions: [{ groupVersion: 'metrics.k8s.io/v1beta1', version: 'v1beta1' }] },
      ] }),
      '/apis/apps/v1': () => json(200, fixture('apps-v1-legacy.json').list),
      '/apis/metrics.k8s.io/v1beta1': () => json(503, {}),
    });
    const r = await fetchUpstreamDiscovery(s.fetch);
    expect(r.via).toBe('legacy');
    expect(r.document?.items).toEqual([
      { metadata: { name: 'apps' }, versions: [fixture('apps-v1-legacy.json').aggregated] },
      { metadata: { name: 'metrics.k8s.io' }, versions: [{ version: 'v1beta1', freshness: 'Stale' }] },
    ]);
    expect(r.errors[0]).toContain('/apis/metrics.k8s.io/v1beta1: GET /apis/metrics.k8s.io/v1beta1: HTTP 503');
  });

  it('asks for the legacy list after a 406, and reports an upstream that is down', async () => {
    const s = server({ '/apis': (h) => (h.accept === 'application/json' ? json(200, { kind: 'APIGroupList', groups: [] }) : json(406, {})) });
    expect(await fetchUpstreamDiscovery(s.fetch)).toMatchObject({ via: 'legacy', document: { items: [] } });
    const down = server({ '/apis': () => new Error('connect ECONNREFUSED') });
    expect(await fetchUpstreamDiscovery(down.fetch)).toEqual({ document: undefined, etag: undefined, via: 'failed', errors: ['connect ECONNREFUSED'] });
  });
});

describe('isAggregatedContentType', () => {
  it.each([
    [V2, true],
    ['application/json;v=v2beta1;as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;charset=utf-8', true],
    ['application/json', false],
    ['application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList', false],
    [undefined, false],
  ])('%s → %s', (ct, want) => expect(isAggregatedContentType(ct)).toBe(want));
});
