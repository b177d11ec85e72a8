/**
 * Latency benchmarks (issue 7). Servers run as their own processes (bench/servers.ts): one dev
 * cluster, a proxy with the translation gates off (SPDY passthrough) and one with them on (WebSocket
 * v5 → SPDY translation, `--upstream-streaming spdy`: the dev cluster plays a 1.36 apiserver that
 * would take v5 itself), all in front of the same dev cluster. The clients run in this process.
 *
 * - echo round trip: write a small stdin chunk to `cat`, wait for the echo on stdout, repeat
 *   (sequential per session), with 1 session and with N concurrent sessions;
 * - handshake: upgrade request sent → initial frame (WebSocket: the empty channel-1 frame; SPDY: the
 *   last of the four stream replies), one session at a time. The translator sends the initial frame
 *   BEFORE dialling upstream (kube-apiserver's order), so its handshake row excludes the upstream
 *   SPDY setup; `first-echo` (upgrade request sent → first echo of stdin) is comparable on every path.
 *
 * Every path row carries "added" = path − direct (the dev cluster over SPDY) for the same
 * measurement and percentile, in the same run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EchoSession } from './echo.js';
import { ensureNginx, startNginx } from './nginx.js';
import { sampleTreeCpu } from './proc-cpu.js';
import { startBareRelay } from './relays.js';
import { startDevClusterProcess, startProxyProcess, translateAtProxy, type ServerProcess } from './servers.js';
import { openSpdyExec } from './spdy-client.js';
import { openWsExec } from './ws-client.js';

/**
 * `echo`: stdin → stdout round trip; `handshake`: upgrade request → initial frame; `first-echo`:
 * upgrade request → first echo received (the session is usable end to end; unlike `handshake` this
 * includes the translator's upstream dial, which kube-apiserver's order puts after the initial frame).
 */
export type LatencyMeasurement = 'echo' | 'handshake' | 'first-echo';

/** A client and the server it talks to. */
export interface LatencyPath {
  /** Short name for `--paths` (as bench/harness.ts's paths). */
  key: string;
  name: string;
  /** Which server of {@link LatencyServers} to dial. */
  server: keyof LatencyServers;
  client: 'spdy' | 'ws';
}

interface LatencyServers {
  cluster: ServerProcess;
  passthrough: ServerProcess;
  translation: ServerProcess;
  /** Started only when a path needs it (bench/nginx.ts). */
  nginx?: ServerProcess;
  /** The bare Node relay (bench/bare-relay.ts), only when a path needs it. */
  bare?: ServerProcess;
  /** The proxies again with `KSP_WRITE_FIRST=0` (the old per-turn batching), only when a path needs them. */
  passthroughBatched?: ServerProcess;
  translationBatched?: ServerProcess;
}

export const LATENCY_DIRECT: LatencyPath = { key: 'direct', name: 'direct (dev cluster, SPDY)', server: 'cluster', client: 'spdy' };
export const LATENCY_PATHS: LatencyPath[] = [
  LATENCY_DIRECT,
  { key: 'passthrough', name: 'proxy passthrough (SPDY)', server: 'passthrough', client: 'spdy' },
  { key: 'translation', name: 'proxy translation (WS v5 → SPDY)', server: 'translation', client: 'ws' },
];
/** nginx as a plain passthrough (bench/nginx.ts) in front of the same dev cluster; not in the default set. */
export const LATENCY_NGINX: LatencyPath = { key: 'nginx', name: 'nginx passthrough (SPDY)', server: 'nginx', client: 'spdy' };
/** The bare Node relay (`net` + `pipe()`, bench/bare-relay.ts): the floor for any Node program on this path. */
export const LATENCY_BARE: LatencyPath = { key: 'bare', name: 'bare Node relay (net + pipe())', server: 'bare', client: 'spdy' };
/**
 * The proxy with `KSP_WRITE_FIRST=0`: every write of an event-loop turn, the first one included, is
 * corked until the turn ends (the batching before src/turn-cork.ts), for a same-run before/after.
 */
export const LATENCY_BATCHED: LatencyPath[] = [
  { key: 'passthrough-batched', name: 'proxy passthrough (SPDY), old batching (KSP_WRITE_FIRST=0)', server: 'passthroughBatched', client: 'spdy' },
  { key: 'translation-batched', name: 'proxy translation (WS v5 → SPDY), old batching (KSP_WRITE_FIRST=0)', server: 'translationBatched', client: 'ws' },
];

const GATES_OFF = 'TranslateStreamCloseWebsocketRequests=false,PortForwardWebsockets=false';
const GATES_ON = 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true';

