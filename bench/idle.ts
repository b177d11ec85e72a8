/**
 * The idle-session concurrency benchmark (issue 7): N exec sessions opened through the proxy and held
 * open at once, idle except for pings; the proxy's memory and CPU per session.
 *
 * Each session execs the dev cluster's process-free built-in `kube-stream-proxy:idle`
 * (dev/cluster/builtin-commands.ts: `cat` without a process, exit 0 on stdin EOF), so 10,000
 * sessions do not mean 10,000 processes. A session counts as opened once its stdin → stdout echo of one
 * byte came back (end to end through the proxy and the dev cluster), and as held if a second echo
 * still comes back after the idle window.
 *
 * Processes: the dev cluster and the proxy run as their own `node` processes (bench/servers.ts reports
 * their PIDs), a fresh pair per row; the clients run in this process and ping as kubectl does (SPDY PING
 * every 5 s; WebSocket ping every 5 s as client-go's heartbeat); the proxy pings the dev cluster every
 * 5 s on each upstream SPDY connection it owns (translation). Measured from /proc:
 * - RSS per session = (proxy VmRSS at the end of the idle window − VmRSS before opening) ÷ sessions
 *   opened; the baseline is taken after a warm-up of a few sessions opened and closed (JIT, lazy modules);
 * - idle CPU = proxy utime + stime over the idle window (default 30 s: six ping periods), also as a
 *   percentage of one core.
 * Target: 10,000 idle sessions held with ≤ 40 KiB proxy RSS each.
 *
 * File descriptors: every session costs this process 1, the proxy 2 (client side and upstream) and
 * the dev cluster 1. Node raises each process's soft RLIMIT_NOFILE to its hard limit; raising the hard
 * limit needs CAP_SYS_RESOURCE. The row reports the proxy's limit and its open fds, so a row that
 * stopped at the limit says so.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { EchoSession } from './echo.js';
import { startDevClusterProcess, startProxyProcess, translateAtProxy, type ServerProcess } from './servers.js';
import { readRss } from './slow-reader.js';
import { openSpdyExec } from './spdy-client.js';
import { openWsExec } from './ws-client.js';

/** Target from issue 7: proxy RSS per idle session, bytes. */
export const IDLE_TARGET_BYTES_PER_SESSION = 40 * 1024;
/** Target from issue 7: sessions held at once. */
export const IDLE_TARGET_SESSIONS = 10_000;

/** The built-in command every idle session execs (mirrors dev/cluster/builtin-commands.ts). */
export const IDLE_COMMAND = 'kube-stream-proxy:idle';

/** The exec request-target of an idle session: stdin, stdout and stderr, as `kubectl exec -i`. */
export const IDLE_EXEC_PATH = `/api/v1/namespaces/default/pods/demo/exec?${new URLSearchParams({
  command: IDLE_COMMAND,
  stdin: 'true',
  stdout: 'true',
  stderr: 'true',
}).toString()}`;

export interface IdleOptions {
  /** Sessions per row, one row per count and path. */
  counts: number[];
  /** Session opens in flight at once. */
  concurrency: number;
  /** How long the sessions sit idle while the proxy's CPU is measured, ms. */
  windowMs: number;
  /** Pause between the last open and the start of the window, ms. */
  settleMs: number;
  /** Client ping period, ms (kubectl: 5,000). */
  pingIntervalMs: number;
  /** Sessions opened and closed before the baseline is read. */
  warmup: number;
  /** Per-session timeout for opening and for each echo, ms. */
  timeoutMs: number;
}

export const IDLE_FULL: IdleOptions = { counts: [1_000, 5_000, 10_000], concurrency: 200, windowMs: 30_000, settleMs: 5_000, pingIntervalMs: 5_000, warmup: 20, timeoutMs: 60_000 };
export const IDLE_QUICK: IdleOptions = { counts: [200], concurrency: 50, windowMs: 6_000, settleMs: 1_000, pingIntervalMs: 5_000, warmup: 10, timeoutMs: 30_000 };

export interface IdlePath {
  /** `--paths` key. */
  key: 'passthrough' | 'translation';
  name: string;
  client: 'spdy' | 'ws';
  /** Extra `serve` arguments. */
  proxyArgs: string[];
  /**
   * The proxy translates the v5 sessions itself (`--upstream-streaming spdy`, bench/servers.ts
   * `translateAtProxy`): the 1.36 dev cluster would otherwise take them and the row would hold
   * passed-through sessions.
   */
  translateAtProxy?: boolean;
}

