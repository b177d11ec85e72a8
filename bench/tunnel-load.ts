/**
 * Load through one agent tunnel (issue 14 "Load"): N concurrent WebSocket v5 exec sessions
 * (translated to SPDY at the proxy; the SPDY leg rides the agent's HTTP/2 tunnel) each `cat` the
 * same file of random bytes from the pod, and every session's stdout is sha256-verified (0 bytes
 * lost, exit Status Success). Real processes on loopback: the dev cluster, the proxy
 * (`serve --agent-listen`) and the agent (bench/agent-relay.ts); the clients are raw `ws`
 * sockets in this process (kubectl's v5 framing, as bench/ws-client.ts), not N kubectl processes.
 *
 * Slow-reader isolation: the same N sessions run twice, interleaved — alone, and next to one more
 * session whose client stops reading after its first message while its pod writes far more than
 * any window holds. The N sessions' aggregate throughput (total bytes ÷ time until the last one
 * finished) with the stalled one beside them must stay within 20 % of the run without it: HTTP/2
 * per-stream flow control parks the stalled stream at its 1 MiB window and the others go on.
 *
 * Memory: the proxy's and the agent's VmRSS are sampled from /proc every 100 ms throughout.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startAgentRelay, type AgentRelayProcess } from './agent-relay.js';
import { startDevClusterProcess } from './servers.js';
import { readRss } from './slow-reader.js';

const MiB = 1024 * 1024;

/** What one load run moves. */
export interface TunnelLoadOptions {
  /** Concurrent sessions. */
  sessions: number;
  /** stdout bytes per session. */
  bytes: number;
  /** Runs of each kind (alone / beside a stalled reader), interleaved: alone, stalled, alone, … */
  rounds: number;
  /** RSS sampling interval, ms. */
  sampleMs: number;
  log?: (line: string) => void;
}

/** The figure: 200 sessions × 5 MB (the bench's full run). */
export const TUNNEL_LOAD_FULL: Omit<TunnelLoadOptions, 'log'> = { sessions: 200, bytes: 5_000_000, rounds: 2, sampleMs: 100 };

/** What the stalled session's pod writes: far beyond the 1 MiB stream window and 32 MiB session window. */
export const STALLED_BYTES = 1024 * MiB;

/** The exec target of `argv` on the dev cluster's `demo` pod, stdout and stderr wanted (as kubectl). */
export function execPath(argv: string[]): string {
  const q = new URLSearchParams();
  for (const c of argv) q.append('command', c);
  q.set('stdout', 'true');
  q.set('stderr', 'true');
  return `/api/v1/namespaces/default/pods/demo/exec?${q.toString()}`;
}

/** One finished session. */
interface SessionResult {
  bytes: number;
  sha256: string;
  /** The v5 error channel's Status text. */
  status: string;
  closeCode: number;
}

/** Open a v5 exec at `url` and read stdout to its end, hashing it. */
function runSession(url: URL, timeoutMs: number): Promise<SessionResult> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    const hash = createHash('sha256');
    let bytes = 0;
    let status = '';
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`session timed out after ${timeoutMs} ms with ${bytes} bytes of stdout`));
    }, timeoutMs);
    ws.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    ws.on('message', (raw: WebSocket.RawData, isBinary: boolean) => {
      const data = raw as Buffer;
      if (!isBinary || data.length === 0) return;
      if (data[0] === 1) {
        bytes += data.length - 1;
        hash.update(data.subarray(1));
      } else if (data[0] === 3) status += data.subarray(1).toString('utf8');
    });
    ws.once('close', (code) => {
      clearTimeout(timer);
      resolve({ bytes, sha256: hash.digest('hex'), status, closeCode: code });
    });
  });
}

/** A session whose client stops reading after its first stdout message. */
interface StalledSession {
  /** stdout bytes the client took before it stopped. */
  received: number;
  /** True while its WebSocket is open. */
  open(): boolean;
  close(): void;
}

/** Open the stalled session; resolves once it has stopped reading. */
function openStalledSession(url: URL, timeoutMs: number): Promise<StalledSession> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    let received = 0;
    let stalled = false;
    ws.on('error', (err) => {
      if (!stalled) reject(err);
    });
    ws.once('close', (code) => {
      if (!stalled) reject(new Error(`stalled session closed (${code}) before its first stdout`));
    });
    ws.on('message', (raw: WebSocket.RawData, isBinary: boolean) => {
      const data = raw as Buffer;
      if (!isBinary || data[0] !== 1 || data.length === 1) return;
      received += data.length - 1;
      if (stalled) return;
      stalled = true;
      // No more reads from the socket: backpressure to the proxy, the tunnel stream and the pod.
      ws.pause();
      resolve({
        get received() {
          return received;
        },
        open: () => ws.readyState === WebSocket.OPEN,
        close: () => ws.terminate(),
      });
    });
  });
}