export interface LatencyOptions {
  /** Round trips per session (full 2,000; quick 200). */
  roundTrips: number;
  /** Concurrent sessions of the concurrent echo row (full 100; quick 10). */
  concurrency: number;
  /** Sessions of the handshake row (full 200; quick 50). */
  handshakes: number;
  /** stdin bytes per round trip (16). */
  payloadBytes: number;
  /** Unmeasured round trips per session before measuring (JIT, socket buffers). */
  warmup: number;
  /**
   * Rounds of the concurrent echo row: round 1 runs it on every path, then round 2, … (interleaved,
   * so a change in the machine's load hits every path alike). Its row reports, per percentile, the
   * median over rounds of that round's value, and "added" the median of the per-round differences
   * to the same round's direct row.
   */
  rounds: number;
}

export const LATENCY_FULL: LatencyOptions = { roundTrips: 2_000, concurrency: 100, handshakes: 200, payloadBytes: 16, warmup: 50, rounds: 3 };
export const LATENCY_QUICK: LatencyOptions = { roundTrips: 200, concurrency: 10, handshakes: 50, payloadBytes: 16, warmup: 10, rounds: 1 };

/** Percentiles in milliseconds. */
export interface Percentiles {
  p50: number;
  p99: number;
  p999: number;
}

export interface LatencyRow {
  path: string;
  measurement: LatencyMeasurement;
  /** Concurrent sessions (1 for handshakes, which run one at a time). */
  sessions: number;
  /** Number of samples the percentiles are over. */
  samples: number;
  /** Milliseconds. */
  latency: Percentiles;
  /** This row − the direct row with the same measurement and sessions (ms); undefined on the direct row. */
  added?: Percentiles;
  /** Rounds the row's figures are the median of (the concurrent echo row; 1 otherwise). */
  rounds?: number;
  /**
   * Concurrent echo row: CPU time of the relay's process tree (utime+stime from /proc, bench/proc-cpu.ts)
   * per round trip, in microseconds (median over rounds); undefined on the direct row.
   */
  relayCpuUsPerRoundTrip?: number;
  /** Each round's p99 (ms), for the record. */
  p99ByRound?: number[];
}

/** Nearest-rank percentile of sorted `xs` (monotone in p). */
function percentile(sorted: Float64Array, p: number): number {
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length)));
  return sorted[rank - 1]!;
}

export function percentiles(samplesMs: number[]): Percentiles {
  if (samplesMs.length === 0) throw new Error('no samples');
  const s = Float64Array.from(samplesMs).sort();
  return { p50: percentile(s, 0.5), p99: percentile(s, 0.99), p999: percentile(s, 0.999) };
}

const nsToMs = (ns: bigint): number => Number(ns) / 1e6;

function openSession(path: LatencyPath, servers: LatencyServers): Promise<EchoSession & { handshakeNs: bigint; startNs: bigint }> {
  const server = servers[path.server];
  if (!server) throw new Error(`latency: no ${path.server} server running`);
  const url = server.url;
  return path.client === 'spdy' ? openSpdyExec(url) : openWsExec(url);
}

