/**
 * `npm run bench` entry point:
 *   node dist/bench/run.js [--quick] [--runs N] [--bytes N] [--requests N] [--only stdout,stdin,…] [--write]
 *   --quick   50 MB, 1 run (what the test uses)
 *   --write   also replace the measured table at the top of docs/benchmarks.md (machine, date, command line);
 *             the commentary below the marker line is kept
 *   --latency run the latency benchmarks (bench/latency.ts) instead of the throughput ones and print
 *             their table (with --quick: 200 round trips, 10 concurrent sessions, 50 handshakes);
 *             not combinable with --write (the page holds the throughput table only)
 *   --slow-reader run the slow-reader memory benchmark (bench/slow-reader.ts: 1 GiB of exec stdout, a 10 s
 *             stall; with --quick 64 MiB, 2 s) and print its table; not combinable with --write
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { FULL, QUICK, runBenchmarks, type Measurement } from './harness.js';
import { latencyTextTable, runLatencyBenchmarks } from './latency.js';
import { runSlowReaderBenchmarks, slowReaderTextTable } from './slow-reader.js';
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
    },
    strict: true,
  });
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
    const rows = await runLatencyBenchmarks({ quick: values.quick, log: (l) => console.log(l) });
    console.log('\n' + latencyTextTable(rows));
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
  const rows = await runBenchmarks({ bytes, runs, requests, measurements, log: (l) => console.log(l) });
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
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.stack ?? err.message : err);
  process.exitCode = 1;
});