/** Samples VmRSS of some processes until stopped; keeps each one's peak. */
class RssSampler {
  readonly peaks = new Map<number, number>();
  readonly #timer: NodeJS.Timeout;
  constructor(
    private readonly pids: number[],
    intervalMs: number,
  ) {
    this.sample();
    this.#timer = setInterval(() => this.sample(), intervalMs);
  }
  sample(): void {
    for (const pid of this.pids) {
      const rss = readRss(pid);
      if (rss > (this.peaks.get(pid) ?? 0)) this.peaks.set(pid, rss);
    }
  }
  stop(): void {
    clearInterval(this.#timer);
    this.sample();
  }
}

/** `kube_stream_proxy_tunnel_bytes_total{direction="from_cluster"}` of the proxy. */
function tunnelBytesFromCluster(proxyUrl: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(new URL('/metrics', proxyUrl), (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        const m = /^kube_stream_proxy_tunnel_bytes_total\{[^}]*direction="from_cluster"[^}]*\}\s+(\S+)/m.exec(text);
        resolve(m ? Number(m[1]) : 0);
      });
    });
    req.once('error', reject);
    req.end();
  });
}

/** One run of N sessions. */
export interface TunnelLoadRun {
  /** True for the run beside a stalled reader. */
  withStalled: boolean;
  /** ms from opening the first session to the end of the last. */
  wallMs: number;
  /** Aggregate stdout throughput of the N sessions, bytes/s. */
  bytesPerSecond: number;
  /** Sessions whose stdout had the right length and sha256 and whose Status was Success. */
  verified: number;
  /** Bytes missing or extra over all sessions (0 when every session verified). */
  bytesLost: number;
  /** Tunnel bytes from the cluster the proxy counted during the run. */
  tunnelBytes: number;
  /** The stalled session's stdout received before it stopped, and whether it was still open at the end. */
  stalled?: { received: number; openAtEnd: boolean };
}

/** The load benchmark's result. */
export interface TunnelLoadResult {
  sessions: number;
  bytes: number;
  runs: TunnelLoadRun[];
  /** Median throughput beside the stalled reader ÷ median alone. */
  stalledRatio: number;
  /** VmRSS before the first run (after a warm-up), bytes. */
  baselineRss: { proxy: number; agent: number };
  /** Highest VmRSS over all runs, bytes. */
  peakRss: { proxy: number; agent: number };
  /** Problems found (sessions not verified, errors); empty when every byte arrived. */
  failures: string[];
}

/** Median of a non-empty list. */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Run N sessions once (optionally beside a stalled reader). */
async function loadRun(relay: AgentRelayProcess, o: TunnelLoadOptions, file: string, expected: string, withStalled: boolean, failures: string[]): Promise<TunnelLoadRun> {
  const base = new URL(relay.url);
  base.protocol = 'ws:';
  const target = (argv: string[]): URL => new URL(`${base.pathname}${execPath(argv)}`, base);
  const timeoutMs = Math.max(60_000, (o.sessions * o.bytes) / 1_000); // ≥ 1 MB/s aggregate
  const stalled = withStalled ? await openStalledSession(target(['dd', 'if=/dev/zero', `bs=${MiB}`, `count=${STALLED_BYTES / MiB}`, 'status=none']), timeoutMs) : undefined;
  const tunnelBefore = await tunnelBytesFromCluster(relay.proxy.url);
  const started = performance.now();
  const results = await Promise.allSettled(Array.from({ length: o.sessions }, () => runSession(target(['cat', file]), timeoutMs)));
  const wallMs = performance.now() - started;
  const tunnelBytes = (await tunnelBytesFromCluster(relay.proxy.url)) - tunnelBefore;
  let verified = 0;
  let bytesLost = 0;
  for (const [i, r] of results.entries()) {
    if (r.status === 'rejected') {
      failures.push(`session ${i}: ${(r.reason as Error).message}`);
      bytesLost += o.bytes;
      continue;
    }
    const v = r.value;
    bytesLost += Math.abs(o.bytes - v.bytes);
    const ok = v.bytes === o.bytes && v.sha256 === expected && /"status":"Success"/.test(v.status) && v.closeCode === 1000;
    if (ok) verified++;
    else if (failures.length < 20) failures.push(`session ${i}: ${v.bytes} bytes, sha256 ${v.sha256 === expected ? 'ok' : 'WRONG'}, status ${v.status || '(none)'}, close ${v.closeCode}`);
  }
  const run: TunnelLoadRun = { withStalled, wallMs, bytesPerSecond: (verified * o.bytes) / (wallMs / 1000), verified, bytesLost, tunnelBytes };
  if (stalled) {
    run.stalled = { received: stalled.received, openAtEnd: stalled.open() };
    stalled.close();
  }
  return run;
}

