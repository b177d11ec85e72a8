/**
 * API aggregation as kubectl sees it, with the demo's real pieces in process: the dev cluster (which
 * publishes Service kube-system/metrics-server and its EndpointSlice), dev-metrics (metrics.k8s.io
 * from the dev cluster's pod processes, HTTPS) registered by `--apiservice-config`, and the proxy.
 * kubectl 1.27 reads aggregated discovery v2beta1, 1.33 reads v2; both must make exactly one `/apis`
 * request, see metrics.k8s.io, print `top` figures and the APIService's AVAILABLE column, and behave
 * as against a real cluster whose metrics-server is down — then recover when it is back.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { METRICS_SERVICE, startDemoMetrics, type DemoMetrics } from '../../dev/demo-metrics.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { startDevMetrics } from '../../dev/metrics/dev-metrics.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { counterValue } from '../helpers/metrics.js';
import { waitFor } from '../helpers/wait.js';

const skipReason = kubectlE2eSkipReason();
const VERSIONS: KubectlVersion[] = ['1.27', '1.33'];

describe.skipIf(skipReason !== undefined)('kubectl → proxy → aggregated metrics.k8s.io (dev-metrics) and the dev cluster', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ksp-agg-e2e-'));
  const kubeconfig = join(dir, 'kubeconfig');
  let cluster: DevCluster;
  let metrics: DemoMetrics;
  let proxy: RunningServer;
  let run: (version: KubectlVersion, args: string[], timeoutMs?: number) => ReturnType<typeof runKubectl>;

  beforeAll(async () => {
    cluster = await startDevCluster({ host: '127.0.0.1', port: 0, services: [METRICS_SERVICE] });
    metrics = await startDemoMetrics(dir, cluster.url);
    const config = await resolveConfig({
      listen: '127.0.0.1:0',
      upstream: cluster.url,
      apiserviceConfig: metrics.apiserviceConfigFile,
      proxyClientCertFile: metrics.proxyClientCertFile,
      proxyClientKeyFile: metrics.proxyClientKeyFile,
    });
    proxy = await startServer(config, { aggregatorIntervals: { recheckMs: 2_000, retryMs: 300 } });
    writeKubeconfig(kubeconfig, { server: proxy.url, name: 'aggregation-e2e' });
    let n = 0;
    // A fresh discovery cache per run: every run shows its own discovery requests.
    run = (version, args, timeoutMs = 30_000) => runKubectl(findKubectl(version), [`--cache-dir=${join(dir, `cache-${n++}`)}`, ...args], { kubeconfig, timeoutMs });
    // dev-metrics has figures once it has scraped twice.
    await waitFor('pod figures', async () => {
      const r = await run('1.33', ['get', '--raw', '/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/demo']);
      return r.code === 0 ? true : undefined;
    });
  }, 90_000);

  afterAll(async () => {
    await proxy?.close();
    await metrics?.metrics.close();
    await cluster?.close();
  });

  for (const version of VERSIONS) {
    it(`kubectl ${version}: api-resources lists metrics.k8s.io beside the core resources with one /api and one /apis request; top pod and top node print figures; get apiservices shows True`, async () => {
      const resources = await run(version, ['api-resources', '-v=6']);
      expect(resources.code, summary(resources)).toBe(0);
      const out = resources.stdout.toString();
      expect(out).toMatch(/^pods\s+po\s+v1\s+true\s+Pod$/m);
      expect(out).toMatch(/^pods\s+metrics\.k8s\.io\/v1beta1\s+true\s+PodMetrics$/m);
      expect(out).toMatch(/^nodes\s+metrics\.k8s\.io\/v1beta1\s+false\s+NodeMetrics$/m);
      expect(out).toMatch(/^apiservices\s+apiregistration\.k8s\.io\/v1\s+false\s+APIService$/m);
      const gets = [...resources.stderr.matchAll(/(?:GET |verb="GET" url=")https?:\/\/[^/]+(\/[^?" ]*)/g)].map((m) => m[1]);
      expect(gets, resources.stderr).toEqual(['/api', '/apis']);

      const top = await run(version, ['top', 'pod', 'demo']);
      expect(top.code, summary(top)).toBe(0);
      expect(top.stdout.toString()).toMatch(/^NAME\s+CPU\(cores\)\s+MEMORY\(bytes\)\s*\ndemo\s+\d+m\s+\d+Mi\s*$/m);
      const topNode = await run(version, ['top', 'node']);
      expect(topNode.code, summary(topNode)).toBe(0);
      expect(topNode.stdout.toString()).toMatch(/^dev-node\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%\s*$/m);

      const apiservices = await run(version, ['get', 'apiservices']);
      expect(apiservices.code, summary(apiservices)).toBe(0);
      expect(apiservices.stdout.toString()).toMatch(/^NAME\s+SERVICE\s+AVAILABLE\s+AGE\s*\nv1beta1\.metrics\.k8s\.io\s+kube-system\/metrics-server\s+True\s+\S+\s*$/m);
    });
  }

  it('get --raw /apis (legacy) and the aggregated forms are merged and ordered; a repeated request with the ETag gets 304', async () => {
    const legacy = (await (await fetch(`${proxy.url}/apis`)).json()) as { groups: { name: string; preferredVersion: { version: string } }[] };
    const names = legacy.groups.map((g) => g.name);
    expect(names[0]).toBe('apiregistration.k8s.io');
    expect(names).toContain('metrics.k8s.io');
    expect(names).toContain('discovery.k8s.io');
    // Built-in priorities (authorization.k8s.io 17600, discovery.k8s.io 16700) before metrics.k8s.io (100).
    expect(names.indexOf('authorization.k8s.io')).toBeLessThan(names.indexOf('discovery.k8s.io'));
    expect(names.indexOf('discovery.k8s.io')).toBeLessThan(names.indexOf('metrics.k8s.io'));
    for (const v of ['v2', 'v2beta1']) {
      const accept = `application/json;g=apidiscovery.k8s.io;v=${v};as=APIGroupDiscoveryList`;
      const res = await fetch(`${proxy.url}/apis`, { headers: { Accept: `${accept},application/json` } });
      expect(res.headers.get('content-type')).toBe(accept);
      const etag = res.headers.get('etag')!;
      expect(etag).toMatch(/^"[0-9A-F]{128}"$/);
      const doc = (await res.json()) as { apiVersion: string; items: { metadata: { name: string }; versions: { version: string; freshness: string; resources: { resource: string }[] }[] }[] };
      expect(doc.apiVersion).toBe(`apidiscovery.k8s.io/${v}`);
      expect(doc.items.map((g) => g.metadata.name)).toEqual(names);
      const m = doc.items.find((g) => g.metadata.name === 'metrics.k8s.io')!;
      expect(m.versions).toEqual([expect.objectContaining({ version: 'v1beta1', freshness: 'Current' })]);
      expect(m.versions[0]!.resources.map((r) => r.resource).sort()).toEqual(['nodes', 'pods']);
      const again = await fetch(`${proxy.url}/apis`, { headers: { Accept: accept, 'If-None-Match': etag } });
      expect(again.status).toBe(304);
    }
  });

  it('backend killed: get pods still works, the group answers 503, kubectl top fails as on a real cluster (no hang), v2 marks it Stale, get apiservices shows False with the reason, the gauge reads 1; restarted: Available again within 30 s and top works', async () => {
    const port = metrics.metrics.port;
    await metrics.metrics.close();
    await waitFor('unavailable', async () => {
      const r = await fetch(`${proxy.url}/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io`);
      const a = (await r.json()) as { status: { conditions: { status: string }[] } };
      return a.status.conditions[0]?.status === 'False' ? true : undefined;
    });
    const pods = await run('1.33', ['get', 'pods']);
    expect(pods.code, summary(pods)).toBe(0);
    expect(pods.stdout.toString()).toMatch(/^demo\s/m);
    const raw = await fetch(`${proxy.url}/apis/metrics.k8s.io/v1beta1/pods`);
    expect(raw.status).toBe(503);
    expect(await raw.json()).toMatchObject({ message: 'service unavailable', code: 503 });
    const top = await run('1.33', ['top', 'pod', 'demo'], 30_000);
    expect(top.code, summary(top)).not.toBe(0);
    expect(top.stderr).toMatch(/Metrics API not available|the server is currently unable to handle the request|service unavailable/);
    const v2 = (await (await fetch(`${proxy.url}/apis`, { headers: { Accept: 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList' } })).json()) as {
      items: { metadata: { name: string }; versions: { freshness: string }[] }[];
    };
    expect(v2.items.find((g) => g.metadata.name === 'metrics.k8s.io')!.versions[0]!.freshness).toBe('Stale');
    const apiservices = await run('1.33', ['get', 'apiservices']);
    expect(apiservices.stdout.toString()).toMatch(/^v1beta1\.metrics\.k8s\.io\s+kube-system\/metrics-server\s+False \(FailedDiscoveryCheck\)\s+\S+\s*$/m);
    const exposition = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(counterValue(exposition, 'aggregator_unavailable_apiservice', { name: 'v1beta1.metrics.k8s.io' })).toBe(1);

    const pki = join(dir, 'pki');
    const restarted = await startDevMetrics({ port, cluster: cluster.url, tls: { cert: readFileSync(join(pki, 'metrics-server.crt')), key: readFileSync(join(pki, 'metrics-server.key')) } });
    metrics = { ...metrics, metrics: restarted };
    const started = Date.now();
    await waitFor('available again', async () => {
      const r = await run('1.33', ['get', 'apiservices']);
      return /v1beta1\.metrics\.k8s\.io\s+\S+\s+True/.test(r.stdout.toString()) ? true : undefined;
    }, 30_000);
    expect(Date.now() - started).toBeLessThan(30_000);
    const topAgain = await waitFor('top works again', async () => {
      const r = await run('1.33', ['top', 'pod', 'demo']);
      return r.code === 0 ? r : undefined;
    });
    expect(topAgain.stdout.toString()).toMatch(/^demo\s+\d+m\s+\d+Mi/m);
  });
});
