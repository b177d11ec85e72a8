/**
 * The "slow reader" memory benchmark (issue 7): a client execs
 * `dd if=/dev/zero bs=1048576 count=N status=none` through the proxy, reads the first ~1 MiB of stdout,
 * then stops reading for a fixed window while the pod keeps writing. The proxy's VmRSS is sampled every
 * 100 ms; growth = peak − baseline (baseline: before the session opens). Then the client resumes and
 * must receive exactly N MiB (the stream resumes intact). Target: growth ≤ 16 MiB.
 *
 * Paths: passthrough SPDY/3.1 (kubectl-like SPDY client, translation gates off) and translation
 * WebSocket v5.channel.k8s.io (gates on). The dev cluster and the proxy run as their own processes;
 * bench/servers.ts reports the proxy's PID, read for /proc/PID/status.
 */
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { SpdyConnection, type SpdyStream } from '../src/spdy/index.js';
import { startDevClusterProcess, startProxyProcess, translateAtProxy } from './servers.js';
import { openTypedStream } from './spdy-client.js';

const MiB = 1024 * 1024;

/** Target from issue 7: the proxy's RSS may grow by at most this much while a reader stalls. */
export const SLOW_READER_TARGET_MIB = 16;

export interface SlowReaderOptions {
  /** Total stdout bytes (a multiple of 1 MiB). */
  bytes: number;
  /** How long the client stops reading, ms. */
  stallMs: number;
  /** Bytes read before the stall. */
  readFirst: number;
  /** RSS sampling interval, ms. */
  sampleMs: number;
}

export const SLOW_READER_QUICK: SlowReaderOptions = { bytes: 64 * MiB, stallMs: 2_000, readFirst: MiB, sampleMs: 100 };
export const SLOW_READER_FULL: SlowReaderOptions = { bytes: 1024 * MiB, stallMs: 10_000, readFirst: MiB, sampleMs: 100 };

export type SlowReaderClient = 'spdy' | 'ws';

export interface SlowReaderPath {
  name: string;
  client: SlowReaderClient;
  /** Extra `serve` arguments. */
  proxyArgs: string[];
  /**
   * The proxy translates the v5 session itself (`--upstream-streaming spdy`, bench/servers.ts
   * `translateAtProxy`): the 1.36 dev cluster would otherwise take it and the row would measure a
   * passthrough.
   */
  translateAtProxy?: boolean;
}

