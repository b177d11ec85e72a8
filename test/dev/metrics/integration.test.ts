import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, Metrics } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { startDevMetrics, type DevMetrics } from '../../../dev/metrics/dev-metrics.js';
import { writeKubeconfig } from '../../../dev/kubeconfig.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary, type KubectlResult } from '../../helpers/kubectl.js';

// The whole path: a CPU-burning process exec'd into a dev-cluster pod → the dev cluster's
// /metrics/resource (through nodes/proxy) → dev-metrics' scrape → PodMetrics read by kubectl and
// client-node pointed straight at dev-metrics.

const skip = kubectlE2eSkipReason();

/** A CPU quantity (`853485064n`, `5m`, `1`) in nanocores. */
function nanocores(q: string): number {
  const m = /^(\d+)(n|u|m|)$/.exec(q);
  if (!m) throw new Error(`unexpected cpu quantity ${q}`);
  return Number(m[1]) * { n: 1, u: 1e3, m: 1e6, '': 1e9 }[m[2] as 'n' | 'u' | 'm' | ''];
}

/** A memory quantity (`4752Ki`, `1500`) in bytes. */
function bytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|k|)$/.exec(q);
  if (!m) throw new Error(`unexpected memory quantity ${q}`);
  return Number(m[1]) * { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, k: 1000, '': 1 }[m[2] as 'Ki'];
}

