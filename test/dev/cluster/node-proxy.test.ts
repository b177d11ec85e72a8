import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { nodeProxyTarget } from '../../../dev/cluster/node-proxy.js';
import { parsePrometheusText } from '../../../dev/metrics/prometheus-text.js';

let cluster: DevCluster;
beforeAll(async () => {
  cluster = await startDevCluster({ pods: ['extra'] });
});
afterAll(async () => {
  await cluster.close();
});

describe('nodeProxyTarget', () => {
  it.each([
    ['/api/v1/nodes/dev-node/proxy/metrics/resource', ['dev-node', '/metrics/resource']],
    ['/api/v1/nodes/dev-node/proxy', ['dev-node', '/']],
    ['/api/v1/nodes/a%20b/proxy/x?y=1', ['a b', '/x']],
    ['/api/v1/nodes/dev-node', undefined],
    ['/api/v1/nodes/dev-node/status', undefined],
    ['/api/v1/nodes/%E0/proxy/x', undefined],
  ])('%s', (url, want) => {
    expect(nodeProxyTarget(url)).toEqual(want);
  });
});

describe('GET /api/v1/nodes/dev-node/proxy/metrics/resource', () => {
  it('answers the kubelet resource metrics of every pod container and the node', async () => {
    const before = Date.now();
    const res = await fetch(`${cluster.url}/api/v1/nodes/dev-node/proxy/metrics/resource`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const parsed = parsePrometheusText(await res.text());
    const of = (name: string) => parsed.samples.filter((s) => s.name === name);
    expect(of('container_cpu_usage_seconds_total').map((s) => s.labels)).toEqual([
      { container: 'demo', namespace: 'default', pod: 'demo' },
      { container: 'extra', namespace: 'default', pod: 'extra' },
    ]);
    for (const s of of('container_memory_working_set_bytes')) {
      expect(s.value).toBeGreaterThan(0); // the main /bin/sh is resident
      expect(s.timestampMs).toBeGreaterThanOrEqual(before);
    }
    expect(of('pod_memory_working_set_bytes')).toHaveLength(2);
    expect(of('node_cpu_usage_seconds_total')[0]!.value).toBeGreaterThan(0);
    expect(of('node_memory_working_set_bytes')[0]!.value).toBeGreaterThan(0);
    expect(of('resource_scrape_error')[0]!.value).toBe(0);
  });

  it.each([
    ['an unknown node', '/api/v1/nodes/other/proxy/metrics/resource', 'GET', 404, 'nodes "other" not found'],
    ['another kubelet path', '/api/v1/nodes/dev-node/proxy/pods', 'GET', 404, "the dev cluster's kubelet serves only /metrics and /metrics/resource through nodes/proxy, not /pods"],
    ['a POST', '/api/v1/nodes/dev-node/proxy/metrics/resource', 'POST', 405, 'the server does not allow this method on the requested resource (POST)'],
    ['a POST to /metrics', '/api/v1/nodes/dev-node/proxy/metrics', 'POST', 405, 'the server does not allow this method on the requested resource (POST)'],
  ])('refuses %s with a Status', async (_name, path, method, code, message) => {
    const res = await fetch(cluster.url + path, { method });
    expect(res.status).toBe(code);
    const body = (await res.json()) as { kind: string; code: number; message: string };
    expect(body).toMatchObject({ kind: 'Status', code, message });
  });
});

describe('GET /api/v1/nodes/dev-node/proxy/metrics', () => {
  it("answers the kubelet's /metrics: its WebSocket streaming counter, as Prometheus text", async () => {
    const res = await fetch(`${cluster.url}/api/v1/nodes/dev-node/proxy/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await res.text()).toBe(cluster.metrics.kubelet.exposition());
    expect(cluster.metrics.kubelet.exposition()).toMatch(/^# TYPE kubelet_websocket_streaming_requests_total counter$/m);
  });
});