export const SLOW_READER_PATHS: SlowReaderPath[] = [
  {
    name: 'passthrough (SPDY)',
    client: 'spdy',
    proxyArgs: ['--feature-gates', 'TranslateStreamCloseWebsocketRequests=false,PortForwardWebsockets=false'],
  },
  {
    name: 'translation (WebSocket v5)',
    client: 'ws',
    proxyArgs: ['--feature-gates', 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true'],
    translateAtProxy: true,
  },
];

export interface SlowReaderRow {
  path: string;
  /** Total bytes the pod wrote. */
  bytes: number;
  stallMs: number;
  /** Proxy VmRSS before the session opened, bytes. */
  baselineRss: number;
  /** Highest proxy VmRSS from the session's start to the end of the stall, bytes. */
  peakRss: number;
  /** peakRss − baselineRss, bytes. */
  growth: number;
  /** RSS samples taken (one per sampleMs). */
  samples: number;
  /** stdout bytes received before the stall began. */
  readBeforeStall: number;
  /** stdout bytes received in total. */
  received: number;
  /** received === bytes. */
  bytesOk: boolean;
  /** ms from resuming to the end of stdout. */
  resumeMs: number;
  /** ms from opening the session to the end of stdout (includes the stall). */
  totalMs: number;
}

// ---------------------------------------------------------------------------------------------------
// The proxy process (started by bench/servers.ts, which reports its PID)

/** VmRSS of `pid` in bytes, from /proc/PID/status (Linux). */
export function readRss(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

/** Samples a process's RSS every `intervalMs` until stopped; keeps the peak. */
class RssSampler {
  peak = 0;
  samples = 0;
  private readonly timer: NodeJS.Timeout;
  constructor(private readonly pid: number, intervalMs: number) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
  }
  sample(): void {
    const rss = readRss(this.pid);
    this.samples++;
    if (rss > this.peak) this.peak = rss;
  }
  stop(): void {
    clearInterval(this.timer);
  }
}

// ---------------------------------------------------------------------------------------------------
// Clients: a stdout reader that can be paused and resumed

/** A running exec whose stdout is being counted. */
interface StdoutSession {
  /** stdout bytes so far. */
  received(): number;
  /** Stop reading (backpressure reaches the socket). */
  pause(): void;
  resume(): void;
  /** Resolves with the byte count once stdout ended and the session closed. */
  done: Promise<number>;
  /** Tear down forcibly. */
  destroy(): void;
}

/** The dd exec request-target (stdout + stderr requested, as kubectl does; no stdin). */
export function ddExecPath(bytes: number): string {
  if (bytes % MiB !== 0) throw new Error(`bytes must be a multiple of 1 MiB, got ${bytes}`);
  const q = new URLSearchParams();
  for (const c of ['dd', 'if=/dev/zero', `bs=${MiB}`, `count=${bytes / MiB}`, 'status=none']) q.append('command', c);
  q.set('stdout', 'true');
  q.set('stderr', 'true');
  return `/api/v1/namespaces/default/pods/demo/exec?${q.toString()}`;
}

/**
 * A kubectl-like SPDY/3.1 exec (error, stdout, stderr streams, no stdin), in the manner of
 * bench/spdy-client.ts. `onData` is called per stdout chunk with the running count.
 */
function openSpdyStdout(baseUrl: string, path: string, onData: (total: number) => void, timeoutMs = 30_000): Promise<StdoutSession> {
  const url = new URL(path, baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      agent: false,
      headers: { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'v4.channel.k8s.io', 'Content-Length': '0' },
    });
    const timer = setTimeout(() => req.destroy(new Error(`SPDY upgrade of ${url} timed out after ${timeoutMs} ms`)), timeoutMs);
    req.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.once('response', (res) => {
      clearTimeout(timer);
      res.resume();
      req.destroy();
      reject(new Error(`SPDY upgrade of ${url}: HTTP ${res.statusCode}`));
    });
    req.once('upgrade', (_res, socket: Socket, head: Buffer) => {
      const conn = new SpdyConnection(socket, { isServer: false, head });
      void (async () => {
        const open = (streamtype: string): Promise<SpdyStream> => openTypedStream(conn, streamtype, timeoutMs);
        const error = await open('error');
        const stdout = await open('stdout');
        const stderr = await open('stderr');
        clearTimeout(timer);
        stderr.resume();
        let status = '';
        error.on('data', (c: Buffer) => (status += c.toString()));
        let received = 0;
        stdout.on('data', (c: Buffer) => {
          received += c.length;
          onData(received);
        });
        const done = new Promise<number>((res, rej) => {
          stdout.once('end', () => {
            // The exit status (if any) follows on the error stream; a non-empty one is a failure.
            setTimeout(() => {
              conn.destroy();
              if (status.includes('Failure')) rej(new Error(`exec failed: ${status}`));
              else res(received);
            }, 50);
          });
          stdout.once('close', () => {
            if (!stdout.readableEnded) rej(new Error(`SPDY stdout closed after ${received} bytes without end`));
          });
          conn.once('close', () => {
            if (!stdout.readableEnded) rej(new Error(`SPDY connection closed after ${received} bytes`));
          });
        });
        done.catch(() => undefined);
        resolve({
          received: () => received,
          pause: () => void stdout.pause(),
          resume: () => void stdout.resume(),
          done,
          destroy: () => conn.destroy(),
        });
      })().catch((err: unknown) => {
        clearTimeout(timer);
        conn.destroy();
        reject(err instanceof Error ? err : new Error(String(err)));
      });
    });
    req.end();
  });
}

/** A kubectl-like v5.channel.k8s.io exec (as bench/ws-client.ts); stdout is channel 1. */
function openWsStdout(baseUrl: string, path: string, onData: (total: number) => void, timeoutMs = 30_000): Promise<StdoutSession> {
  const url = new URL(path, baseUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    let received = 0;
    let status = '';
    let opened = false;
    const done = new Promise<number>((res, rej) => {
      ws.once('close', (code) => {
        if (status.includes('Failure')) rej(new Error(`exec failed: ${status}`));
        else if (code !== 1000) rej(new Error(`WebSocket closed (${code}) after ${received} bytes`));
        else res(received);
      });
    });
    done.catch(() => undefined);
    ws.on('error', (err) => {
      if (!opened) reject(err);
    });
    ws.once('close', (code) => {
      if (!opened) reject(new Error(`WebSocket ${url} closed (${code}) before opening`));
    });
    ws.on('message', (raw: WebSocket.RawData, isBinary: boolean) => {
      const data = raw as Buffer;
      if (!isBinary || data.length === 0) return;
      if (data[0] === 3) status += data.subarray(1).toString();
      if (data[0] !== 1 || data.length === 1) return;
      received += data.length - 1;
      onData(received);
    });
    ws.once('open', () => {
      opened = true;
      resolve({
        received: () => received,
        pause: () => ws.pause(),
        resume: () => ws.resume(),
        done,
        destroy: () => ws.terminate(),
      });
    });
  });
}

