/**
 * Test fixture (not a test): which way WebSocket sessions went inside a dev cluster, read from its
 * own `/metrics` (the apiserver look-alike) and `nodes/dev-node/proxy/metrics` (the kubelet), and the
 * kubectl sessions the kubectl tests run against it. kubectl ≥ 1.30 falls back to SPDY silently, so
 * every WebSocket claim in those tests is a counter that moved by exactly the sessions run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDevCluster, type DevCluster, type DevClusterOptions } from '../../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../../dev/kubeconfig.js';
import { counterValue } from '../../helpers/metrics.js';
import { findKubectl, runKubectl, startKubectl, summary, type KubectlResult, type KubectlVersion } from '../../helpers/kubectl.js';

const SUBRESOURCES = ['exec', 'attach', 'portforward'] as const;
const PROXY_TYPES = ['proxied_to_kubelet', 'translated_at_apiserver', 'tunneled_at_apiserver'] as const;

/** Every streaming counter of the dev cluster, flattened: `apiserver/<subresource>/<proxy_type>`, `kubelet/<subresource>`, `translator/<code>`, `tunnel/<code>`. */
export type WayCounts = Record<string, number>;

async function text(url: string): Promise<string> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return res.text();
}

/** Read the counters now. */
export async function wayCounts(cluster: DevCluster): Promise<WayCounts> {
  const [api, kubelet] = await Promise.all([text(`${cluster.url}/metrics`), text(`${cluster.url}/api/v1/nodes/${cluster.nodeName}/proxy/metrics`)]);
  const out: WayCounts = {};
  for (const subresource of SUBRESOURCES) {
    for (const proxyType of PROXY_TYPES) {
      const n = counterValue(api, 'apiserver_websocket_streaming_requests_total', { subresource, proxy_type: proxyType });
      if (n > 0) out[`apiserver/${subresource}/${proxyType}`] = n;
    }
    const k = counterValue(kubelet, 'kubelet_websocket_streaming_requests_total', { subresource });
    if (k > 0) out[`kubelet/${subresource}`] = k;
  }
  for (const [family, key] of [['apiserver_stream_translator_requests_total', 'translator'], ['apiserver_stream_tunnel_requests_total', 'tunnel']] as const) {
    for (const m of api.matchAll(new RegExp(`^${family}\\{code="(\\d+)"\\} (\\d+)$`, 'gm'))) out[`${key}/${m[1]}`] = Number(m[2]);
  }
  return out;
}

/** What moved between two readings (only the counters that changed). */
export function moved(before: WayCounts, after: WayCounts): WayCounts {
  const out: WayCounts = {};
  for (const [k, v] of Object.entries(after)) if (v !== (before[k] ?? 0)) out[k] = v - (before[k] ?? 0);
  return out;
}

/** A dev cluster, its kubeconfig and a work folder. */
export interface KubectlCluster {
  cluster: DevCluster;
  kubeconfig: string;
  work: string;
  /** Run kubectl `version` with `args` against the cluster (cwd: the work folder). */
  kubectl(version: KubectlVersion, args: string[], stdin?: Buffer, env?: Record<string, string>): Promise<KubectlResult & { out: string; summary: string }>;
  /** The counters that moved while `f` ran. */
  during(f: () => Promise<void>): Promise<WayCounts>;
  close(): Promise<void>;
}

/** Start a dev cluster with `options` and a kubeconfig for it. */
export async function startKubectlCluster(options: DevClusterOptions = {}): Promise<KubectlCluster> {
  const work = mkdtempSync(join(tmpdir(), 'dev-cluster-ways-'));
  const cluster = await startDevCluster({ dataDir: join(work, 'pods'), ...options });
  const kubeconfig = join(work, 'kubeconfig');
  writeKubeconfig(kubeconfig, { server: cluster.url, name: 'dev' });
  return {
    cluster,
    kubeconfig,
    work,
    kubectl: async (version, args, stdin, env) => {
      const r = await runKubectl(findKubectl(version), args, { kubeconfig, cwd: work, timeoutMs: 60_000, ...(stdin ? { stdin } : {}), ...(env ? { env } : {}) });
      return { ...r, out: r.stdout.toString(), summary: summary(r) };
    },
    during: async (f) => {
      const before = await wayCounts(cluster);
      await f();
      return moved(before, await wayCounts(cluster));
    },
    close: async () => {
      await cluster.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
}

/**
 * `kubectl port-forward pod/demo :PORT` until `use(localPort)` is done; resolves with its result.
 * kubectl is stopped with SIGINT afterwards.
 */
export async function withPortForward<T>(c: KubectlCluster, version: KubectlVersion, remotePort: number, use: (localPort: number) => Promise<T>): Promise<T> {
  const pf = startKubectl(findKubectl(version), ['port-forward', 'pod/demo', `:${remotePort}`], { kubeconfig: c.kubeconfig, cwd: c.work, env: {} });
  try {
    const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${remotePort}\\b`), 30_000);
    return await use(Number(m[1]));
  } finally {
    await pf.stop('SIGINT', 10_000);
  }
}
