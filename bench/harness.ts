/**
 * The benchmark harness: every row is (client, path, direction). A path is something kubectl can be
 * pointed at through a kubeconfig. Servers run as their own processes (bench/servers.ts). Paths:
 * direct to the dev cluster (the baseline) and through the proxy's passthrough; translation and the
 * port-forward tunnel are added to PATHS with their own start().
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeKubeconfig } from '../src/kubeconfig.js';
import { findKubectl, type KubectlVersion } from '../test/helpers/kubectl.js';
import { measureTransfer, type Direction } from './kubectl-throughput.js';
import { startDevClusterProcess, startProxyProcess } from './servers.js';

/** A running thing kubectl talks to. */
export interface RunningPath {
  kubeconfig: string;
  close(): Promise<void>;
}

/** A way from kubectl to the pod. */
export interface BenchPath {
  /** Row label, e.g. "dev cluster (direct)". */
  name: string;
  /** Start it; `workDir` is a private temp folder. */
  start(workDir: string): Promise<RunningPath>;
}

/** A kubectl binary plus its environment toggles. */
export interface BenchClient {
  name: string;
  version: KubectlVersion;
  env: Record<string, string>;
}

/** Write a kubeconfig for `url` into `workDir` and return its path. */
function kubeconfigFor(workDir: string, name: string, url: string): string {
  const path = join(workDir, `kubeconfig-${name}`);
  writeKubeconfig(path, { server: url, name });
  return path;
}

/** kubectl → dev cluster: the SPDY baseline every other path is compared with. */
export const DEV_CLUSTER_DIRECT: BenchPath = {
  name: 'direct (dev cluster, SPDY)',
  async start(workDir) {
    const cluster = await startDevClusterProcess();
    return { kubeconfig: kubeconfigFor(workDir, 'direct', cluster.url), close: () => cluster.close() };
  },
};

/** kubectl → proxy (UpgradeAwareProxy passthrough) → dev cluster. */
export const PROXY_PASSTHROUGH: BenchPath = {
  name: 'proxy passthrough (SPDY)',
  async start(workDir) {
    const cluster = await startDevClusterProcess();
    const proxy = await startProxyProcess(cluster.url, [
      '--feature-gates',
      'TranslateStreamCloseWebsocketRequests=false,PortForwardWebsockets=false',
    ]);
    return {
      kubeconfig: kubeconfigFor(workDir, 'passthrough', proxy.url),
      close: async () => {
        await proxy.close();
        await cluster.close();
      },
    };
  },
};

/** The baseline path: ratios are computed against it, same client and direction, same run. */
export const BASELINE = DEV_CLUSTER_DIRECT;
export const PATHS: BenchPath[] = [DEV_CLUSTER_DIRECT, PROXY_PASSTHROUGH];
export const CLIENTS: BenchClient[] = [{ name: 'kubectl 1.28', version: '1.28', env: {} }];
export const DIRECTIONS: Direction[] = ['stdout', 'stdin'];

/** Options of {@link runBenchmarks}. */
export interface BenchOptions {
  /** Bytes per transfer (default 500 MB; quick: 50 MB). */
  bytes: number;
  /** Runs per row (default 3; quick: 1). */
  runs: number;
  /** Per-transfer timeout (default: enough for 5 MB/s). */
  timeoutMs?: number;
  paths?: BenchPath[];
  clients?: BenchClient[];
  directions?: Direction[];
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

/** The preset for `--quick` (used by the test) and the default. */
export const QUICK: Pick<BenchOptions, 'bytes' | 'runs'> = { bytes: 50_000_000, runs: 1 };
export const FULL: Pick<BenchOptions, 'bytes' | 'runs'> = { bytes: 500_000_000, runs: 3 };

/** One result row. */
export interface BenchRow {
  client: string;
  path: string;
  direction: Direction;
  bytes: number;
  /** Wall time of each run, spawn to exit. */
  wallMs: number[];
  /** MB/s (10^6 bytes per second) of the fastest run. */
  bestMBps: number;
  /** MB/s of the median run. */
  medianMBps: number;
  /** median MB/s ÷ the baseline path's median MB/s (same client and direction, same run). */
  ratioToBaseline?: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Run every (client, path, direction) row; a failed transfer rejects the whole run. */
export async function runBenchmarks(o: BenchOptions): Promise<BenchRow[]> {
  const log = o.log ?? (() => {});
  const timeoutMs = o.timeoutMs ?? Math.max(60_000, (o.bytes / 5_000_000) * 1000);
  const rows: BenchRow[] = [];
  const work = mkdtempSync(join(tmpdir(), 'ksp-bench-'));
  try {
    for (const path of o.paths ?? PATHS) {
      const running = await path.start(work);
      try {
        for (const client of o.clients ?? CLIENTS) {
          const bin = findKubectl(client.version);
          for (const direction of o.directions ?? DIRECTIONS) {
            const wallMs: number[] = [];
            for (let i = 0; i < o.runs; i++) {
              const r = await measureTransfer({ bin, kubeconfig: running.kubeconfig, env: client.env, direction, bytes: o.bytes, timeoutMs });
              wallMs.push(r.wallMs);
              log(`${client.name} → ${path.name} ${direction} run ${i + 1}/${o.runs}: ${(o.bytes / 1e6 / (r.wallMs / 1000)).toFixed(1)} MB/s`);
            }
            const mbps = (ms: number): number => o.bytes / 1e6 / (ms / 1000);
            rows.push({
              client: client.name,
              path: path.name,
              direction,
              bytes: o.bytes,
              wallMs,
              bestMBps: mbps(Math.min(...wallMs)),
              medianMBps: mbps(median(wallMs)),
            });
          }
        }
      } finally {
        await running.close();
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  for (const row of rows) {
    const base = rows.find((b) => b.path === BASELINE.name && b.client === row.client && b.direction === row.direction);
    if (base) row.ratioToBaseline = row.medianMBps / base.medianMBps;
  }
  return rows;
}