// ---------------------------------------------------------------------------------------------------
// The measurement

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One slow-reader session against the proxy process `proxy`. */
export async function measureSlowReader(path: SlowReaderPath, proxy: { url: string; pid: number }, opts: SlowReaderOptions): Promise<SlowReaderRow> {
  // Let the idle proxy settle before the baseline.
  await sleep(500);
  const baselineRss = readRss(proxy.pid);
  const sampler = new RssSampler(proxy.pid, opts.sampleMs);
  const started = performance.now();
  let session: StdoutSession | undefined;
  try {
    let reachedFirst!: () => void;
    const firstRead = new Promise<void>((r) => (reachedFirst = r));
    let stalled = false;
    const onData = (total: number): void => {
      if (!stalled && total >= opts.readFirst) {
        stalled = true;
        session?.pause();
        reachedFirst();
      }
    };
    const open = path.client === 'spdy' ? openSpdyStdout : openWsStdout;
    session = await open(proxy.url, ddExecPath(opts.bytes), onData);
    if (stalled) session.pause();
    const s = session;
    await Promise.race([firstRead, s.done.then((n) => Promise.reject(new Error(`stdout ended after ${n} bytes, before the stall`)))]);
    const readBeforeStall = s.received();
    await Promise.race([sleep(opts.stallMs), s.done.then((n) => Promise.reject(new Error(`stdout ended after ${n} bytes, during the stall`)))]);
    sampler.sample();
    sampler.stop();
    const resumed = performance.now();
    s.resume();
    const received = await s.done;
    const ended = performance.now();
    return {
      path: path.name,
      bytes: opts.bytes,
      stallMs: opts.stallMs,
      baselineRss,
      peakRss: sampler.peak,
      growth: sampler.peak - baselineRss,
      samples: sampler.samples,
      readBeforeStall,
      received,
      bytesOk: received === opts.bytes,
      resumeMs: ended - resumed,
      totalMs: ended - started,
    };
  } catch (err) {
    session?.destroy();
    throw err;
  } finally {
    sampler.stop();
  }
}

/** Every path: a dev cluster process, then per path a fresh proxy process and one slow-reader session. */
export async function runSlowReaderBenchmarks(options: { quick?: boolean; opts?: Partial<SlowReaderOptions>; log?: (line: string) => void } = {}): Promise<SlowReaderRow[]> {
  const opts = { ...(options.quick ? SLOW_READER_QUICK : SLOW_READER_FULL), ...options.opts };
  const log = options.log ?? (() => undefined);
  const cluster = await startDevClusterProcess();
  const rows: SlowReaderRow[] = [];
  try {
    for (const path of SLOW_READER_PATHS) {
      const proxy = await startProxyProcess(cluster.url, [...path.proxyArgs, ...(path.translateAtProxy ? translateAtProxy() : [])]);
      try {
        log(`slow reader: ${path.name}, ${opts.bytes / MiB} MiB, ${opts.stallMs} ms stall …`);
        const row = await measureSlowReader(path, proxy, opts);
        log(`  growth ${mib(row.growth)} MiB, ${row.received} bytes received (${row.bytesOk ? 'ok' : 'WRONG'})`);
        rows.push(row);
      } finally {
        await proxy.close();
      }
    }
  } finally {
    await cluster.close();
  }
  return rows;
}

const mib = (b: number): string => (b / MiB).toFixed(1);

const HEAD = ['path', 'stdout', 'stall', 'baseline MiB', 'peak MiB', 'growth MiB', `≤ ${SLOW_READER_TARGET_MIB} MiB`, 'bytes ok', 'resume ms', 'samples'];

/** Fixed-width text table. */
export function slowReaderTextTable(rows: SlowReaderRow[]): string {
  const cells = (r: SlowReaderRow): string[] => [
    r.path,
    `${r.bytes / MiB} MiB`,
    `${r.stallMs / 1000} s`,
    mib(r.baselineRss),
    mib(r.peakRss),
    mib(r.growth),
    r.growth <= SLOW_READER_TARGET_MIB * MiB ? 'yes' : 'NO',
    r.bytesOk ? 'yes' : `NO (${r.received})`,
    r.resumeMs.toFixed(0),
    String(r.samples),
  ];
  const all = [HEAD, ...rows.map(cells)];
  const widths = HEAD.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(HEAD), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map((r) => line(cells(r)))].join('\n');
}
