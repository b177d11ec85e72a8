/**
 * The message-flood benchmark (issue 26 item 1; `npm run bench -- --flood`, print-only): N
 * translated exec sessions (WebSocket v5 → SPDY, the dev cluster's `kube-stream-proxy:idle` echo)
 * each send masked binary stdin frames as fast as the proxy takes them and read the echo back, for
 * a fixed window, while one plain GET at a time goes through the same proxy. Two rows:
 *
 * - **tiny**: 8-byte frames (channel 0 + one byte), the hostile caller of the review;
 * - **bulk**: kubectl's stdin shape, 32 KiB + 1 byte messages.
 *
 * Measured on the proxy process (its own `node` process, bench/servers.ts): CPU (utime+stime from
 * /proc/PID/stat) per MB of stdin payload and per frame, VmRSS sampled every 100 ms (baseline before
 * the sessions open, peak, growth = peak − baseline, and after the sessions end), the latency of
 * the concurrent GETs (`GET /api/v1/namespaces/default/pods/demo`, a fresh connection each),
 * alternating with the same GET straight to the dev cluster (what the loaded machine costs a GET by
 * itself), and the proxy's event-loop lag over the window (its `nodejs_eventloop_lag_*`). The echo
 * must come back byte-exact (bench/flood-client.ts checks the pattern). Targets (issue 26): RSS
 * growth ≤ 64 MiB and GET ≤ 250 ms during the tiny flood of 4 sessions for 30 s.
 */
import { request } from 'node:http';
import { readFileSync } from 'node:fs';
import { parseProcStat, clockTicksPerSecond } from './proc-cpu.js';
import { floodBlock, PATTERN_PERIOD, startFloodSession, type FloodSession, type FloodSessionResult } from './flood-client.js';
import { readRss } from './slow-reader.js';
import { join } from 'node:path';
import { SERVER_START_TIMEOUT_MS, startDevClusterProcess, startNodeScript, startProxyProcess, translateAtProxy, withHeapFloor, type ServerProcess } from './servers.js';

const MiB = 1024 * 1024;

/** Issue 26's targets for the tiny flood. */
export const FLOOD_RSS_TARGET_MIB = 64;
export const FLOOD_GET_TARGET_MS = 250;

/** One flood shape. */
export interface FloodMode {
  key: 'tiny' | 'bulk';
  name: string;
  /** stdin payload bytes per frame (after the channel byte). */
  payloadBytes: number;
  /** Frames per precomputed block (frames × payloadBytes is a multiple of the pattern period). */
  framesPerBlock: number;
}

export const FLOOD_MODES: FloodMode[] = [
  { key: 'tiny', name: '8-byte frames (1 byte of stdin each)', payloadBytes: 1, framesPerBlock: PATTERN_PERIOD * 32 },
  { key: 'bulk', name: '32 KiB + 1 messages (kubectl stdin)', payloadBytes: 32 * 1024, framesPerBlock: PATTERN_PERIOD },
];

/** Options of {@link runFloodBenchmarks}. */
export interface FloodOptions {
  sessions: number;
  /** Flood window, ms. */
  windowMs: number;
  /** Pause between two concurrent GETs, ms. */
  getIntervalMs: number;
  /** Extra `serve` arguments (e.g. a feature gate). */
  proxyArgs: string[];
  /** Environment of the proxy process. */
  proxyEnv?: Record<string, string>;
}

export const FLOOD_FULL: FloodOptions = { sessions: 4, windowMs: 30_000, getIntervalMs: 50, proxyArgs: [] };
export const FLOOD_QUICK: FloodOptions = { sessions: 2, windowMs: 3_000, getIntervalMs: 50, proxyArgs: [] };

/** Whose proxy a row measures: this tree's, or another build's (`base`: a copy of its bin/ and dist/). */
export interface FloodTree {
  label: string;
  base?: string;
}