export const IDLE_PATHS: IdlePath[] = [
  {
    key: 'passthrough',
    name: 'proxy passthrough (SPDY)',
    client: 'spdy',
    proxyArgs: ['--feature-gates', 'TranslateStreamCloseWebsocketRequests=false,PortForwardWebsockets=false'],
  },
  {
    key: 'translation',
    name: 'proxy translation (WS v5 → SPDY)',
    client: 'ws',
    proxyArgs: ['--feature-gates', 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true'],
    translateAtProxy: true,
  },
];

export interface IdleRow {
  path: string;
  /** Sessions asked for. */
  sessions: number;
  /** Sessions whose first echo came back. */
  opened: number;
  /** Sessions whose echo still came back after the idle window. */
  held: number;
  /** Distinct failure messages with their counts (opening or the final echo). */
  failures: Record<string, number>;
  /** ms from the first open to the last one settled. */
  openMs: number;
  /** Proxy VmRSS before opening (after the warm-up), bytes. */
  baselineRss: number;
  /** Proxy VmRSS at the end of the idle window, bytes. */
  heldRss: number;
  /** (heldRss − baselineRss) ÷ opened, bytes. */
  rssPerSession: number;
  /** Dev cluster VmRSS growth over the same span ÷ opened, bytes (for comparison). */
  clusterRssPerSession: number;
  /** Proxy utime + stime over the idle window, seconds. */
  idleCpuSeconds: number;
  /** Dev cluster utime + stime over the idle window, seconds. */
  clusterIdleCpuSeconds: number;
  windowMs: number;
  /** Open file descriptors of the proxy at the end of the window. */
  proxyFds: number;
  /** The proxy's soft RLIMIT_NOFILE. */
  proxyFdLimit: number;
  /** ms to close every session (stdin EOF; the built-in exits 0). */
  closeMs: number;
}

// ---------------------------------------------------------------------------------------------------
// /proc

/** Clock ticks per second for /proc/PID/stat (USER_HZ: 100 on every Linux ABI Node runs on). */
const CLK_TCK = 100;

/** utime + stime of `pid` in seconds, from /proc/PID/stat. */
export function readCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces) start at field 3 (state).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / CLK_TCK;
}

function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

function fdLimit(pid: number): number {
  const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  return m?.[1] === undefined || m[1] === 'unlimited' ? Infinity : Number(m[1]);
}

// ---------------------------------------------------------------------------------------------------
// Sessions

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Run `task(i)` for i in 0..n-1 with at most `limit` in flight. */
async function pool(n: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, n) }, worker));
}

/** Open one idle session and check its echo; rejects (and tears it down) on any failure. */
async function openIdle(path: IdlePath, url: string, o: IdleOptions): Promise<EchoSession> {
  const open = path.client === 'spdy' ? openSpdyExec : openWsExec;
  const s = await withTimeout(open(url, o.timeoutMs, { path: IDLE_EXEC_PATH, pingIntervalMs: o.pingIntervalMs }), o.timeoutMs, 'open');
  try {
    await echo(s, o.timeoutMs);
    return s;
  } catch (err) {
    void s.close();
    throw err;
  }
}

async function echo(s: EchoSession, timeoutMs: number): Promise<void> {
  s.send(Buffer.from('i'));
  await withTimeout(s.expect(1), timeoutMs, 'echo');
}

function messageOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  // Merge messages that differ only by the URL (ports).
  return text.replace(/(?:https?|wss?):\/\/\S+/g, '<url>').slice(0, 160);
}

// ---------------------------------------------------------------------------------------------------
// The measurement

/** One row: `count` idle sessions through `proxy` (whose dev cluster is `cluster`). */
export async function measureIdle(path: IdlePath, count: number, proxy: ServerProcess, cluster: ServerProcess, o: IdleOptions, log: (l: string) => void = () => undefined): Promise<IdleRow> {
  const failures: Record<string, number> = {};
  const fail = (err: unknown): void => {
    const m = messageOf(err);
    failures[m] = (failures[m] ?? 0) + 1;
  };
  // Warm-up: JIT, lazily loaded modules, first-use allocations; then let the proxy settle.
  for (let i = 0; i < o.warmup; i++) await (await openIdle(path, proxy.url, o)).close();
  await sleep(1_000);
  const baselineRss = readRss(proxy.pid);
  const clusterBaselineRss = readRss(cluster.pid);

  const sessions: EchoSession[] = [];
  const t0 = performance.now();
  let lastLog = t0;
  await pool(count, o.concurrency, async () => {
    try {
      sessions.push(await openIdle(path, proxy.url, o));
    } catch (err) {
      fail(err);
    }
    const now = performance.now();
    if (now - lastLog > 5_000) {
      lastLog = now;
      log(`  … ${sessions.length} open, ${count - sessions.length - Object.values(failures).reduce((a, b) => a + b, 0)} to go`);
    }
  });
  const openMs = performance.now() - t0;
  const opened = sessions.length;
  log(`  ${opened}/${count} opened in ${(openMs / 1000).toFixed(1)} s; idle window ${o.windowMs / 1000} s …`);

  try {
    await sleep(o.settleMs);
    const cpu0 = readCpuSeconds(proxy.pid);
    const clusterCpu0 = readCpuSeconds(cluster.pid);
    await sleep(o.windowMs);
    const idleCpuSeconds = readCpuSeconds(proxy.pid) - cpu0;
    const clusterIdleCpuSeconds = readCpuSeconds(cluster.pid) - clusterCpu0;
    const heldRss = readRss(proxy.pid);
    const clusterHeldRss = readRss(cluster.pid);
    const proxyFds = openFds(proxy.pid);
    const proxyFdLimit = fdLimit(proxy.pid);

    // Still there? One more echo per session.
    let held = 0;
    await pool(sessions.length, o.concurrency, async (i) => {
      try {
        await echo(sessions[i]!, o.timeoutMs);
        held++;
      } catch (err) {
        fail(err);
      }
    });

    const c0 = performance.now();
    await pool(sessions.length, 500, (i) => sessions[i]!.close());
    const closeMs = performance.now() - c0;
    sessions.length = 0;
    return {
      path: path.name,
      sessions: count,
      opened,
      held,
      failures,
      openMs,
      baselineRss,
      heldRss,
      rssPerSession: opened > 0 ? (heldRss - baselineRss) / opened : NaN,
      clusterRssPerSession: opened > 0 ? (clusterHeldRss - clusterBaselineRss) / opened : NaN,
      idleCpuSeconds,
      clusterIdleCpuSeconds,
      windowMs: o.windowMs,
      proxyFds,
      proxyFdLimit,
      closeMs,
    };
  } finally {
    // On an error above: do not leave sessions behind (the servers are stopped next anyway).
    await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
  }
}

