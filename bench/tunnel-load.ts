/**
 * Load through one agent tunnel (issue 14 "Load"): N concurrent WebSocket v5 exec sessions
 * (translated to SPDY at the proxy; the SPDY leg rides the agent's HTTP/2 tunnel) each `cat` the
 * same file of random bytes from the pod, and every session's stdout is sha256-verified (0 bytes
 * lost, exit Status Success). Real processes on loopback: the dev cluster, the proxy
 * (`serve --agent-listen`) and the agent (bench/agent-relay.ts); the clients are raw `ws`
 * sockets in this process (kubectl's v5 framing, bench/v5-exec-session.ts), not N kubectl processes.
 *
 * Slow-reader isolation: two stacks (proxy + agent each) run N sessions at the same time, one of
 * them beside one more session whose client stops reading after its first message while its pod
 * writes far more than any window holds. The N sessions' aggregate throughput (total bytes ÷ time
 * from their start to the end of the last) beside the stalled one must stay within 20 % of the
 * other stack's: HTTP/2 per-stream flow control parks the stalled stream at its 1 MiB window and
 * the others go on. Each round swaps the stalled reader's stack (see {@link runTunnelLoad}).
 *
 * Memory: the proxy's and the agent's VmRSS are sampled from /proc every 100 ms throughout.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgentRelay, type AgentRelayProcess } from './agent-relay.js';
import { startDevClusterProcess, translateAtProxy } from './servers.js';
import { readRss } from './slow-reader.js';
import { counterValue } from '../test/helpers/metrics.js';
import { execPath, gatedCatArgv, openSession, openStalledSession } from './v5-exec-session.js';

const MiB = 1024 * 1024;

/** What one load run moves. */
export interface TunnelLoadOptions {
  /** Concurrent sessions. */
  sessions: number;
  /** stdout bytes per session. */
  bytes: number;
  /** Rounds; each runs both stacks at once, the stalled reader beside stack 0, 1, 0, … */
  rounds: number;
  /** RSS sampling interval, ms. */
  sampleMs: number;
  log?: (line: string) => void;
}

/** The figure: 200 sessions × 5 MB (the bench's full run). */
export const TUNNEL_LOAD_FULL: Omit<TunnelLoadOptions, 'log'> = { sessions: 200, bytes: 5_000_000, rounds: 2, sampleMs: 100 };

/** What the stalled session's pod writes: far beyond the 1 MiB stream window and 32 MiB session window. */
export const STALLED_BYTES = 1024 * MiB;

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

/** One run of N sessions on one stack. */
export interface TunnelLoadRun {
  /** Which stack (0 or 1: each its own proxy and agent process). */
  stack: number;
  /** True for the run beside a stalled reader. */
  withStalled: boolean;
  /** ms to open all N sessions (WebSocket upgrade, translation, the exec started in the pod). */
  setupMs: number;
  /** ms from the start line sent to every session to the end of the last one's stdout. */
  wallMs: number;
  /** Aggregate stdout throughput of the N sessions, bytes/s. */
  bytesPerSecond: number;
  /** Sessions whose stdout had the right length and sha256 and whose Status was Success. */
  verified: number;
  /** Bytes missing or extra over all sessions (0 when every session verified). */
  bytesLost: number;
  /** Tunnel bytes from the cluster the stack's proxy counted during the run (`kube_stream_proxy_tunnel_bytes_total`). */
  tunnelBytes: number;
  /** The stalled session's stdout received before it stopped, and whether it was still open at the end. */
  stalled?: { received: number; openAtEnd: boolean };
}

/** One round: both stacks at once, one of them beside the stalled reader. */
export interface TunnelLoadRound {
  alone: TunnelLoadRun;
  beside: TunnelLoadRun;
  /** beside.bytesPerSecond ÷ alone.bytesPerSecond. */
  ratio: number;
}

/** The load benchmark's result. */
export interface TunnelLoadResult {
  sessions: number;
  bytes: number;
  rounds: TunnelLoadRound[];
  /** Geometric mean of the rounds' ratios (the stalled reader on each stack in turn). */
  stalledRatio: number;
  /** VmRSS of each stack's processes before the first round (after the warm-up), bytes. */
  baselineRss: { proxy: number; agent: number }[];
  /** Highest VmRSS of each stack's processes over all rounds, bytes. */
  peakRss: { proxy: number; agent: number }[];
  /** Problems found (sessions not verified, errors); empty when every byte arrived. */
  failures: string[];
  /**
   * Each stack's proxy's exec WebSocket sessions by way, from its `/metrics` at the end
   * (`apiserver_websocket_streaming_requests_total`): translated by the proxy (as this load is
   * specified), or passed through to the cluster (none expected).
   */
  ways: { translated: number; passedThrough: number }[];
}

/** A run whose N sessions are open and waiting for their start line. */
interface ReadyRun {
  setupMs: number;
  /** Send every start line and wait for every session's end. */
  go(): Promise<TunnelLoadRun>;
}

