/**
 * `npm run soak` (issue 8 item 4, full size): against a dev cluster and the proxy, each in its own
 * process (the proxy with `--expose-gc` and an IPC channel, bench/soak-proxy.ts):
 *
 * 1. LOAD: 1,000 concurrent translated exec sessions (WebSocket v5 → proxy → SPDY → dev cluster
 *    echo), each moving 10 MB each way, SHA-256 verified; zero bytes lost and zero errors required.
 *    The echo is the dev cluster's process-free built-in `kube-stream-proxy:idle` by default: the
 *    proxy is what is under test, and it does exactly the same work as for `cat`, while 1,000 real
 *    `cat`s (plus the dev cluster's pipe work for each) would share the same two cores with it
 *    (`--load-command cat` runs them anyway).
 * 2. SOAK: 10,000 sequential sessions (64 KiB each way) through real `cat` processes; the proxy's
 *    open file descriptors (/proc/PID/fd) and heap after full GC must come back to their baseline
 *    (taken after a warm-up).
 *
 * Options: `--concurrent N`, `--bytes N`, `--sequential N`, `--sequential-bytes N` (for smaller
 * runs), `--load-command cat|kube-stream-proxy:idle`, `--soak-command …` (default `cat`),
 * `--ramp-ms N` (the concurrent sessions start spread over this time, default 30 s, so that 1,000
 * upgrades do not all wait on one event-loop turn of each server), `--skip-soak`. Prints a report;
 * exits 1 if a requirement failed. The fuzz part of the soak (1,000,000 cases) is the npm script's
 * second command (`FUZZ_RUNS=100 vitest run test/fuzz`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startDevClusterProcess } from './servers.js';
import { BUILTIN_ECHO, runConcurrent, runSequential, summaryLine, type EchoCommand, type LoadSummary } from './soak-load.js';
import type { ProxyMeasure } from './soak-proxy.js';

const { values } = parseArgs({
  options: {
    concurrent: { type: 'string', default: '1000' },
    bytes: { type: 'string', default: '10000000' },
    sequential: { type: 'string', default: '10000' },
    'sequential-bytes': { type: 'string', default: String(64 * 1024) },
    warmup: { type: 'string', default: '200' },
    'ramp-ms': { type: 'string', default: '30000' },
    'load-command': { type: 'string', default: BUILTIN_ECHO },
    'soak-command': { type: 'string', default: 'cat' },
    'skip-soak': { type: 'boolean', default: false },
  },
});
const ECHO_COMMANDS: readonly string[] = ['cat', BUILTIN_ECHO];
for (const c of [values['load-command'], values['soak-command']]) {
  if (!ECHO_COMMANDS.includes(c)) throw new Error(`unknown echo command ${JSON.stringify(c)} (known: ${ECHO_COMMANDS.join(', ')})`);
}
const LOAD_COMMAND = values['load-command'] as EchoCommand;
const SOAK_COMMAND = values['soak-command'] as EchoCommand;
const CONCURRENT = Number(values.concurrent);
const BYTES = Number(values.bytes);
const SEQUENTIAL = Number(values.sequential);
const SEQ_BYTES = Number(values['sequential-bytes']);
const WARMUP = Number(values.warmup);
/** Heap growth accepted over the sequential run (noise of JIT code and caches). */
const HEAP_SLACK_BYTES = 2 * 1024 * 1024;
/** How long heap and descriptors may take to come back after the last session (SPDY close grace is 30 s). */
const SETTLE_MS = 45_000;

const MiB = 1024 * 1024;
const mib = (b: number): string => (b / MiB).toFixed(1);
const log = (line: string): void => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

/** The soak proxy child. */
interface SoakProxy {
  url: string;
  pid: number;
  measure(): Promise<ProxyMeasure>;
  close(): Promise<void>;
}

function startSoakProxy(upstream: string): Promise<SoakProxy> {
  const script = join(dirname(fileURLToPath(import.meta.url)), 'soak-proxy.js');
  const child: ChildProcess = spawn(process.execPath, ['--expose-gc', script, upstream], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('exit', (code, signal) => reject(new Error(`soak proxy exited: code=${code} signal=${signal}`)));
    child.once('message', (m: { url: string }) => {
      resolve({
        url: m.url,
        pid: child.pid!,
        measure: () =>
          new Promise<ProxyMeasure>((res) => {
            child.once('message', (x: ProxyMeasure) => res(x));
            child.send('measure');
          }),
        close: () =>
          new Promise<void>((res) => {
            child.removeAllListeners('exit');
            child.once('exit', () => res());
            child.send('close');
            setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
          }),
      });
    });
  });
}

/** Measure every `ms` until `ok` holds or `SETTLE_MS` passed; returns the last measure and the wait. */
async function settle(proxy: SoakProxy, ok: (m: ProxyMeasure) => boolean): Promise<{ m: ProxyMeasure; waitedMs: number }> {
  const started = performance.now();
  let m = await proxy.measure();
  while (!ok(m) && performance.now() - started < SETTLE_MS) {
    await new Promise((r) => setTimeout(r, 1_000));
    m = await proxy.measure();
  }
  return { m, waitedMs: performance.now() - started };
}

