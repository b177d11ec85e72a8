/**
 * What makes a Node relay dear (issue 15; the finding behind src/heap-floor.ts): the ten-line `pipe()`
 * relay in process variants, and the proxy's translation with and without the heap floor, rounds
 * interleaved in front of one dev cluster, kubectl 1.33 as the client (SPDY through the relays,
 * WebSocket v5 through the proxy), CPU of each process split into its main thread and the rest (V8's
 * GC and compiler workers, libuv's pool).
 *
 *   node dist/bench/profile/floor.js [--bytes N] [--runs N] [--only stdout,stdin] [--variants a,b,…] [--perf DIR]
 *
 * Variants: `bare` (bench/bare-relay.ts); the relay of bench/profile/heavy-bare-relay.ts inside a
 * process that also runs an idle proxy (`serve`), that only imported the proxy's modules (`import`),
 * or that holds a 40 MiB live object graph instead (`ballast`); `import` with node's
 * `--max-semi-space-size=N` (`import-semiN`) or `--initial-old-space-size=N` (`import-oldN`), or
 * with the latter set at run time through `v8.setFlagsFromString` (`import-rt-old256`: too late);
 * the proxy itself with no heap floor (`translation-old0`) or a floor of N MiB (`translation-oldN`).
 * `--perf DIR` records each measured transfer with `perf record -g` (per-thread symbols:
 * `perf report --sort pid,dso,symbol`); `KSP_GC_STATS=PREFIX` makes the heavy relays count their GCs
 * by kind (perf_hooks) and prints the counts after each transfer.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { HEAP_FLOOR_ENV } from '../../src/heap-floor.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { FORCE_SPDY_ENV, findKubectl } from '../../test/helpers/kubectl.js';
import { CLIENT } from '../harness.js';
import { measureTransfer, type Direction } from '../kubectl-throughput.js';
import { sampleThreads, threadSecondsBetween } from '../proc-cpu.js';
import { benchScriptPath, startDevClusterProcess, startNodeScript, type ServerProcess } from '../servers.js';

/** bin/kube-stream-proxy.js, from dist/bench/profile/. */
const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bin', 'kube-stream-proxy.js');

interface Variant {
  key: string;
  script: string;
  /** The proxy itself (`serve`, translation gates on) rather than a relay: kubectl goes over WebSocket. */
  proxy?: boolean;
  env?: Record<string, string>;
  nodeArgs?: string[];
}