/** Start the processes, warm up, run alone/stalled interleaved `rounds` times each, stop. */
export async function runTunnelLoad(o: TunnelLoadOptions): Promise<TunnelLoadResult> {
  const log = o.log ?? (() => {});
  const work = mkdtempSync(join(tmpdir(), 'ksp-tunnel-load-'));
  const file = join(work, 'payload.bin');
  const payload = randomBytes(o.bytes);
  writeFileSync(file, payload);
  const expected = createHash('sha256').update(payload).digest('hex');
  const cluster = await startDevClusterProcess();
  let relay: AgentRelayProcess | undefined;
  try {
    relay = await startAgentRelay(cluster.url, join(work, 'relay'), ['--feature-gates', 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true']);
    const failures: string[] = [];
    // Warm-up (not measured): the first sessions of a fresh process compile their code paths and
    // grow the heaps to their working size; RSS growth is counted from after it.
    await loadRun(relay, { ...o, sessions: Math.min(o.sessions, 20) }, file, expected, false, failures);
    const pids = [relay.proxy.pid, relay.agent.pid];
    const baselineRss = { proxy: readRss(relay.proxy.pid), agent: readRss(relay.agent.pid) };
    const sampler = new RssSampler(pids, o.sampleMs);
    const runs: TunnelLoadRun[] = [];
    try {
      for (let round = 1; round <= o.rounds; round++) {
        for (const withStalled of round % 2 === 1 ? [false, true] : [true, false]) {
          const run = await loadRun(relay, o, file, expected, withStalled, failures);
          runs.push(run);
          log(
            `round ${round}/${o.rounds} ${withStalled ? 'beside a stalled reader' : 'alone'}: ${o.sessions} × ${o.bytes / 1e6} MB in ${run.wallMs.toFixed(0)} ms ` +
              `(${(run.bytesPerSecond / 1e6).toFixed(1)} MB/s), ${run.verified}/${o.sessions} verified` +
              (run.stalled ? `, stalled reader took ${run.stalled.received} bytes, open at the end: ${run.stalled.openAtEnd}` : ''),
          );
        }
      }
    } finally {
      sampler.stop();
    }
    const alone = median(runs.filter((r) => !r.withStalled).map((r) => r.bytesPerSecond));
    const beside = median(runs.filter((r) => r.withStalled).map((r) => r.bytesPerSecond));
    return {
      sessions: o.sessions,
      bytes: o.bytes,
      runs,
      stalledRatio: beside / alone,
      baselineRss,
      peakRss: { proxy: sampler.peaks.get(relay.proxy.pid) ?? 0, agent: sampler.peaks.get(relay.agent.pid) ?? 0 },
      failures,
    };
  } finally {
    await relay?.close();
    await cluster.close();
    rmSync(work, { recursive: true, force: true });
  }
}

const mib = (b: number): string => (b / MiB).toFixed(1);

/** Text summary of a result. */
export function tunnelLoadText(r: TunnelLoadResult): string {
  const lines = [
    `${r.sessions} concurrent WebSocket v5 exec sessions × ${r.bytes / 1e6} MB stdout through one agent tunnel`,
    ...r.runs.map(
      (run) =>
        `  ${run.withStalled ? 'beside a stalled reader' : 'alone                  '}  ${run.wallMs.toFixed(0).padStart(7)} ms  ${(run.bytesPerSecond / 1e6).toFixed(1).padStart(6)} MB/s  ` +
        `${run.verified}/${r.sessions} sha256-verified, ${run.bytesLost} bytes lost`,
    ),
    `  throughput beside the stalled reader ÷ alone (medians): ${r.stalledRatio.toFixed(2)}`,
    `  proxy RSS ${mib(r.baselineRss.proxy)} → peak ${mib(r.peakRss.proxy)} MiB (+${mib(r.peakRss.proxy - r.baselineRss.proxy)}); ` +
      `agent RSS ${mib(r.baselineRss.agent)} → peak ${mib(r.peakRss.agent)} MiB (+${mib(r.peakRss.agent - r.baselineRss.agent)})`,
  ];
  if (r.failures.length > 0) lines.push(`  failures:`, ...r.failures.map((f) => `    ${f}`));
  return lines.join('\n');
}