describe.skipIf(skip)('dev-metrics over the dev cluster (real processes, real kubectl)', () => {
  let cluster: DevCluster;
  let metrics: DevMetrics;
  let dir: string;
  let clusterKubeconfig: string;
  let metricsKubeconfig: string;
  let burner: Promise<KubectlResult>;
  const kubectl = findKubectl('1.33');
  const kubectlOld = findKubectl('1.27');

  /** Resolve once `check` holds after a scrape round (checked after every round, bounded). */
  const afterScrapes = (check: () => Promise<boolean>, deadlineMs = 30_000): Promise<void> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        metrics.scraper.off('scrape', onScrape);
        reject(new Error(`condition not met within ${deadlineMs} ms; last scrape: ${JSON.stringify(metrics.scraper.last)}`));
      }, deadlineMs);
      let busy = false;
      const onScrape = (): void => {
        if (busy) return;
        busy = true;
        check().then((ok) => {
          busy = false;
          if (!ok) return;
          clearTimeout(timer);
          metrics.scraper.off('scrape', onScrape);
          resolve();
        }, reject);
      };
      metrics.scraper.on('scrape', onScrape);
    });

  beforeAll(async () => {
    cluster = await startDevCluster({ pods: ['burner'] });
    metrics = await startDevMetrics({ cluster: cluster.url, scrapeIntervalMs: 500, metricResolutionMs: 5_000 });
    dir = mkdtempSync(join(tmpdir(), 'dev-metrics-e2e-'));
    clusterKubeconfig = join(dir, 'cluster');
    metricsKubeconfig = join(dir, 'metrics');
    writeKubeconfig(clusterKubeconfig, { server: cluster.url, name: 'dev-cluster' });
    writeKubeconfig(metricsKubeconfig, { server: metrics.url, name: 'dev-metrics' });
    // Bounded: `timeout` ends the busy loop after 20 s even if the test fails early.
    burner = runKubectl(kubectl, ['exec', 'burner', '--', 'timeout', '20', 'sh', '-c', 'while :; do :; done'], {
      kubeconfig: clusterKubeconfig,
      timeoutMs: 40_000,
    });
    await afterScrapes(async () => {
      const r = await fetch(`${metrics.url}/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/burner`);
      if (r.status !== 200) return false;
      const body = (await r.json()) as { containers: { usage: { cpu: string } }[] };
      return nanocores(body.containers[0]!.usage.cpu) > 0;
    });
  }, 60_000);

  afterAll(async () => {
    await metrics?.close();
    await cluster?.close(); // kills the burner with the pod
    await burner?.catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('kubectl get --raw shows the exec\'d burner\'s CPU and memory', async () => {
    const r = await runKubectl(kubectl, ['get', '--raw', '/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/burner'], {
      kubeconfig: metricsKubeconfig,
      timeoutMs: 20_000,
    });
    expect(r.code, summary(r)).toBe(0);
    const pod = JSON.parse(r.stdout.toString()) as { kind: string; window: string; containers: { name: string; usage: { cpu: string; memory: string } }[] };
    expect(pod.kind).toBe('PodMetrics');
    expect(pod.window).toMatch(/^(\d+ms|\d+(\.\d+)?s)$/);
    expect(pod.containers.map((c) => c.name)).toEqual(['burner']);
    expect(nanocores(pod.containers[0]!.usage.cpu)).toBeGreaterThan(0);
    expect(bytes(pod.containers[0]!.usage.memory)).toBeGreaterThan(0);
  });

  it('kubectl 1.27 lists every pod across namespaces and reads NodeMetrics', async () => {
    const pods = await runKubectl(kubectlOld, ['get', '--raw', '/apis/metrics.k8s.io/v1beta1/pods'], { kubeconfig: metricsKubeconfig, timeoutMs: 20_000 });
    expect(pods.code, summary(pods)).toBe(0);
    const list = JSON.parse(pods.stdout.toString()) as { kind: string; items: { metadata: { name: string } }[] };
    expect(list.kind).toBe('PodMetricsList');
    expect(list.items.map((i) => i.metadata.name)).toEqual(['burner', 'demo']);
    const node = await runKubectl(kubectlOld, ['get', '--raw', '/apis/metrics.k8s.io/v1beta1/nodes/dev-node'], { kubeconfig: metricsKubeconfig, timeoutMs: 20_000 });
    expect(node.code, summary(node)).toBe(0);
    const nm = JSON.parse(node.stdout.toString()) as { usage: { cpu: string; memory: string } };
    expect(nanocores(nm.usage.cpu)).toBeGreaterThan(0);
    expect(bytes(nm.usage.memory)).toBeGreaterThan(0);
  });

  it('kubectl top pod works pointed straight at dev-metrics (it needs only metrics.k8s.io)', async () => {
    const r = await runKubectl(kubectl, ['top', 'pod'], { kubeconfig: metricsKubeconfig, timeoutMs: 20_000 });
    expect(r.code, summary(r)).toBe(0);
    const lines = r.stdout.toString().trim().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+CPU\(cores\)\s+MEMORY\(bytes\)/);
    const burnerRow = lines.find((l) => l.startsWith('burner '));
    expect(burnerRow, r.stdout.toString()).toMatch(/^burner\s+\d+m\s+\d+Mi\s*$/);
    expect(Number(/^burner\s+(\d+)m/.exec(burnerRow!)![1])).toBeGreaterThan(0);
  });

  it('client-node Metrics reads pod and node metrics', async () => {
    const kc = new KubeConfig();
    // client-node refuses plain http unless skipTLSVerify is set (there is nothing to verify).
    kc.loadFromOptions({
      clusters: [{ name: 'dev-metrics', server: metrics.url, skipTLSVerify: true }],
      users: [{ name: 'anonymous' }],
      contexts: [{ name: 'dev-metrics', cluster: 'dev-metrics', user: 'anonymous' }],
      currentContext: 'dev-metrics',
    });
    const client = new Metrics(kc);
    const pods = await client.getPodMetrics('default');
    const b = pods.items.find((p) => p.metadata.name === 'burner');
    expect(b).toBeDefined();
    expect(nanocores(b!.containers[0]!.usage.cpu)).toBeGreaterThan(0);
    expect(bytes(b!.containers[0]!.usage.memory)).toBeGreaterThan(0);
    const nodes = await client.getNodeMetrics();
    expect(nodes.items.map((n) => n.metadata.name)).toEqual(['dev-node']);
  });
});