const VARIANTS: Variant[] = [
  { key: 'bare', script: benchScriptPath('bare-relay') },
  { key: 'serve', script: benchScriptPath('profile/heavy-bare-relay'), env: { KSP_HEAVY_MODE: 'serve' } },
  { key: 'import', script: benchScriptPath('profile/heavy-bare-relay'), env: { KSP_HEAVY_MODE: 'import' } },
  { key: 'ballast', script: benchScriptPath('profile/heavy-bare-relay'), env: { KSP_HEAVY_MODE: 'ballast' } },
  ...[1, 2, 4, 8, 32].map((mb) => ({ key: `import-semi${mb}`, script: benchScriptPath('profile/heavy-bare-relay'), env: { KSP_HEAVY_MODE: 'import' }, nodeArgs: [`--max-semi-space-size=${mb}`] })),
  ...[64, 128, 256].map((mb) => ({ key: `import-old${mb}`, script: benchScriptPath('profile/heavy-bare-relay'), env: { KSP_HEAVY_MODE: 'import' }, nodeArgs: [`--initial-old-space-size=${mb}`] })),
  { key: 'import-rt-old256', script: benchScriptPath('profile/heavy-bare-relay'), env: { KSP_HEAVY_MODE: 'import', KSP_V8_FLAGS: '--initial-old-space-size=256' } },
  // `KSP_HEAP_FLOOR_MB=0`: no floor and no re-execution by the CLI (src/heap-floor.ts).
  ...[0, 128, 256].map((mb) => ({ key: `translation-old${mb}`, script: CLI, proxy: true, ...(mb ? { nodeArgs: [`--initial-old-space-size=${mb}`] } : { env: { [HEAP_FLOOR_ENV]: '0' } }) })),
];

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      bytes: { type: 'string', default: '200000000' },
      runs: { type: 'string', default: '3' },
      only: { type: 'string', default: 'stdout,stdin' },
      variants: { type: 'string', default: VARIANTS.map((v) => v.key).join(',') },
      /** Record each measured transfer of every variant with `perf record -g` into DIR/<variant>-<direction>-<round>.data. */
      perf: { type: 'string' },
    },
  });
  const bytes = Number(values.bytes);
  const runs = Number(values.runs);
  const directions = values.only.split(',') as Direction[];
  const chosen = values.variants.split(',').map((k) => {
    const v = VARIANTS.find((x) => x.key === k);
    if (!v) throw new Error(`unknown variant ${k}; known: ${VARIANTS.map((x) => x.key).join(', ')}`);
    return v;
  });
  const work = mkdtempSync(join(tmpdir(), 'ksp-floor-'));
  const cluster = await startDevClusterProcess();
  const procs = new Map<string, ServerProcess>();
  const results = new Map<string, { main: number; other: number }[]>();
  try {
    for (const v of chosen) {
      const p = v.proxy
        ? await startNodeScript(v.script, ['serve', '--listen', '127.0.0.1:0', '--upstream', cluster.url, '--feature-gates', 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true'], /^kube-stream-proxy listening on /, 60_000, { env: v.env ?? {}, nodeArgs: v.nodeArgs ?? [] })
        : await startNodeScript(v.script, [cluster.url], /^bare relay listening on /, 60_000, { env: v.env ?? {}, nodeArgs: v.nodeArgs ?? [] });
      procs.set(v.key, p);
    }
    const bin = findKubectl(CLIENT.version);
    const transfer = async (v: Variant, direction: Direction, perfOut?: string): Promise<{ main: number; other: number; wallMs: number }> => {
      const p = procs.get(v.key)!;
      const perf = perfOut ? spawn('perf', ['record', '-F', '999', '-g', '-p', String(p.pid), '-o', perfOut], { stdio: 'ignore' }) : undefined;
      if (perf) await new Promise((res) => setTimeout(res, 300)); // perf attaches
      const kubeconfig = join(work, `kubeconfig-${v.key}`);
      writeKubeconfig(kubeconfig, { server: p.url, name: v.key });
      const t0 = sampleThreads(p.pid);
      const r = await measureTransfer({ bin, kubeconfig, env: v.proxy ? { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' } : { ...FORCE_SPDY_ENV }, direction, bytes, timeoutMs: 120_000 });
      await new Promise((res) => setTimeout(res, 200)); // let the relay's close callbacks run
      const t1 = threadSecondsBetween(t0, sampleThreads(p.pid));
      if (process.env.KSP_GC_STATS) {
        process.kill(p.pid, 'SIGUSR2');
        await new Promise((res) => setTimeout(res, 200));
        try {
          console.log(`  ${v.key}: ${readFileSync(`${process.env.KSP_GC_STATS}-${p.pid}.json`, 'utf8')}`);
        } catch {
          // not a heavy-bare-relay process
        }
      }
      if (perf) {
        const exited = new Promise((res) => perf.once('exit', res));
        perf.kill('SIGINT');
        await exited;
      }
      return { ...t1, wallMs: r.wallMs };
    };
    // One warm-up transfer per variant and direction.
    for (const d of directions) for (const v of chosen) await transfer(v, d);
    for (let round = 1; round <= runs; round++) {
      for (const d of directions) {
        for (const v of chosen) {
          const r = await transfer(v, d, values.perf ? join(values.perf, `${v.key}-${d}-${round}.data`) : undefined);
          const key = `${v.key} ${d}`;
          results.set(key, [...(results.get(key) ?? []), r]);
          const gb = bytes / 1e9;
          console.log(`round ${round} ${key}: main ${(r.main / gb).toFixed(2)} + other ${(r.other / gb).toFixed(2)} CPU-s/GB, ${r.wallMs.toFixed(0)} ms`);
        }
      }
    }
    console.log('\nmedian CPU-s per GB (main + other = total)');
    for (const [key, rs] of results) {
      const gb = bytes / 1e9;
      const m = median(rs.map((r) => r.main)) / gb;
      const o = median(rs.map((r) => r.other)) / gb;
      const t = median(rs.map((r) => r.main + r.other)) / gb;
      console.log(`${key.padEnd(28)} ${m.toFixed(2)} + ${o.toFixed(2)} = ${t.toFixed(2)}`);
    }
  } finally {
    for (const p of procs.values()) await p.close();
    await cluster.close();
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('floor.js')) void main();