/** Open N sessions on `relay` (after the stalled one, when asked); `go()` runs their data phase. */
async function openRun(relay: AgentRelayProcess, stack: number, o: TunnelLoadOptions, payload: Payload, withStalled: boolean, failures: string[]): Promise<ReadyRun> {
  const { file, sha256: expected, bytes } = payload;
  const base = new URL(relay.url);
  base.protocol = 'ws:';
  const target = (argv: string[], stdin = false): URL => new URL(`${base.pathname}${execPath(argv, stdin)}`, base);
  const timeoutMs = Math.max(120_000, (o.sessions * bytes) / 1_000); // ≥ 1 MB/s aggregate
  const stalled = withStalled ? await openStalledSession(target(['dd', 'if=/dev/zero', `bs=${MiB}`, `count=${STALLED_BYTES / MiB}`, 'status=none']), timeoutMs) : undefined;
  const started = performance.now();
  const opened = await Promise.allSettled(Array.from({ length: o.sessions }, () => openSession(target(gatedCatArgv(file), true), timeoutMs)));
  const setupMs = performance.now() - started;
  const go = async (): Promise<TunnelLoadRun> => {
    const tunnelBefore = await tunnelBytesFromCluster(relay.proxy.url);
    const t0 = performance.now();
    for (const s of opened) if (s.status === 'fulfilled') s.value.go();
    const results = await Promise.allSettled(opened.map((s) => (s.status === 'fulfilled' ? s.value.done : Promise.reject(s.reason as Error))));
    const wallMs = performance.now() - t0;
    const tunnelBytes = (await tunnelBytesFromCluster(relay.proxy.url)) - tunnelBefore;
    let verified = 0;
    let bytesLost = 0;
    for (const [i, r] of results.entries()) {
      if (r.status === 'rejected') {
        if (failures.length < 20) failures.push(`stack ${stack} session ${i}: ${(r.reason as Error).message}`);
        bytesLost += bytes;
        continue;
      }
      const v = r.value;
      bytesLost += Math.abs(bytes - v.bytes);
      const ok = v.bytes === bytes && v.sha256 === expected && /"status":"Success"/.test(v.status) && v.closeCode === 1000;
      if (ok) verified++;
      else if (failures.length < 20) failures.push(`stack ${stack} session ${i}: ${v.bytes} bytes, sha256 ${v.sha256 === expected ? 'ok' : 'WRONG'}, status ${v.status || '(none)'}, close ${v.closeCode}`);
    }
    const run: TunnelLoadRun = { stack, withStalled, setupMs, wallMs, bytesPerSecond: (verified * bytes) / (wallMs / 1000), verified, bytesLost, tunnelBytes };
    if (stalled) {
      run.stalled = { received: stalled.received, openAtEnd: stalled.open() };
      stalled.close();
    }
    return run;
  };
  return { setupMs, go };
}

/**
 * One round on both stacks at once: open both stacks' sessions (the stalled one first on
 * `stalledStack`), then start every data phase together, so both see the same machine.
 */
async function runRound(stacks: AgentRelayProcess[], stalledStack: number | undefined, o: TunnelLoadOptions, payload: Payload, failures: string[]): Promise<TunnelLoadRun[]> {
  const ready = await Promise.all(stacks.map((relay, i) => openRun(relay, i, o, payload, i === stalledStack, failures)));
  return Promise.all(ready.map((r) => r.go()));
}

/** A file of random bytes in the pod's reach. */
interface Payload {
  file: string;
  sha256: string;
  bytes: number;
}

/** Write `bytes` random bytes to `file`. */
function writePayload(file: string, bytes: number): Payload {
  const data = randomBytes(bytes);
  writeFileSync(file, data);
  return { file, sha256: createHash('sha256').update(data).digest('hex'), bytes };
}

/** Bytes per session of the warm-up round. */
const WARM_UP_BYTES = 128 * 1024;

const GATES_ON = 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true';

/**
 * Start the dev cluster and two stacks (proxy + agent each), warm both up, then run `rounds`
 * rounds with the stalled reader on stack 0, 1, 0, …, and stop everything.
 *
 * Why two stacks at once rather than one stack twice: on this shared 2-core machine two runs of
 * the same load a few seconds apart differed by up to 2× (measured: 6.5–15.6 MB/s), far more than
 * the 20 % to be shown. Run side by side, both stacks share every burst of the machine's load,
 * so the ratio compares like with like; swapping the stalled reader's stack each round cancels
 * what differs between the stacks.
 */