/** One measured row. */
export interface FloodRow {
  /** The proxy measured (this tree's: "this tree"). */
  tree: string;
  mode: FloodMode['key'];
  name: string;
  sessions: number;
  windowMs: number;
  /** stdin payload bytes sent, all sessions. */
  bytes: number;
  frames: number;
  /** Every session's echo was complete and byte-exact, and it ended with Success and close 1000. */
  echoOk: boolean;
  failures: string[];
  /** Proxy CPU seconds over the window. */
  cpuSeconds: number;
  /** Dev cluster CPU seconds over the window (the echo's side). */
  clusterCpuSeconds: number;
  baselineRss: number;
  peakRss: number;
  /** RSS once the sessions ended (after a 2 s settle). */
  afterRss: number;
  /** Concurrent GET latencies, ms (sorted). */
  getMs: number[];
  /** GETs that failed (error or non-200). */
  getFailures: number;
  /**
   * The same GET straight to the dev cluster, alternating with those through the proxy (sorted):
   * what the loaded machine itself costs a GET, the proxy left out.
   */
  directGetMs: number[];
  /** The proxy's event-loop delay over the window (prom-client's `nodejs_eventloop_lag_*`), ms. */
  loopLagP99Ms: number;
  loopLagMaxMs: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function cpuSecondsOf(pid: number): number {
  return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8')).ticks / clockTicksPerSecond();
}

/** The proxy's `nodejs_eventloop_lag_{p99,max}_seconds` (prom-client resets them at each scrape), ms. */
async function loopLag(url: string): Promise<{ p99: number; max: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const read = (name: string): number => Number(new RegExp(`^${name} ([0-9.e+-]+)`, 'm').exec(text)?.[1] ?? NaN) * 1000;
  return { p99: read('nodejs_eventloop_lag_p99_seconds'), max: read('nodejs_eventloop_lag_max_seconds') };
}

/** One plain GET on a fresh connection; resolves with its latency in ms, or rejects. */
function timedGet(url: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(`${url}/api/v1/namespaces/default/pods/demo`, { agent: false, timeout: 30_000 }, (res) => {
      res.resume();
      res.once('end', () => (res.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.once('timeout', () => req.destroy(new Error('GET timed out')));
    req.once('error', reject);
    req.end();
  });
}

/** One mode against a running proxy. */
export async function measureFlood(mode: FloodMode, proxy: ServerProcess, cluster: ServerProcess, o: FloodOptions, tree = 'this tree'): Promise<FloodRow> {
  const { hostname, port } = new URL(proxy.url);
  const block = floodBlock(mode.framesPerBlock, mode.payloadBytes);
  const path = '/api/v1/namespaces/default/pods/demo/exec?command=kube-stream-proxy%3Aidle&stdin=true&stdout=true&stderr=true';
  // A few GETs first: the proxy's GET path is compiled and its pool warm before the baseline.
  for (let i = 0; i < 5; i++) await timedGet(proxy.url);
  await sleep(1_000);
  const baselineRss = readRss(proxy.pid);
  let peakRss = baselineRss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, readRss(proxy.pid))), 100);
  const failures: string[] = [];
  const getMs: number[] = [];
  const directGetMs: number[] = [];
  let getFailures = 0;
  let sessions: FloodSession[] = [];
  try {
    await loopLag(proxy.url); // resets the window
    const cpu0 = cpuSecondsOf(proxy.pid);
    const cluster0 = cpuSecondsOf(cluster.pid);
    sessions = await Promise.all(Array.from({ length: o.sessions }, () => startFloodSession(hostname, Number(port), path, block, mode.framesPerBlock, mode.framesPerBlock * mode.payloadBytes)));
    let probing = true;
    const probes = (async () => {
      while (probing) {
        try {
          getMs.push(await timedGet(proxy.url));
        } catch {
          getFailures++;
        }
        await sleep(o.getIntervalMs);
        directGetMs.push(await timedGet(cluster.url).catch(() => Number.NaN));
        await sleep(o.getIntervalMs);
      }
    })();
    await sleep(o.windowMs);
    probing = false;
    await probes;
    const lag = await loopLag(proxy.url);
    const results: FloodSessionResult[] = await Promise.all(sessions.map((s) => s.stop(60_000)));
    const cpu1 = cpuSecondsOf(proxy.pid);
    const cluster1 = cpuSecondsOf(cluster.pid);
    clearInterval(sampler);
    results.forEach((r, i) => {
      if (!r.echoOk) failures.push(`session ${i}: echo ${r.echoed} of ${r.sent} bytes${r.echoed === r.sent ? ' (pattern mismatch)' : ''}`);
      if (!r.status.includes('"Success"')) failures.push(`session ${i}: status ${r.status || '(none)'}`);
      if (r.closeCode !== 1000) failures.push(`session ${i}: close ${r.closeCode}`);
    });
    await sleep(2_000);
    const afterRss = readRss(proxy.pid);
    return {
      tree,
      mode: mode.key,
      name: mode.name,
      sessions: o.sessions,
      windowMs: o.windowMs,
      bytes: results.reduce((n, r) => n + r.sent, 0),
      frames: results.reduce((n, r) => n + r.frames, 0),
      echoOk: failures.length === 0,
      failures,
      cpuSeconds: cpu1 - cpu0,
      clusterCpuSeconds: cluster1 - cluster0,
      baselineRss,
      peakRss,
      afterRss,
      getMs: getMs.sort((a, b) => a - b),
      getFailures,
      directGetMs: directGetMs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b),
      loopLagP99Ms: lag.p99,
      loopLagMaxMs: lag.max,
    };
  } finally {
    clearInterval(sampler);
    for (const s of sessions) s.destroy();
  }
}

/**
 * Start the proxy of `tree` in front of `upstream`, translating the v5 sessions itself
 * (`--upstream-streaming spdy` where the build has it: the 1.36 dev cluster would take them).
 */
