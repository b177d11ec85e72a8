/**
 * `npm run bench` entry point (`npm run bench -- --help` prints this):
 *   node dist/bench/run.js [--quick] [--runs N] [--bytes N] [--requests N] [--only stdout,stdin,…] [--write]
 *   --quick   50 MB, 1 run (test/e2e/bench-quick.test.ts adds --bytes 4000000 --requests 50)
 *   --write   also replace the measured table at the top of docs/benchmarks.md (machine, date, command line);
 *             the commentary below the marker line is kept
 *   --latency run the latency benchmarks (bench/latency.ts) instead of the throughput ones and print
 *             their table (with --quick: 200 round trips, 10 concurrent sessions, 50 handshakes);
 *             the concurrent echo row runs --runs interleaved rounds (default 3; quick 1) and carries
 *             the relay's CPU per round trip; --paths takes direct,passthrough,translation,nginx,bare and
 *             passthrough-batched,translation-batched (the proxy with KSP_WRITE_FIRST=0, the per-turn
 *             batching before src/turn-cork.ts); not combinable with --write
 *   --slow-reader run the slow-reader memory benchmark (bench/slow-reader.ts: 1 GiB of exec stdout, a 10 s
 *             stall; with --quick 64 MiB, 2 s) and print its table; not combinable with --write
 *   --tunnel-load  run the load through one agent tunnel (bench/tunnel-load.ts: on each of two proxy +
 *             agent stacks at once, 200 concurrent WebSocket v5 exec sessions × 5 MB stdout, sha256-verified,
 *             one stack beside a stalled reader, swapped each round; proxy and agent RSS; --runs rounds,
 *             default 2; --bytes per session) and print its summary; not combinable with --write
 *     --sessions N           concurrent sessions (default 200)
 *   --idle    run the idle-session concurrency benchmark (bench/idle.ts: 1,000, 5,000 and 10,000 idle exec
 *             sessions through the passthrough and the translation, proxy RSS per session and idle CPU;
 *             with --quick 200 sessions, a 6 s window) and print its table; not combinable with --write
 *     --idle-sessions N,N,…  session counts (one row each per path)
 *     --idle-window S        idle window in seconds (default 30; quick 6)
 *     --idle-concurrency N   session opens in flight (default 200; quick 50)
 *   --paths direct,passthrough,translation,tunnel,nginx  (with --idle: passthrough,translation)
 *             only these paths (throughput and latency; default: all, nginx included for the throughput
 *             rows and as an extra latency row, installed with apt-get when missing or skipped with a note)
 *   --no-install  never install nginx: skip its rows with a note when it is missing
 *   --cpu-prof DIR  run each proxy process under `node --cpu-prof`, profiles in DIR/<path> (throughput and
 *             --cpu; summarise them with `node dist/bench/cpuprofile-top.js FILE`)
 *   --cpu     run only the CPU-per-byte benchmark (bench/cpu.ts: every relay — the proxy's SPDY passthrough,
 *             its translation and tunnel (`--upstream-streaming spdy`), its WebSocket passthrough (v5 exec
 *             and the tunnel passed to the dev cluster's 1.36 API), the same through an agent tunnel (proxy
 *             and agent CPU), nginx, HAProxy, socat, the bare Node relay — × stdout, stdin,
 *             port-forward; 300 MB, 3 interleaved rounds; with --quick 20 MB, 1 round) and print its
 *             table; with --write replace the generated CPU section of docs/benchmarks.md. --runs is
 *             the number of rounds, --paths takes direct,passthrough,passthrough-js,translation,tunnel,translation-nofloor,
 *             translation-cli-floor,websocket-passthrough,agent,agent-spdy,agent-websocket,nginx,haproxy,socat,bare,
 *             --only stdout,stdin,port-forward. The full run (no mode flag) runs it after
 *             the throughput table, with its own defaults (--no-cpu leaves it out).
 *     --tls   with --cpu: the TLS rows instead (issue 33 item 5): TLS from kubectl to the relay, plain
 *             TCP from it to the dev cluster; one test PKI per run (dev/dev-pki.ts), kubectl trusts its
 *             CA and sends a bearer token the dev cluster ignores (it takes anonymous requests; without
 *             credentials kubectl would prompt). Rows (--paths keys): passthrough-tls (SPDY),
 *             translation-tls and tunnel-tls (--upstream-streaming spdy), websocket-passthrough-tls,
 *             agent-tls and agent-websocket-tls (the proxy served with --tls-cert-file/--tls-private-key-file;
 *             the agent's tunnel is TLS too), nginx-tls (listen ssl), nginx-tls-16k (proxy_buffer_size 16k),
 *             haproxy-tls (bind ssl), bare-tls (tls.createServer + net.connect + pipe()), floor-tls
 *             (bench/tls-floor-relay.c: epoll + OpenSSL, one thread, compiled with cc into a temp folder
 *             at bench time; cc and libssl-dev are installed with apt-get when missing, as nginx is,
 *             unless --no-install). A TLS row's "× bare relay CPU" is against bare-tls. --paths may
 *             mix TLS and plain keys; --runs, --bytes, --only, --base as for --cpu
 *     --base DIR  with --cpu: the proxy's rows (passthrough, passthrough-js, translation, tunnel,
 *             websocket-passthrough, agent, agent-spdy, agent-websocket among --paths; the WebSocket
 *             passthrough ones only when that build has --upstream-streaming) once more from the built
 *             checkout DIR, keyed KEY@base and interleaved round by round with this tree's: the same-run
 *             before/after of a change
 *   --auth    run the authentication benchmark (bench/auth.ts: proxy CPU per request for a TokenReview cache
 *             hit, a cached JWT, uncached ES256 and RS256 JWTs, beside the unauthenticated passthrough; the
 *             added p99 of a JWT-authenticated exec against a TokenReview one; with --quick 300 requests,
 *             20 execs, 1 round) and print its tables; --runs rounds (default 3), --requests per row;
 *             not combinable with --write
 *     --auth-baseline DIR    also run the passthrough row with DIR/bin/kube-stream-proxy.js (another
 *             built checkout, e.g. main): the before/after of the unauthenticated path, same run
 *     --auth --callgrind     the CPU rows with each proxy under callgrind: instructions per request
 *             (2,000 warm-up requests per row, then --requests, default 1,000, per round; --runs, default 4)
 *   --flood   run the message-flood benchmark (bench/flood.ts, issue 26: --sessions N translated exec sessions,
 *             default 4, each flooding the dev cluster's echo with 8-byte WebSocket frames, then with 32 KiB
 *             messages, for --seconds S, default 30; with --quick 2 sessions, 3 s): the proxy's CPU per MB and
 *             per frame, RSS peak and growth, the latency of concurrent plain GETs, the echo checked byte for
 *             byte; --only tiny,bulk; print-only, not combinable with --write
 *     --seconds S            flood window in seconds
 *     --base DIR             also flood the proxy of another build (a copy of its bin/ and dist/), alternating with
 *                            this tree's: the same-run before/after
 *   --protocol-errors  run the protocol-error load (bench/protocol-errors.ts, issue 26: --sessions N running
 *             translated exec sessions, default 200, each then sending one frame announcing 2^63 bytes and never
 *             closing; the proxy's and the dev cluster's descriptors over time; with --quick 20 sessions); --base DIR
 *             measures another build's proxy first; print-only
 *   --recording  run only the session-recording cost rows (bench/recording-cpu.ts: a text `cat` of 300 MB,
 *             recorded and not, passthrough and translation, tty and not; relay CPU per GB and peak RSS;
 *             2 interleaved rounds; --quick 20 MB, 1 round; --runs, --bytes) and print their table. The
 *             full run (no mode flag) runs them last (--no-recording leaves them out).
 *   --callgrind  with --cpu: run the Node relays under valgrind's callgrind and add each one's
 *             instructions per MB (repeatable on a loaded machine; wall and CPU-s are then meaningless);
 *             the agent rows count the agent process too (its own column)
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { FULL, PATHS, QUICK, pathsByKey, runBenchmarks, type BenchPath, type Measurement } from './harness.js';
import { IDLE_PATHS, idleMarkdownTable, idleTextTable, runIdleBenchmarks, type IdleOptions } from './idle.js';
import { LATENCY_BARE, LATENCY_BATCHED, LATENCY_NGINX, LATENCY_PATHS, latencyTextTable, runLatencyBenchmarks } from './latency.js';
import { runSlowReaderBenchmarks, slowReaderTextTable } from './slow-reader.js';
import { AUTH_FULL, AUTH_QUICK, authTextTables, runAuthBenchmarks, runAuthCallgrind } from './auth.js';
import { FLOOD_MODES, floodTextTable, runFloodBenchmarks } from './flood.js';
import { protocolErrorTextTable, runProtocolErrorBenchmark } from './protocol-errors.js';
import { TUNNEL_LOAD_FULL, runTunnelLoad, tunnelLoadText } from './tunnel-load.js';
import { CPU_FULL, CPU_QUICK, CPU_RELAYS, CPU_TLS_RELAYS, baseRelays, cpuMarkdownSection, cpuTextTable, replaceCpuSection, runCpuBenchmarks, type CpuMeasurement } from './cpu.js';
import { loadavg } from 'node:os';
import { RECORDING_CPU_FULL, RECORDING_CPU_QUICK, recordingCpuTextTable, runRecordingCpu } from './recording-cpu.js';
import { machineInfo } from './machine.js';
import { markdownReport, textTable } from './report.js';

/** The repository root: the nearest folder up from here whose package.json is this project's. */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'kube-stream-proxy') return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error('bench: could not find the kube-stream-proxy package.json above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      write: { type: 'boolean', default: false },
      runs: { type: 'string' },
      bytes: { type: 'string' },
      requests: { type: 'string' },
      only: { type: 'string' },
      latency: { type: 'boolean', default: false },
      'slow-reader': { type: 'boolean', default: false },
      idle: { type: 'boolean', default: false },
      'tunnel-load': { type: 'boolean', default: false },
      flood: { type: 'boolean', default: false },
      'protocol-errors': { type: 'boolean', default: false },
      seconds: { type: 'string' },
      base: { type: 'string' },
      sessions: { type: 'string' },
      'idle-sessions': { type: 'string' },
      'idle-window': { type: 'string' },
      'idle-concurrency': { type: 'string' },
      paths: { type: 'string' },
      'no-install': { type: 'boolean', default: false },
      'cpu-prof': { type: 'string' },
      cpu: { type: 'boolean', default: false },
      tls: { type: 'boolean', default: false },
      'no-cpu': { type: 'boolean', default: false },
      recording: { type: 'boolean', default: false },
      'no-recording': { type: 'boolean', default: false },
      callgrind: { type: 'boolean', default: false },
      auth: { type: 'boolean', default: false },
      'auth-baseline': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    // The usage is this file's opening comment (tsc keeps comments in dist/).
    const text = readFileSync(fileURLToPath(import.meta.url), 'utf8');
    const comment = /\/\*\*([\s\S]*?)\*\//.exec(text)?.[1] ?? '';
    process.stdout.write(`${comment.split('\n').map((l) => l.replace(/^ \* ?/, '')).join('\n').trim()}\n`);
    return;
  }
  const pathKeys = values.paths?.split(',').map((k) => k.trim()).filter(Boolean);
  const install = !values['no-install'];
  if (values.idle) {
    if (values.write) throw new Error('--idle cannot be combined with --write: the idle table is printed only');
    const opts: Partial<IdleOptions> = {};
    if (values['idle-sessions']) opts.counts = values['idle-sessions'].split(',').map((n) => positiveInt('--idle-sessions', n));
    if (values['idle-window']) opts.windowMs = positiveInt('--idle-window', values['idle-window']) * 1000;
    if (values['idle-concurrency']) opts.concurrency = positiveInt('--idle-concurrency', values['idle-concurrency']);
    const machine = machineInfo();
    console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}\n`);
    const paths = pathKeys ? IDLE_PATHS.filter((p) => pathKeys.includes(p.key)) : undefined;
    if (paths && paths.length === 0) throw new Error(`--paths with --idle: want passthrough and/or translation, got ${values.paths}`);
    const rows = await runIdleBenchmarks({ quick: values.quick, opts, ...(paths ? { paths } : {}), log: (l) => console.log(l) });
    console.log('\n' + idleTextTable(rows) + '\n\n' + idleMarkdownTable(rows));
    return;
  }
  if (values.auth) {
    if (values.write) throw new Error('--auth cannot be combined with --write: its tables are printed only');
    const machine = machineInfo();
    console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}; load average ${loadavg().map((l) => l.toFixed(2)).join(', ')}\n`);
    const preset = values.quick ? AUTH_QUICK : AUTH_FULL;
    if (values.callgrind) {
      const rows = await runAuthCallgrind({
        requests: values.requests ? positiveInt('--requests', values.requests) : values.quick ? 100 : 1_000,
        rounds: values.runs ? positiveInt('--runs', values.runs) : 4,
        warmup: values.quick ? 200 : 2_000,
        ...(values['auth-baseline'] ? { baselineCli: resolve(values['auth-baseline'], 'bin', 'kube-stream-proxy.js') } : {}),
        log: (l) => console.log(l),
      });
      const hit = rows.find((r) => r.name.includes('TokenReview'))!.irPerRequest;
      console.log(`\n| GET pods/demo (keep-alive), proxy under callgrind | Ir/request (median) | vs TokenReview cache hit | per round |\n|---|---:|---:|---|`);
      for (const r of rows) console.log(`| ${r.name} | ${Math.round(r.irPerRequest)} | ${r.name.startsWith('impersonate') ? `${(((r.irPerRequest - hit) / hit) * 100).toFixed(1)} %` : ''} | ${r.perRound.map((v) => Math.round(v)).join(', ')} |`);
      return;
    }
    const result = await runAuthBenchmarks({
      ...preset,
      ...(values.runs ? { rounds: positiveInt('--runs', values.runs) } : {}),
      ...(values.requests ? { requests: positiveInt('--requests', values.requests) } : {}),
      ...(values['auth-baseline'] ? { baselineCli: resolve(values['auth-baseline'], 'bin', 'kube-stream-proxy.js') } : {}),
      log: (l) => console.log(l),
    });
    console.log(`\nload average at the end: ${loadavg().map((l) => l.toFixed(2)).join(', ')}\n`);
    console.log(authTextTables(result));
    return;
  }
  if (values['protocol-errors']) {
    if (values.write) throw new Error('--protocol-errors cannot be combined with --write: its table is printed only');
    const machine = machineInfo();
    console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}; load average ${loadavg().map((l) => l.toFixed(2)).join(', ')}\n`);
    const rows = await runProtocolErrorBenchmark({
      quick: values.quick,
      ...(values.base ? { base: resolve(values.base) } : {}),
      opts: values.sessions ? { sessions: positiveInt('--sessions', values.sessions) } : {},
      log: (l) => console.log(l),
    });
    console.log(`\nload average at the end: ${loadavg().map((l) => l.toFixed(2)).join(', ')}\n`);
    console.log(protocolErrorTextTable(rows));
    return;
  }
  if (values.flood) {
    if (values.write) throw new Error('--flood cannot be combined with --write: its table is printed only');
    const machine = machineInfo();
    const load = loadavg().map((l) => l.toFixed(2)).join(', ');
    console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}; load average ${load}\n`);
    const only = values.only?.split(',').map((m) => m.trim());
    const modes = only ? FLOOD_MODES.filter((m) => only.includes(m.key)) : FLOOD_MODES;
    if (modes.length === 0) throw new Error(`--flood --only: want tiny and/or bulk, got ${values.only}`);
    const rows = await runFloodBenchmarks({
      quick: values.quick,
      modes,
      ...(values.base ? { trees: [{ label: `base (${values.base})`, base: resolve(values.base) }, { label: 'this tree' }] } : {}),
      opts: {
        ...(values.sessions ? { sessions: positiveInt('--sessions', values.sessions) } : {}),
        ...(values.seconds ? { windowMs: positiveInt('--seconds', values.seconds) * 1000 } : {}),
      },
      log: (l) => console.log(l),
    });
    console.log(`\nload average at the end: ${loadavg().map((l) => l.toFixed(2)).join(', ')}\n`);
    console.log(floodTextTable(rows));
    if (rows.some((r) => !r.echoOk)) process.exitCode = 1;
    return;
  }
  if (values['tunnel-load']) {
    if (values.write) throw new Error('--tunnel-load cannot be combined with --write: its summary is printed only');
    const machine = machineInfo();
    const load = loadavg().map((l) => l.toFixed(2)).join(', ');
    console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}; load average ${load}\n`);
    const result = await runTunnelLoad({
      ...TUNNEL_LOAD_FULL,
      ...(values.sessions ? { sessions: positiveInt('--sessions', values.sessions) } : {}),
      ...(values.bytes ? { bytes: positiveInt('--bytes', values.bytes) } : {}),
      ...(values.runs ? { rounds: positiveInt('--runs', values.runs) } : {}),
      log: (l) => console.log(l),
    });
    console.log(`\nload average at the end: ${loadavg().map((l) => l.toFixed(2)).join(', ')}\n`);
    console.log(tunnelLoadText(result));
    if (result.failures.length > 0) process.exitCode = 1;
    return;
  }
  if (values['slow-reader']) {
    if (values.write) throw new Error('--slow-reader cannot be combined with --write: the slow-reader table is printed only');
    const machine = machineInfo();
    console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}\n`);
    const rows = await runSlowReaderBenchmarks({ quick: values.quick, log: (l) => console.log(l) });
    console.log('\n' + slowReaderTextTable(rows));
    return;
  }
  if (values.latency) {
    if (values.write) throw new Error('--latency cannot be combined with --write: the latency table is printed only');
    const machine = machineInfo();
    console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}\n`);
    const all = [...LATENCY_PATHS, LATENCY_NGINX, LATENCY_BARE, ...LATENCY_BATCHED];
    const paths = pathKeys ? all.filter((p) => pathKeys.includes(p.key)) : [...LATENCY_PATHS, LATENCY_NGINX];
    const unknown = pathKeys?.filter((k) => !all.some((p) => p.key === k)) ?? [];
    if (unknown.length > 0) throw new Error(`--paths with --latency: unknown ${unknown.join(', ')} (want ${all.map((p) => p.key).join(', ')})`);
    const rows = await runLatencyBenchmarks({
      quick: values.quick,
      paths,
      install,
      log: (l) => console.log(l),
      ...(values.runs ? { rounds: positiveInt('--runs', values.runs) } : {}),
    });
    console.log('\n' + latencyTextTable(rows));
    return;
  }
  if (values.tls && !values.cpu) throw new Error('--tls goes with --cpu (the TLS rows of the CPU-per-byte benchmark)');
  if (values.cpu) {
    await cpuBench(values, pathKeys, install, values.runs, values.bytes, values.only);
    return;
  }
  if (values.recording) {
    await recordingBench(values.quick, values.runs, values.bytes);
    return;
  }
  const preset = values.quick ? QUICK : FULL;
  const runs = values.runs ? Number(values.runs) : preset.runs;
  const bytes = values.bytes ? Number(values.bytes) : preset.bytes;
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer, got ${values.runs}`);
  if (!Number.isInteger(bytes) || bytes < 1) throw new Error(`--bytes must be a positive integer, got ${values.bytes}`);
  const machine = machineInfo();
  console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}`);
  console.log(`transfers of ${bytes / 1e6} MB, ${runs} run(s) per row\n`);
  const requests = values.requests ? Number(values.requests) : preset.requests;
  const measurements = values.only?.split(',') as Measurement[] | undefined;
  const paths: BenchPath[] = pathKeys ? pathsByKey(pathKeys) : PATHS;
  const cpuProfDir = values['cpu-prof'] ? resolve(values['cpu-prof']) : undefined;
  const rows = await runBenchmarks({ bytes, runs, requests, measurements, paths, install, log: (l) => console.log(l), cpuProfDir });
  if (cpuProfDir) console.log(`\nproxy CPU profiles in ${cpuProfDir}/<path>/ (node dist/bench/cpuprofile-top.js FILE)`);
  console.log('\n' + textTable(rows));
  if (values.write) {
    const commandLine = ['node', 'dist/bench/run.js', ...process.argv.slice(2)].join(' ');
    const out = resolve(repoRoot(), 'docs', 'benchmarks.md');
    const marker = '<!-- end of generated table -->';
    const old = existsSync(out) ? readFileSync(out, 'utf8') : '';
    const rest = old.includes(marker) ? old.slice(old.indexOf(marker)) : `${marker}\n`;
    writeFileSync(out, `# Benchmarks\n\n${markdownReport(rows, machine, commandLine, new Date())}\n${rest}`);
    console.log(`\nwrote ${out}`);
  }
  if (!values['no-cpu'] && !values.only && !values.paths) {
    console.log('\nCPU per byte relayed (bench/cpu.ts):\n');
    await cpuBench(values, undefined, install, undefined, undefined, undefined);
  }
  if (!values['no-recording'] && !values.only && !values.paths) {
    console.log('\nSession recording cost (bench/recording-cpu.ts):\n');
    await recordingBench(values.quick, undefined, undefined);
  }
}