/** Every (path, count): a fresh dev cluster and proxy process, `count` sessions held idle. */
export async function runIdleBenchmarks(options: { quick?: boolean; opts?: Partial<IdleOptions>; paths?: IdlePath[]; log?: (line: string) => void } = {}): Promise<IdleRow[]> {
  const o: IdleOptions = { ...(options.quick ? IDLE_QUICK : IDLE_FULL), ...options.opts };
  const log = options.log ?? (() => undefined);
  const rows: IdleRow[] = [];
  for (const path of options.paths ?? IDLE_PATHS) {
    for (const count of o.counts) {
      const cluster = await startDevClusterProcess();
      try {
        const proxy = await startProxyProcess(cluster.url, [...path.proxyArgs, ...(path.translateAtProxy ? translateAtProxy() : [])]);
        try {
          log(`idle: ${path.name}, ${count} sessions (${o.concurrency} opening at a time) …`);
          const row = await measureIdle(path, count, proxy, cluster, o, log);
          log(
            `  held ${row.held}/${count}, ${kib(row.rssPerSession)} KiB proxy RSS per session, ` +
              `${row.idleCpuSeconds.toFixed(2)} CPU-s idle over ${o.windowMs / 1000} s, ${row.proxyFds} fds (limit ${row.proxyFdLimit})`,
          );
          for (const [m, n] of Object.entries(row.failures)) log(`  failed ×${n}: ${m}`);
          rows.push(row);
        } finally {
          await proxy.close();
        }
      } finally {
        await cluster.close();
      }
    }
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------------
// Report

const kib = (b: number): string => (b / 1024).toFixed(1);
const mib = (b: number): string => (b / 1024 / 1024).toFixed(1);
const pct = (n: number, of: number): string => `${((100 * n) / of).toFixed(n === of ? 0 : 2)} %`;

const HEAD = [
  'path',
  'sessions',
  'opened',
  'held',
  'success',
  'open s',
  'proxy MiB before',
  'proxy MiB held',
  'KiB/session',
  `≤ ${IDLE_TARGET_BYTES_PER_SESSION / 1024} KiB`,
  'idle CPU-s',
  'idle % core',
  'cluster KiB/session',
  'cluster idle CPU-s',
  'proxy fds / limit',
];

function cells(r: IdleRow): string[] {
  return [
    r.path,
    String(r.sessions),
    String(r.opened),
    String(r.held),
    pct(r.held, r.sessions),
    (r.openMs / 1000).toFixed(1),
    mib(r.baselineRss),
    mib(r.heldRss),
    kib(r.rssPerSession),
    r.rssPerSession <= IDLE_TARGET_BYTES_PER_SESSION ? 'yes' : 'NO',
    r.idleCpuSeconds.toFixed(2),
    ((100 * r.idleCpuSeconds) / (r.windowMs / 1000)).toFixed(1),
    kib(r.clusterRssPerSession),
    r.clusterIdleCpuSeconds.toFixed(2),
    `${r.proxyFds} / ${r.proxyFdLimit}`,
  ];
}

/** Fixed-width text table. */
export function idleTextTable(rows: IdleRow[]): string {
  const all = [HEAD, ...rows.map(cells)];
  const widths = HEAD.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [line(HEAD), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map((r) => line(cells(r)))].join('\n');
}

/** Markdown table (for docs/benchmarks.md, pasted by hand: the page's generated table is the throughput one). */
export function idleMarkdownTable(rows: IdleRow[]): string {
  const lines = [`| ${HEAD.join(' | ')} |`, `|${HEAD.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`];
  for (const r of rows) lines.push(`| ${cells(r).join(' | ')} |`);
  return lines.join('\n');
}