function startTreeProxy(tree: FloodTree, upstream: string, o: FloodOptions): Promise<ServerProcess> {
  const options = o.proxyEnv ? { env: o.proxyEnv } : {};
  if (tree.base === undefined) return startProxyProcess(upstream, [...translateAtProxy(), ...o.proxyArgs], options);
  const cli = join(tree.base, 'bin', 'kube-stream-proxy.js');
  const args = ['serve', '--listen', '127.0.0.1:0', '--upstream', upstream, ...translateAtProxy(cli), ...o.proxyArgs];
  return startNodeScript(cli, args, /^kube-stream-proxy listening on /, SERVER_START_TIMEOUT_MS, withHeapFloor('serve', options));
}

/**
 * A dev cluster process, then per mode and tree a fresh proxy process and one flood (trees
 * alternate within each mode, so a burst of load on the shared machine hits both alike).
 */
export async function runFloodBenchmarks(
  options: { quick?: boolean; opts?: Partial<FloodOptions>; modes?: FloodMode[]; trees?: FloodTree[]; log?: (line: string) => void } = {},
): Promise<FloodRow[]> {
  const o = { ...(options.quick ? FLOOD_QUICK : FLOOD_FULL), ...options.opts };
  const log = options.log ?? (() => undefined);
  const trees = options.trees ?? [{ label: 'this tree' }];
  const cluster = await startDevClusterProcess();
  const rows: FloodRow[] = [];
  try {
    for (const mode of options.modes ?? FLOOD_MODES) {
      for (const tree of trees) {
        const proxy = await startTreeProxy(tree, cluster.url, o);
        try {
          log(`flood (${tree.label}): ${mode.name}, ${o.sessions} sessions, ${o.windowMs / 1000} s …`);
          const row = await measureFlood(mode, proxy, cluster, o, tree.label);
          log(`  ${floodSummary(row)}`);
          rows.push(row);
        } finally {
          await proxy.close();
        }
      }
    }
  } finally {
    await cluster.close();
  }
  return rows;
}

/** The `q` quantile of sorted `xs` (nearest rank). */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  return xs[Math.min(xs.length - 1, Math.max(0, Math.ceil(q * xs.length) - 1))]!;
}

const mib = (b: number): string => (b / MiB).toFixed(1);

/** One line per row for the log. */
export function floodSummary(r: FloodRow): string {
  return `${(r.frames / (r.windowMs / 1000) / 1000).toFixed(0)}k frames/s, ${(r.bytes / 1e6).toFixed(1)} MB, RSS +${mib(r.peakRss - r.baselineRss)} MiB, GET p99 ${quantile(r.getMs, 0.99).toFixed(0)} ms max ${quantile(r.getMs, 1).toFixed(0)} ms, echo ${r.echoOk ? 'ok' : 'WRONG: ' + r.failures.join('; ')}`;
}

const HEAD = ['proxy', 'flood', 'sessions', 's', 'k frames/s', 'stdin MB', 'proxy CPU-s', 'CPU-s/MB', 'µs CPU/frame', 'dev cluster CPU-s', 'RSS base MiB', 'peak MiB', 'growth MiB', 'after MiB', 'GETs', 'GET p50 ms', 'p99 ms', 'max ms', 'direct GET p99 ms', 'max ms', 'loop lag p99 ms', 'max ms', 'echo'];

/** Fixed-width text table (the targets are the tiny row's growth and GET columns). */
export function floodTextTable(rows: FloodRow[]): string {
  const cells = (r: FloodRow): string[] => [
    r.tree,
    r.mode,
    String(r.sessions),
    (r.windowMs / 1000).toFixed(0),
    (r.frames / (r.windowMs / 1000) / 1000).toFixed(0),
    (r.bytes / 1e6).toFixed(1),
    r.cpuSeconds.toFixed(2),
    (r.cpuSeconds / (r.bytes / 1e6)).toFixed(4),
    ((r.cpuSeconds * 1e6) / r.frames).toFixed(2),
    r.clusterCpuSeconds.toFixed(2),
    mib(r.baselineRss),
    mib(r.peakRss),
    mib(r.peakRss - r.baselineRss),
    mib(r.afterRss),
    `${r.getMs.length}${r.getFailures > 0 ? ` (+${r.getFailures} failed)` : ''}`,
    quantile(r.getMs, 0.5).toFixed(0),
    quantile(r.getMs, 0.99).toFixed(0),
    quantile(r.getMs, 1).toFixed(0),
    quantile(r.directGetMs, 0.99).toFixed(0),
    quantile(r.directGetMs, 1).toFixed(0),
    r.loopLagP99Ms.toFixed(0),
    r.loopLagMaxMs.toFixed(0),
    r.echoOk ? 'ok' : 'WRONG',
  ];
  const all = [HEAD, ...rows.map(cells)];
  const widths = HEAD.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  const notes = [
    `targets (issue 26, tiny row, 4 sessions, 30 s): growth ≤ ${FLOOD_RSS_TARGET_MIB} MiB, GET ≤ ${FLOOD_GET_TARGET_MS} ms (p99 and max), echo byte-exact`,
    ...rows.flatMap((r) => r.failures.map((f) => `${r.mode}: ${f}`)),
  ];
  return [line(HEAD), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map((r) => line(cells(r))), '', ...notes].join('\n');
}