/** The `--recording` rows (also the last part of the full run). */
async function recordingBench(quick: boolean | undefined, runsText: string | undefined, bytesText: string | undefined): Promise<void> {
  const preset = quick ? RECORDING_CPU_QUICK : RECORDING_CPU_FULL;
  const rounds = runsText ? positiveInt('--runs', runsText) : preset.rounds;
  const bytes = bytesText ? positiveInt('--bytes', bytesText) : preset.bytes;
  const machine = machineInfo();
  console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}; load average ${loadavg().map((l) => l.toFixed(2)).join(', ')}`);
  console.log(`recorded and unrecorded text cat of ${bytes / 1e6} MB, ${rounds} interleaved round(s)\n`);
  const rows = await runRecordingCpu({ bytes, rounds, log: (l) => console.log(l) });
  console.log('\n' + recordingCpuTextTable(rows));
  console.log(`\nload average at the end: ${loadavg().map((l) => l.toFixed(2)).join(', ')}`);
}

/** The `--cpu` benchmark (also the last part of the full run). */
async function cpuBench(
  values: { quick?: boolean; write?: boolean; callgrind?: boolean; 'cpu-prof'?: string; base?: string; tls?: boolean },
  pathKeys: string[] | undefined,
  install: boolean,
  runsText: string | undefined,
  bytesText: string | undefined,
  onlyText: string | undefined,
): Promise<void> {
  const preset = values.quick ? CPU_QUICK : CPU_FULL;
  const rounds = runsText ? positiveInt('--runs', runsText) : preset.rounds;
  const bytes = bytesText ? positiveInt('--bytes', bytesText) : preset.bytes;
  // --tls: the TLS rows by default; --paths picks among the plain and the TLS rows alike.
  const all = [...CPU_RELAYS, ...CPU_TLS_RELAYS];
  const unknown = (pathKeys ?? []).filter((k) => !all.some((r) => r.key === k));
  if (unknown.length > 0) throw new Error(`--cpu --paths: unknown relay(s) ${unknown.join(', ')}; known: ${all.map((r) => r.key).join(', ')}`);
  const chosen = pathKeys ? all.filter((r) => pathKeys.includes(r.key)) : values.tls ? CPU_TLS_RELAYS : CPU_RELAYS;
  // --base DIR: the proxy's rows once more from another build, interleaved with this tree's.
  const relays = values.base ? [...chosen, ...baseRelays(chosen, resolve(values.base))] : chosen;
  const measurements = onlyText?.split(',').map((m) => m.trim()) as CpuMeasurement[] | undefined;
  const machine = machineInfo();
  const load = loadavg().map((l) => l.toFixed(2)).join(', ');
  console.log(`machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.nodeVersion}; load average ${load}`);
  console.log(`transfers of ${bytes / 1e6} MB, ${rounds} interleaved round(s)${values.tls && !pathKeys ? ', TLS rows' : ''}${values.callgrind ? ', Node relays under callgrind' : ''}\n`);
  const cpuProfDir = values['cpu-prof'] ? resolve(values['cpu-prof']) : undefined;
  const rows = await runCpuBenchmarks({
    bytes,
    rounds,
    relays,
    ...(measurements ? { measurements } : {}),
    install,
    ...(cpuProfDir ? { cpuProfDir } : {}),
    callgrind: values.callgrind ?? false,
    log: (l) => console.log(l),
  });
  const endLoad = loadavg().map((l) => l.toFixed(2)).join(', ');
  console.log(`\nload average at the end: ${endLoad}\n`);
  console.log(cpuTextTable(rows));
  if (values.write) {
    const commandLine = ['node', 'dist/bench/run.js', ...process.argv.slice(2)].join(' ');
    const out = resolve(repoRoot(), 'docs', 'benchmarks.md');
    const page = existsSync(out) ? readFileSync(out, 'utf8') : '# Benchmarks\n';
    const section = cpuMarkdownSection(rows, {
      machine: `${machine.nproc} CPUs (nproc), ${machine.cpuModel}, Node ${machine.nodeVersion}, ${machine.platform}`,
      loadAverage: `${load} (1, 5, 15 min; at the end ${endLoad})`,
      commandLine,
      date: new Date(),
    });
    writeFileSync(out, replaceCpuSection(page, section));
    console.log(`\nwrote the CPU section of ${out}`);
  }
}

function positiveInt(flag: string, text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be a positive integer, got ${text}`);
  return n;
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.stack ?? err.message : err);
  process.exitCode = 1;
});