export async function runTunnelLoad(o: TunnelLoadOptions): Promise<TunnelLoadResult> {
  const log = o.log ?? (() => {});
  const work = mkdtempSync(join(tmpdir(), 'ksp-tunnel-load-'));
  const payload = writePayload(join(work, 'payload.bin'), o.bytes);
  const warmUp = writePayload(join(work, 'warm-up.bin'), Math.min(o.bytes, WARM_UP_BYTES));
  const cluster = await startDevClusterProcess();
  const stacks: AgentRelayProcess[] = [];
  try {
    // `--upstream-streaming spdy`: the sessions are translated at the proxy, the SPDY leg riding the
    // tunnel, as this load is specified (the 1.36 dev cluster would take v5 itself).
    for (let i = 0; i < 2; i++) stacks.push(await startAgentRelay(cluster.url, join(work, `stack-${i}`), ['--feature-gates', GATES_ON, ...translateAtProxy()]));
    const failures: string[] = [];
    // Warm-up (not measured): 20 sessions of 128 KiB per stack, so that RSS growth is counted from
    // processes that have compiled their code paths and grown their heaps past start-up. (Both
    // stacks start equally cold, so the ratio does not depend on it.)
    await runRound(stacks, undefined, { ...o, sessions: Math.min(o.sessions, 20) }, warmUp, failures);
    const pids = stacks.flatMap((s) => [s.proxy.pid, s.agent.pid]);
    const baselineRss = stacks.map((s) => ({ proxy: readRss(s.proxy.pid), agent: readRss(s.agent.pid) }));
    const sampler = new RssSampler(pids, o.sampleMs);
    const rounds: TunnelLoadRound[] = [];
    try {
      for (let round = 1; round <= o.rounds; round++) {
        const stalledStack = (round - 1) % 2;
        const runs = await runRound(stacks, stalledStack, o, payload, failures);
        const beside = runs[stalledStack]!;
        const alone = runs[1 - stalledStack]!;
        rounds.push({ alone, beside, ratio: beside.bytesPerSecond / alone.bytesPerSecond });
        log(
          `round ${round}/${o.rounds}: stalled reader on stack ${stalledStack}; ` +
            runs
              .map(
                (r) =>
                  `stack ${r.stack}${r.withStalled ? ' (beside it)' : ''}: opened in ${r.setupMs.toFixed(0)} ms, ${o.sessions} × ${o.bytes / 1e6} MB in ${r.wallMs.toFixed(0)} ms ` +
                  `(${(r.bytesPerSecond / 1e6).toFixed(1)} MB/s), ${r.verified}/${o.sessions} verified`,
              )
              .join('; ') +
            `; the stalled reader took ${beside.stalled?.received} bytes, open at the end: ${beside.stalled?.openAtEnd}`,
        );
      }
    } finally {
      sampler.stop();
    }
    const ways = await Promise.all(
      stacks.map(async (s) => {
        const text = await (await fetch(new URL('/metrics', s.proxy.url))).text();
        const way = (proxyType: string): number => counterValue(text, 'apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: proxyType });
        return { translated: way('translated_at_apiserver'), passedThrough: way('proxied_to_upstream') };
      }),
    );
    return {
      ways,
      sessions: o.sessions,
      bytes: o.bytes,
      rounds,
      stalledRatio: Math.exp(rounds.reduce((a, r) => a + Math.log(r.ratio), 0) / rounds.length),
      baselineRss,
      peakRss: stacks.map((s) => ({ proxy: sampler.peaks.get(s.proxy.pid) ?? 0, agent: sampler.peaks.get(s.agent.pid) ?? 0 })),
      failures,
    };
  } finally {
    for (const s of stacks) await s.close();
    await cluster.close();
    rmSync(work, { recursive: true, force: true });
  }
}

const mib = (b: number): string => (b / MiB).toFixed(1);

/** Text summary of a result. */
export function tunnelLoadText(r: TunnelLoadResult): string {
  const row = (run: TunnelLoadRun): string =>
    `    stack ${run.stack} ${run.withStalled ? 'beside the stalled reader' : 'alone                    '}  opened in ${run.setupMs.toFixed(0).padStart(6)} ms, data ${run.wallMs.toFixed(0).padStart(7)} ms ` +
    `${(run.bytesPerSecond / 1e6).toFixed(1).padStart(6)} MB/s  ${run.verified}/${r.sessions} sha256-verified, ${run.bytesLost} bytes lost, tunnel from_cluster ${(run.tunnelBytes / 1e6).toFixed(1)} MB`;
  const lines = [
    `${r.sessions} concurrent WebSocket v5 exec sessions × ${r.bytes / 1e6} MB stdout through one agent tunnel, on each of two stacks at once`,
    ...r.rounds.flatMap((round, i) => [`  round ${i + 1}: ratio ${round.ratio.toFixed(2)}`, row(round.alone), row(round.beside)]),
    `  throughput beside the stalled reader ÷ alone (geometric mean over rounds): ${r.stalledRatio.toFixed(2)}`,
    ...r.baselineRss.map(
      (b, i) =>
        `  stack ${i}: proxy RSS ${mib(b.proxy)} → peak ${mib(r.peakRss[i]!.proxy)} MiB (+${mib(r.peakRss[i]!.proxy - b.proxy)}); ` +
        `agent RSS ${mib(b.agent)} → peak ${mib(r.peakRss[i]!.agent)} MiB (+${mib(r.peakRss[i]!.agent - b.agent)})`,
    ),
  ];
  if (r.failures.length > 0) lines.push(`  failures:`, ...r.failures.map((f) => `    ${f}`));
  return lines.join('\n');
}