async function main(): Promise<number> {
  const failures: string[] = [];
  const cluster = await startDevClusterProcess();
  const proxy = await startSoakProxy(cluster.url);
  log(`dev cluster ${cluster.url} (pid ${cluster.pid}), proxy ${proxy.url} (pid ${proxy.pid})`);
  try {
    const idle = await proxy.measure();
    log(`proxy idle: heap ${mib(idle.heapUsed)} MiB, RSS ${mib(idle.rss)} MiB, fds ${idle.fds}`);

    // 1. LOAD
    log(`load: ${CONCURRENT} concurrent sessions × ${BYTES} bytes each way through \`${LOAD_COMMAND}\` …`);
    let peakRss = 0;
    const sampler = setInterval(() => {
      void proxy.measure().then((m) => (peakRss = Math.max(peakRss, m.rss)));
    }, 5_000);
    let load: LoadSummary;
    try {
      load = await runConcurrent(proxy.url, CONCURRENT, BYTES, {
        timeoutMs: 3_600_000,
        rampMs: Number(values['ramp-ms']),
        command: LOAD_COMMAND,
      });
    } finally {
      clearInterval(sampler);
    }
    log(summaryLine('load', load));
    log(`load: proxy peak RSS ${mib(peakRss)} MiB (sampled every 5 s, with a full GC per sample)`);
    if (load.errors !== 0 || load.bytesLost !== 0 || load.hashMismatches !== 0 || load.sessions !== CONCURRENT) {
      failures.push(`load: ${load.errors} errors, ${load.bytesLost} bytes lost, ${load.hashMismatches} sha256 mismatches`);
    }
    const afterLoad = await settle(proxy, (m) => m.fds <= idle.fds);
    log(`after load: heap ${mib(afterLoad.m.heapUsed)} MiB, RSS ${mib(afterLoad.m.rss)} MiB, fds ${afterLoad.m.fds} (settled in ${afterLoad.waitedMs.toFixed(0)} ms)`);

    // 2. SOAK
    if (values['skip-soak']) return finish(failures);
    const warm = await runSequential(proxy.url, WARMUP, SEQ_BYTES, { timeoutMs: 60_000, firstSession: 100_000, command: SOAK_COMMAND });
    if (warm.errors !== 0) failures.push(`warm-up: ${warm.errors} errors`);
    // Baseline: once the warm-up's sockets are closed, and past the SPDY close grace period (30 s,
    // src/spdy/connection.ts), whose timer keeps each closed connection reachable until it fires.
    const fdBase = (await settle(proxy, (m) => m.fds <= idle.fds)).m.fds;
    await new Promise((r) => setTimeout(r, 31_000));
    const settledBase = await proxy.measure();
    const heapBase = settledBase.heapUsed;
    log(`soak baseline (after ${WARMUP} warm-up sessions): heap ${mib(heapBase)} MiB, RSS ${mib(settledBase.rss)} MiB, fds ${fdBase}`);
    log(`soak: ${SEQUENTIAL} sequential sessions × ${SEQ_BYTES} bytes each way through \`${SOAK_COMMAND}\` …`);
    let maxFds = 0;
    let maxHeap = 0;
    const soak = await runSequential(proxy.url, SEQUENTIAL, SEQ_BYTES, {
      timeoutMs: 60_000,
      command: SOAK_COMMAND,
      firstSession: 200_000,
      every: Math.max(1, Math.floor(SEQUENTIAL / 10)),
      onProgress: async (done) => {
        const m = await proxy.measure();
        maxFds = Math.max(maxFds, m.fds);
        maxHeap = Math.max(maxHeap, m.heapUsed);
        log(`  ${done} sessions: heap ${mib(m.heapUsed)} MiB, RSS ${mib(m.rss)} MiB, fds ${m.fds}`);
      },
    });
    log(summaryLine('soak', soak));
    if (soak.errors !== 0 || soak.bytesLost !== 0) failures.push(`soak: ${soak.errors} errors, ${soak.bytesLost} bytes lost`);
    const end = await settle(proxy, (m) => m.fds <= fdBase && m.heapUsed - heapBase < HEAP_SLACK_BYTES);
    log(
      `soak end: heap ${mib(end.m.heapUsed)} MiB (baseline ${mib(heapBase)}, ${((end.m.heapUsed - heapBase) / 1024).toFixed(0)} KiB), ` +
        `RSS ${mib(end.m.rss)} MiB, fds ${end.m.fds} (baseline ${fdBase}); back within ${end.waitedMs.toFixed(0)} ms of the last session; ` +
        `max during the run: heap ${mib(maxHeap)} MiB, fds ${maxFds}`,
    );
    if (end.m.fds > fdBase) failures.push(`soak: ${end.m.fds} fds open, baseline ${fdBase}`);
    if (end.m.heapUsed - heapBase >= HEAP_SLACK_BYTES) failures.push(`soak: heap ${mib(end.m.heapUsed)} MiB, baseline ${mib(heapBase)} MiB`);
  } finally {
    await proxy.close();
    await cluster.close();
  }
  return finish(failures);
}

function finish(failures: string[]): number {
  if (failures.length > 0) {
    log(`SOAK FAILED:\n  ${failures.join('\n  ')}`);
    return 1;
  }
  log('soak passed');
  return 0;
}

process.exitCode = await main();