/** Sequential round trips on one session; returns the measured ones in ms. */
async function echoLoop(s: EchoSession, o: LatencyOptions, out: number[]): Promise<void> {
  const payload = Buffer.alloc(o.payloadBytes, 0x61);
  for (let i = 0; i < o.warmup + o.roundTrips; i++) {
    const t0 = process.hrtime.bigint();
    s.send(payload);
    await s.expect(payload.length);
    if (i >= o.warmup) out.push(nsToMs(process.hrtime.bigint() - t0));
  }
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `sessions` concurrent sessions, each doing its own round trips; all sessions open before any
 * measures. `relayPid` (the relay's process) is sampled from /proc around the measured loops.
 */
async function measureEcho(
  path: LatencyPath,
  servers: LatencyServers,
  sessions: number,
  o: LatencyOptions,
  relayPid?: number,
): Promise<{ samples: number[]; relayCpuSeconds?: number }> {
  const opened = await Promise.allSettled(Array.from({ length: sessions }, () => openSession(path, servers)));
  const live = opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  try {
    const failed = opened.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const samples: number[] = [];
    const budget = 60_000 + o.roundTrips * sessions * 2;
    const before = relayPid !== undefined ? sampleTreeCpu(relayPid) : undefined;
    await withTimeout(Promise.all(live.map((s) => echoLoop(s, o, samples))), budget, `${path.name} echo x${sessions}`);
    const after = relayPid !== undefined ? sampleTreeCpu(relayPid) : undefined;
    return before && after ? { samples, relayCpuSeconds: after.seconds - before.seconds } : { samples };
  } finally {
    await Promise.all(live.map((s) => s.close()));
  }
}

/** Median of `xs` (the lower middle for an even count). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new Error('median of nothing');
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
}

/** One session at a time: handshake time and time to the first echo, then close it. */
async function measureHandshakes(path: LatencyPath, servers: LatencyServers, o: LatencyOptions): Promise<{ handshake: number[]; firstEcho: number[] }> {
  const handshake: number[] = [];
  const firstEcho: number[] = [];
  const payload = Buffer.alloc(o.payloadBytes, 0x62);
  for (let i = 0; i < o.handshakes; i++) {
    const s = await openSession(path, servers);
    try {
      handshake.push(nsToMs(s.handshakeNs));
      s.send(payload);
      await withTimeout(s.expect(payload.length), 30_000, `${path.name} first echo`);
      firstEcho.push(nsToMs(process.hrtime.bigint() - s.startNs));
    } finally {
      await s.close();
    }
  }
  return { handshake, firstEcho };
}

/** Run every latency row; options default to the full preset, `quick` picks {@link LATENCY_QUICK}. */
export async function runLatencyBenchmarks(
  opts: { quick?: boolean; log?: (line: string) => void; paths?: LatencyPath[]; install?: boolean } & Partial<LatencyOptions> = {},
): Promise<LatencyRow[]> {
  const { quick, log = () => {}, install = false, paths: pathsOpt, ...overrides } = opts;
  let paths = pathsOpt ?? LATENCY_PATHS;
  let nginxBin: string | undefined;
  if (paths.some((p) => p.server === 'nginx')) {
    const found = ensureNginx(install, log);
    if ('skip' in found) {
      (opts.log ?? console.log)(`note: skipping the "${LATENCY_NGINX.name}" rows: ${found.skip}`);
      paths = paths.filter((p) => p.server !== 'nginx');
    } else nginxBin = found.bin;
  }
  const o: LatencyOptions = { ...(quick ? LATENCY_QUICK : LATENCY_FULL), ...overrides };
  const started: ServerProcess[] = [];
  const rows: LatencyRow[] = [];
  try {
    const cluster = await startDevClusterProcess();
    started.push(cluster);
    const [passthrough, translation] = await Promise.all([
      startProxyProcess(cluster.url, ['--feature-gates', GATES_OFF]),
      startProxyProcess(cluster.url, ['--feature-gates', GATES_ON, ...translateAtProxy()]),
    ]);
    started.push(passthrough, translation);
    const servers: LatencyServers = { cluster, passthrough, translation };
    if (paths.some((p) => p.server === 'bare')) {
      servers.bare = await startBareRelay(cluster.url);
      started.push(servers.bare);
    }
    const batchedEnv = { env: { KSP_WRITE_FIRST: '0' } };
    if (paths.some((p) => p.server === 'passthroughBatched')) {
      servers.passthroughBatched = await startProxyProcess(cluster.url, ['--feature-gates', GATES_OFF], batchedEnv);
      started.push(servers.passthroughBatched);
    }
    if (paths.some((p) => p.server === 'translationBatched')) {
      servers.translationBatched = await startProxyProcess(cluster.url, ['--feature-gates', GATES_ON, ...translateAtProxy()], batchedEnv);
      started.push(servers.translationBatched);
    }
    if (nginxBin) {
      const dir = mkdtempSync(join(tmpdir(), 'ksp-bench-nginx-'));
      const nginx = await startNginx(nginxBin, cluster.url, dir);
      started.push({ ...nginx, close: async () => (await nginx.close(), rmSync(dir, { recursive: true, force: true })) });
      servers.nginx = nginx;
    }
    const push = (path: LatencyPath, measurement: LatencyMeasurement, sessions: number, samples: number[]): void => {
      const row: LatencyRow = { path: path.name, measurement, sessions, samples: samples.length, latency: percentiles(samples) };
      rows.push(row);
      const l = row.latency;
      log(`${path.name} ${measurement} x${sessions}: p50 ${l.p50.toFixed(3)} ms, p99 ${l.p99.toFixed(3)} ms, p999 ${l.p999.toFixed(3)} ms (${samples.length} samples)`);
    };
    for (const path of paths) {
      // One session first (a warm-up for the path), then handshakes.
      push(path, 'echo', 1, (await measureEcho(path, servers, 1, o)).samples);
      const h = await measureHandshakes(path, servers, o);
      push(path, 'handshake', 1, h.handshake);
      push(path, 'first-echo', 1, h.firstEcho);
    }
    // The concurrent echo row, interleaved: every path once per round.
    if (o.concurrency > 1) {
      const byPath = new Map<string, Array<{ latency: Percentiles; samples: number; cpu?: number }>>();
      for (let round = 1; round <= o.rounds; round++) {
        for (const path of paths) {
          const relayPid = path.server === 'cluster' ? undefined : servers[path.server]?.pid;
          const m = await measureEcho(path, servers, o.concurrency, o, relayPid);
          const latency = percentiles(m.samples);
          const cpu = m.relayCpuSeconds !== undefined ? (m.relayCpuSeconds * 1e6) / m.samples.length : undefined;
          log(
            `round ${round}: ${path.name} echo x${o.concurrency}: p50 ${latency.p50.toFixed(3)} ms, p99 ${latency.p99.toFixed(3)} ms` +
              (cpu !== undefined ? `, relay CPU ${cpu.toFixed(1)} µs per round trip` : ''),
          );
          const list = byPath.get(path.name) ?? [];
          list.push({ latency, samples: m.samples.length, ...(cpu !== undefined ? { cpu } : {}) });
          byPath.set(path.name, list);
        }
      }
      const direct = byPath.get(LATENCY_DIRECT.name);
      for (const path of paths) {
        const list = byPath.get(path.name)!;
        const pick = (f: (p: Percentiles) => number): number => median(list.map((r) => f(r.latency)));
        const row: LatencyRow = {
          path: path.name,
          measurement: 'echo',
          sessions: o.concurrency,
          samples: list.reduce((n, r) => n + r.samples, 0),
          latency: { p50: pick((p) => p.p50), p99: pick((p) => p.p99), p999: pick((p) => p.p999) },
          rounds: list.length,
          p99ByRound: list.map((r) => r.latency.p99),
        };
        const cpus = list.flatMap((r) => (r.cpu !== undefined ? [r.cpu] : []));
        if (cpus.length > 0) row.relayCpuUsPerRoundTrip = median(cpus);
        if (direct && path.name !== LATENCY_DIRECT.name) {
          const diff = (f: (p: Percentiles) => number): number => median(list.map((r, i) => f(r.latency) - f(direct[i]!.latency)));
          row.added = { p50: diff((p) => p.p50), p99: diff((p) => p.p99), p999: diff((p) => p.p999) };
        }
        rows.push(row);
      }
    }
  } finally {
    for (const s of started.reverse()) await s.close();
  }
  for (const row of rows) {
    if (row.path === LATENCY_DIRECT.name || row.added) continue;
    const base = rows.find((b) => b.path === LATENCY_DIRECT.name && b.measurement === row.measurement && b.sessions === row.sessions);
    if (base) {
      row.added = {
        p50: row.latency.p50 - base.latency.p50,
        p99: row.latency.p99 - base.latency.p99,
        p999: row.latency.p999 - base.latency.p999,
      };
    }
  }
  return rows;
}

function fmt(ms: number): string {
  return ms.toFixed(3);
}

function signed(ms: number): string {
  return (ms >= 0 ? '+' : '') + ms.toFixed(3);
}

/** Table cells of each row: path, measurement, sessions, samples, p50/p99/p999 and added p50/p99/p999 (ms). */
function cells(rows: LatencyRow[]): string[][] {
  return rows.map((r) => [
    r.path,
    r.measurement === 'echo' ? `echo ${r.sessions === 1 ? '1 session' : `${r.sessions} sessions`}` : r.measurement,
    String(r.samples),
    fmt(r.latency.p50),
    fmt(r.latency.p99),
    fmt(r.latency.p999),
    r.added ? signed(r.added.p50) : '—',
    r.added ? signed(r.added.p99) : '—',
    r.added ? signed(r.added.p999) : '—',
    r.relayCpuUsPerRoundTrip !== undefined ? r.relayCpuUsPerRoundTrip.toFixed(1) : '—',
    r.p99ByRound && r.p99ByRound.length > 1 ? r.p99ByRound.map(fmt).join(', ') : '—',
  ]);
}

const HEADER = [
  'path',
  'measurement',
  'samples',
  'p50 ms',
  'p99 ms',
  'p999 ms',
  'added p50',
  'added p99',
  'added p999',
  'relay CPU µs / round trip',
  'p99 each round',
];

/** Plain-text table for the console. */
export function latencyTextTable(rows: LatencyRow[]): string {
  const all = [HEADER, ...cells(rows)];
  const widths = HEADER.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  return all.map((r) => r.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n');
}

/** Markdown table (for `--write`). */
export function latencyMarkdownTable(rows: LatencyRow[]): string {
  const lines = [`| ${HEADER.join(' | ')} |`, `|${HEADER.map((_, i) => (i < 2 ? ' --- ' : ' ---: ')).join('|')}|`];
  for (const r of cells(rows)) lines.push(`| ${r.join(' | ')} |`);
  return lines.join('\n');
}
