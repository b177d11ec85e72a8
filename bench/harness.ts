/**
 * The benchmark harness. A row is (path, measurement): a path is a way from kubectl to the pod
 * (direct to the dev cluster, or through the proxy's passthrough, translation or tunnel), with the
 * kubectl environment that selects it; servers run as their own processes (bench/servers.ts). Every
 * row is compared with the direct path's row for the same measurement, in the same run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeKubeconfig } from '../src/kubeconfig.js';
import { FORCE_SPDY_ENV, findKubectl, type KubectlVersion } from '../test/helpers/kubectl.js';
import { measureTransfer } from './kubectl-throughput.js';
import { measureDownload, measureRequestRate, startZeroServer, withPortForward } from './port-forward-throughput.js';
import { startDevClusterProcess, startProxyProcess } from './servers.js';

/** What a row measures. */
export type Measurement = 'stdout' | 'stdin' | 'port-forward' | 'pf-requests';

/** Unit of each measurement. */
export const UNITS: Record<Measurement, 'MB/s' | 'req/s'> = {
  stdout: 'MB/s',
  stdin: 'MB/s',
  'port-forward': 'MB/s',
  'pf-requests': 'req/s',
};

/** A running thing kubectl talks to. */
export interface RunningPath {
  kubeconfig: string;
  close(): Promise<void>;
}

/** A way from kubectl to the pod. */
export interface BenchPath {
  /** Row label, e.g. "direct (dev cluster, SPDY)". */
  name: string;
  /** kubectl environment that selects the protocol (e.g. force SPDY). */
  env: Record<string, string>;
  /** What this path is measured for. */
  measurements: Measurement[];
  /** Start it; `workDir` is a private temp folder. */
  start(workDir: string): Promise<RunningPath>;
}

/** Write a kubeconfig for `url` into `workDir` and return its path. */
function kubeconfigFor(workDir: string, name: string, url: string): string {
  const path = join(workDir, `kubeconfig-${name}`);
  writeKubeconfig(path, { server: url, name });
  return path;
}

/** Dev cluster plus a proxy in front of it with `gates`. */
async function proxied(workDir: string, name: string, gates: string): Promise<RunningPath> {
  const cluster = await startDevClusterProcess();
  try {
    const proxy = await startProxyProcess(cluster.url, ['--feature-gates', gates]);
    return {
      kubeconfig: kubeconfigFor(workDir, name, proxy.url),
      close: async () => {
        await proxy.close();
        await cluster.close();
      },
    };
  } catch (e) {
    await cluster.close();
    throw e;
  }
}

const ALL: Measurement[] = ['stdout', 'stdin', 'port-forward', 'pf-requests'];
const GATES_OFF = 'TranslateStreamCloseWebsocketRequests=false,PortForwardWebsockets=false';
const GATES_ON = 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true';

/** kubectl → dev cluster over SPDY: the baseline every other path is compared with. */
export const DEV_CLUSTER_DIRECT: BenchPath = {
  name: 'direct (dev cluster, SPDY)',
  env: { ...FORCE_SPDY_ENV },
  measurements: ALL,
  async start(workDir) {
    const cluster = await startDevClusterProcess();
    return { kubeconfig: kubeconfigFor(workDir, 'direct', cluster.url), close: () => cluster.close() };
  },
};

/** kubectl → proxy (UpgradeAwareProxy passthrough) → dev cluster, SPDY end to end. */
export const PROXY_PASSTHROUGH: BenchPath = {
  name: 'proxy passthrough (SPDY)',
  env: { ...FORCE_SPDY_ENV },
  measurements: ALL,
  start: (workDir) => proxied(workDir, 'passthrough', GATES_OFF),
};

/** kubectl (WebSocket v5) → proxy StreamTranslatorProxy → dev cluster (SPDY). */
export const PROXY_TRANSLATION: BenchPath = {
  name: 'proxy translation (WS v5 → SPDY)',
  env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' },
  measurements: ['stdout', 'stdin'],
  start: (workDir) => proxied(workDir, 'translation', GATES_ON),
};

/** kubectl (SPDY/3.1+portforward.k8s.io over WebSocket) → proxy tunnel → dev cluster (SPDY). */
export const PROXY_TUNNEL: BenchPath = {
  name: 'proxy tunnel (WS → SPDY port-forward)',
  env: { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'true' },
  measurements: ['port-forward', 'pf-requests'],
  start: (workDir) => proxied(workDir, 'tunnel', GATES_ON),
};

