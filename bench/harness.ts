/**
 * The benchmark harness. A row is (path, measurement): a path is a way from kubectl to the pod
 * (direct to the dev cluster, or through the proxy's passthrough, translation or tunnel), with the
 * kubectl environment that selects it; servers run as their own processes (bench/servers.ts). Every
 * row is compared with the direct path's row for the same measurement, in the same run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeKubeconfig } from '../dev/kubeconfig.js';
import { FORCE_SPDY_ENV, findKubectl, type KubectlVersion } from '../test/helpers/kubectl.js';
import { measureTransfer } from './kubectl-throughput.js';
import { ensureNginx, startNginx } from './nginx.js';
import { measureDownload, measureRequestRate, startZeroServer, withPortForward } from './port-forward-throughput.js';
import { startDevClusterProcess, startProxyProcess, translateAtProxy, type ServerOptions } from './servers.js';

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

/** How a path's servers are started. */
export interface PathStartOptions {
  /** `node` arguments for the proxy process (e.g. `--cpu-prof`); paths without a proxy ignore them. */
  proxy?: ServerOptions;
}

/** A way from kubectl to the pod. */
export interface BenchPath {
  /** Short name for `--paths` (direct, passthrough, translation, tunnel, nginx). */
  key: string;
  /** Row label, e.g. "direct (dev cluster, SPDY)". */
  name: string;
  /** kubectl environment that selects the protocol (e.g. force SPDY). */
  env: Record<string, string>;
  /** What this path is measured for. */
  measurements: Measurement[];
  /**
   * Get what the path needs outside this repository (e.g. install nginx when `install` is set);
   * returns why the path must be skipped, or undefined when it can run.
   */
  prepare?(install: boolean, log: (line: string) => void): string | undefined;
  /** Start it; `workDir` is a private temp folder. */
  start(workDir: string, options?: PathStartOptions): Promise<RunningPath>;
}

/** Write a kubeconfig for `url` into `workDir` and return its path. */
function kubeconfigFor(workDir: string, name: string, url: string): string {
  const path = join(workDir, `kubeconfig-${name}`);
  writeKubeconfig(path, { server: url, name });
  return path;
}

/** Dev cluster plus a proxy in front of it with `gates` (and `args`). */
async function proxied(workDir: string, name: string, gates: string, options: PathStartOptions = {}, args: string[] = []): Promise<RunningPath> {
  const cluster = await startDevClusterProcess();
  try {
    const proxy = await startProxyProcess(cluster.url, ['--feature-gates', gates, ...args], options.proxy);
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
  key: 'direct',
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
  key: 'passthrough',
  name: 'proxy passthrough (SPDY)',
  env: { ...FORCE_SPDY_ENV },
  measurements: ALL,
  start: (workDir, options) => proxied(workDir, 'passthrough', GATES_OFF, options),
};

/**
 * kubectl (WebSocket v5) → proxy StreamTranslatorProxy → dev cluster (SPDY). `--upstream-streaming
 * spdy`: the dev cluster plays a 1.36 apiserver that would take v5 itself (bench/servers.ts).
 */
export const PROXY_TRANSLATION: BenchPath = {
  key: 'translation',
  name: 'proxy translation (WS v5 → SPDY, --upstream-streaming spdy)',
  env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' },
  measurements: ['stdout', 'stdin'],
  start: (workDir, options) => proxied(workDir, 'translation', GATES_ON, options, translateAtProxy()),
};

/** kubectl (SPDY/3.1+portforward.k8s.io over WebSocket) → proxy tunnel → dev cluster (SPDY), `--upstream-streaming spdy` as above. */
export const PROXY_TUNNEL: BenchPath = {
  key: 'tunnel',
  name: 'proxy tunnel (WS → SPDY port-forward, --upstream-streaming spdy)',
  env: { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'true' },
  measurements: ['port-forward', 'pf-requests'],
  start: (workDir, options) => proxied(workDir, 'tunnel', GATES_ON, options, translateAtProxy()),
};

let nginxBin: string | undefined;

/**
 * kubectl → nginx (plain passthrough reverse proxy, bench/nginx.ts) → dev cluster, SPDY end to end:
 * what an ordinary reverse proxy costs on the same machine, for comparison with the passthrough.
 * Skipped with a note when nginx is missing and cannot be installed.
 */
export const NGINX_PASSTHROUGH: BenchPath = {
  key: 'nginx',
  name: 'nginx passthrough (SPDY)',
  env: { ...FORCE_SPDY_ENV },
  measurements: ALL,
  prepare(install, log) {
    const found = ensureNginx(install, log);
    if ('skip' in found) return found.skip;
    nginxBin = found.bin;
    return undefined;
  },
  async start(workDir) {
    const bin = nginxBin ?? findNginxOrThrow();
    const cluster = await startDevClusterProcess();
    try {
      const nginx = await startNginx(bin, cluster.url, join(workDir, `nginx-${Date.now()}`));
      return {
        kubeconfig: kubeconfigFor(workDir, 'nginx', nginx.url),
        close: async () => {
          await nginx.close();
          await cluster.close();
        },
      };
    } catch (e) {
      await cluster.close();
      throw e;
    }
  },
};

function findNginxOrThrow(): string {
  const found = ensureNginx(false);
  if ('skip' in found) throw new Error(found.skip);
  return found.bin;
}

/** The baseline path: ratios are computed against it, same measurement, same run. */
export const BASELINE = DEV_CLUSTER_DIRECT;
export const PATHS: BenchPath[] = [DEV_CLUSTER_DIRECT, PROXY_PASSTHROUGH, PROXY_TRANSLATION, PROXY_TUNNEL, NGINX_PASSTHROUGH];

/** The paths named in a `--paths` list (their keys), in {@link PATHS} order. */
export function pathsByKey(keys: string[]): BenchPath[] {
  const unknown = keys.filter((k) => !PATHS.some((p) => p.key === k));
  if (unknown.length > 0) throw new Error(`unknown path(s) ${unknown.join(', ')}; known: ${PATHS.map((p) => p.key).join(', ')}`);
  return PATHS.filter((p) => keys.includes(p.key));
}
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
  /** Install what an optional path needs (nginx) when missing (default false: skip it with a note). */
  install?: boolean;
  /** Run each proxy process under `node --cpu-prof`, its profile written to `cpuProfDir/<path key>/` on exit. */
  cpuProfDir?: string;
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
      const skip = path.prepare?.(o.install ?? false, log);
      if (skip !== undefined) {
        (o.log ?? console.log)(`note: skipping the "${path.name}" rows: ${skip}`);
        continue;
      }
      const start: PathStartOptions = o.cpuProfDir ? { proxy: { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${join(o.cpuProfDir, path.key)}`] } } : {};
      const running = await path.start(work, start);
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
