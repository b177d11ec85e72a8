import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHandler } from '../../../dev/metrics/api-handler.js';
import type { ObjectRef } from '../../../dev/metrics/metrics-objects.js';
import { MetricsStore } from '../../../dev/metrics/metrics-store.js';
import type { MetricsPoint } from '../../../dev/metrics/resource-batch.js';

const pt = (timestampMs: number, cpuSeconds: number, memoryBytes = 4096): MetricsPoint => ({ timestampMs, cpuSeconds, memoryBytes, startTimeMs: 1 });
const T0 = Date.parse('2026-01-01T00:00:00Z');
const pods = new Map<string, ObjectRef>([
  ['default/web', { name: 'web', namespace: 'default', labels: { app: 'web' } }],
  ['default/new', { name: 'new', namespace: 'default', labels: {} }],
  ['prod/db', { name: 'db', namespace: 'prod', labels: { app: 'db' } }],
]);
const nodes = new Map<string, ObjectRef>([['dev-node', { name: 'dev-node', labels: { role: 'dev' } }]]);
const store = new MetricsStore(15_000);
let ready = false;
let server: Server;
let base: string;

beforeAll(async () => {
  const containers = (t: number, cpu: number) =>
    new Map([
      ['default/web', new Map([['app', pt(t, cpu)]])],
      ['prod/db', new Map([['db', pt(t, cpu * 2)]])],
    ]);
  store.store({ nodes: new Map([['dev-node', pt(T0, 10)]]), pods: containers(T0, 1) });
  store.store({ nodes: new Map([['dev-node', pt(T0 + 2000, 12)]]), pods: containers(T0 + 2000, 1.5) });
  server = createServer(createApiHandler({ store, pods: () => pods, nodes: () => nodes, ready: () => ready, now: () => T0 + 5000 }));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const get = async (path: string, headers: Record<string, string> = {}, method = 'GET') => {
  const res = await fetch(base + path, { headers, method });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { code: res.status, headers: res.headers, text, json };
};

describe('health', () => {
  it('answers ok on /healthz and /livez, and /readyz once ready', async () => {
    expect((await get('/healthz')).text).toBe('ok');
    expect((await get('/livez')).code).toBe(200);
    expect((await get('/readyz')).code).toBe(500);
    ready = true;
    expect(await get('/readyz')).toMatchObject({ code: 200, text: 'ok' });
  });
});

describe('discovery', () => {
  it('serves legacy /apis without an aggregated Accept', async () => {
    const r = await get('/apis', { Accept: 'application/json' });
    expect(r.json.kind).toBe('APIGroupList');
    expect(r.headers.get('content-type')).toBe('application/json');
  });
  it('serves aggregated /apis with its Content-Type, an ETag and 304', async () => {
    const accept = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json';
    const r = await get('/apis', { Accept: accept });
    expect(r.code).toBe(200);
    expect(r.json.kind).toBe('APIGroupDiscoveryList');
    expect(r.headers.get('content-type')).toBe('application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList');
    const etag = r.headers.get('etag')!;
    expect(etag).toMatch(/^"[0-9a-f]+"$/);
    expect((await get('/apis', { Accept: accept, 'If-None-Match': etag })).code).toBe(304);
    const beta = await get('/apis', { Accept: 'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList' });
    expect(beta.json.apiVersion).toBe('apidiscovery.k8s.io/v2beta1');
    expect(beta.headers.get('etag')).not.toBe(etag);
  });
  it('serves the group and the resource list', async () => {
    expect((await get('/apis/metrics.k8s.io')).json.kind).toBe('APIGroup');
    expect((await get('/apis/metrics.k8s.io/v1beta1/')).json.kind).toBe('APIResourceList');
  });
});

describe('pods', () => {
  it('gets one PodMetrics', async () => {
    const r = await get('/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web');
    expect(r.code).toBe(200);
    expect(r.json).toEqual({
      kind: 'PodMetrics',
      apiVersion: 'metrics.k8s.io/v1beta1',
      metadata: { name: 'web', namespace: 'default', creationTimestamp: '2026-01-01T00:00:05Z', labels: { app: 'web' } },
      timestamp: '2026-01-01T00:00:02Z',
      window: '2s',
      containers: [{ name: 'app', usage: { cpu: '250m', memory: '4Ki' } }],
    });
  });
  it('answers 404 for a pod without metrics yet, and for a pod that does not exist', async () => {
    expect((await get('/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/new')).json).toMatchObject({
      code: 404,
      message: 'pods.metrics.k8s.io "default/new" not found',
    });
    expect((await get('/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope')).json).toMatchObject({ code: 404, message: 'pod "nope" not found' });
  });
  it('lists a namespace, all namespaces (sorted, pods without metrics left out), and by label', async () => {
    const ns = await get('/apis/metrics.k8s.io/v1beta1/namespaces/default/pods');
    expect(ns.json.kind).toBe('PodMetricsList');
    expect(ns.json.items.map((i: any) => i.metadata.name)).toEqual(['web']);
    expect(ns.json.items[0].kind).toBeUndefined();
    const all = await get('/apis/metrics.k8s.io/v1beta1/pods');
    expect(all.json.items.map((i: any) => `${i.metadata.namespace}/${i.metadata.name}`)).toEqual(['default/web', 'prod/db']);
    expect(all.json.items[1].containers[0].usage.cpu).toBe('500m');
    const sel = await get(`/apis/metrics.k8s.io/v1beta1/pods?labelSelector=${encodeURIComponent('app in (db)')}`);
    expect(sel.json.items.map((i: any) => i.metadata.name)).toEqual(['db']);
    const field = await get('/apis/metrics.k8s.io/v1beta1/pods?fieldSelector=metadata.namespace%3Dprod');
    expect(field.json.items.map((i: any) => i.metadata.name)).toEqual(['db']);
  });
  it('refuses a bad selector with 400', async () => {
    expect((await get('/apis/metrics.k8s.io/v1beta1/pods?labelSelector=a%20in%20b')).json).toMatchObject({ kind: 'Status', code: 400 });
  });
});

describe('nodes', () => {
  it('gets and lists NodeMetrics', async () => {
    const one = await get('/apis/metrics.k8s.io/v1beta1/nodes/dev-node');
    expect(one.json).toMatchObject({ kind: 'NodeMetrics', metadata: { name: 'dev-node', labels: { role: 'dev' } }, window: '2s', usage: { cpu: '1', memory: '4Ki' } });
    const list = await get('/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=role%3Ddev');
    expect(list.json.items).toHaveLength(1);
    expect((await get('/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=role%3Dprod')).json.items).toEqual([]);
    expect((await get('/apis/metrics.k8s.io/v1beta1/nodes/other')).json).toMatchObject({ code: 404, message: 'node "other" not found' });
  });
});

describe('everything else', () => {
  it.each([
    ['/api', 'GET', 404],
    ['/apis/metrics.k8s.io/v1beta1/services', 'GET', 404],
    ['/apis/other.k8s.io/v1', 'GET', 404],
    ['/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web/x', 'GET', 404],
    ['/apis/metrics.k8s.io/v1beta1/pods?watch=true', 'GET', 405],
    ['/apis/metrics.k8s.io/v1beta1/pods', 'POST', 405],
    ['/apis/metrics.k8s.io/v1beta1/namespaces/%E0/pods', 'GET', 404],
  ])('%s %s → %d Status', async (path, method, code) => {
    const r = await get(path, {}, method);
    expect(r.code).toBe(code);
    expect(r.json).toMatchObject({ kind: 'Status', code });
  });
});