/** The baseline path: ratios are computed against it, same measurement, same run. */
export const BASELINE = DEV_CLUSTER_DIRECT;
export const PATHS: BenchPath[] = [DEV_CLUSTER_DIRECT, PROXY_PASSTHROUGH, PROXY_TRANSLATION, PROXY_TUNNEL];
/** kubectl 1.33 for every path: it speaks all four protocols, so rows differ only by path. */
export const CLIENT: { name: string; version: KubectlVersion } = { name: 'kubectl 1.33', version: '1.33' };

/** Options of {@link runBenchmarks}. */
export interface BenchOptions {
  /** Bytes per transfer (default 500 MB; quick: 50 MB). */
  bytes: number;
  /** Runs per row (default 3; quick: 1). */
  runs: number;
  /** Keep-alive requests per pf-requests run (default 2,000; quick: 200). */
  requests: number;
  /** Per-transfer timeout (default: enough for 5 MB/s). */
  timeoutMs?: number;
  paths?: BenchPath[];
  /** Only these measurements (default: each path's own). */
  measurements?: Measurement[];
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

/** The preset for `--quick` (used by the test) and the default. */
export const QUICK: Pick<BenchOptions, 'bytes' | 'runs' | 'requests'> = { bytes: 50_000_000, runs: 1, requests: 200 };
export const FULL: Pick<BenchOptions, 'bytes' | 'runs' | 'requests'> = { bytes: 500_000_000, runs: 3, requests: 2_000 };

/** One result row. */
export interface BenchRow {
  client: string;
  path: string;
  measurement: Measurement;
  unit: 'MB/s' | 'req/s';
  /** Bytes per transfer, or requests per run for pf-requests. */
  amount: number;
  /** Wall time of each run. */
  wallMs: number[];
  /** Rate of the fastest run. */
  best: number;
  /** Rate of the median run. */
  median: number;
  /** median ÷ the baseline path's median for the same measurement, same run. */
  ratioToBaseline?: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Run every (path, measurement) row; a failed run rejects the whole benchmark. */
export async function runBenchmarks(o: BenchOptions): Promise<BenchRow[]> {
  const log = o.log ?? (() => {});
  const timeoutMs = o.timeoutMs ?? Math.max(60_000, (o.bytes / 5_000_000) * 1000);
  const bin = findKubectl(CLIENT.version);
  const rows: BenchRow[] = [];
  const work = mkdtempSync(join(tmpdir(), 'ksp-bench-'));
  const zero = await startZeroServer();
  try {
    for (const path of o.paths ?? PATHS) {
      const todo = path.measurements.filter((m) => !o.measurements || o.measurements.includes(m));
      if (todo.length === 0) continue;
      const running = await path.start(work);
      try {
        for (const measurement of todo) {
          const wallMs: number[] = [];
          const amount = measurement === 'pf-requests' ? o.requests : o.bytes;
          const pf = { bin, kubeconfig: running.kubeconfig, env: path.env, remotePort: zero.port, timeoutMs };
          for (let i = 0; i < o.runs; i++) {
            let ms: number;
            if (measurement === 'stdout' || measurement === 'stdin') {
              ms = (await measureTransfer({ bin, kubeconfig: running.kubeconfig, env: path.env, direction: measurement, bytes: o.bytes, timeoutMs })).wallMs;
            } else if (measurement === 'port-forward') {
              ms = await withPortForward(pf, (port) => measureDownload(port, o.bytes, timeoutMs));
            } else {
              const rate = await withPortForward(pf, (port) => measureRequestRate(port, o.requests, timeoutMs));
              ms = (o.requests / rate) * 1000;
            }
            wallMs.push(ms);
            log(`${path.name} ${measurement} run ${i + 1}/${o.runs}: ${rateOf(measurement, amount, ms).toFixed(1)} ${UNITS[measurement]}`);
          }
          rows.push({
            client: CLIENT.name,
            path: path.name,
            measurement,
            unit: UNITS[measurement],
            amount,
            wallMs,
            best: rateOf(measurement, amount, Math.min(...wallMs)),
            median: rateOf(measurement, amount, median(wallMs)),
          });
        }
      } finally {
        await running.close();
      }
    }
  } finally {
    await zero.close();
    rmSync(work, { recursive: true, force: true });
  }
  for (const row of rows) {
    const base = rows.find((b) => b.path === BASELINE.name && b.measurement === row.measurement);
    if (base) row.ratioToBaseline = row.median / base.median;
  }
  return rows;
}

/** MB/s (10^6 bytes per second) for transfers, requests per second for pf-requests. */
function rateOf(m: Measurement, amount: number, ms: number): number {
  return m === 'pf-requests' ? amount / (ms / 1000) : amount / 1e6 / (ms / 1000);
}
