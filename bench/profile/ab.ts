/**
 * Interleaved A/B rounds of the translated session's CPU per byte: the proxy of a baseline tree
 * (a copy of another build: its `bin/` and `dist/`) and this tree's proxy, with the bare Node relay
 * beside them, in front of one dev cluster, kubectl 1.33 as the client (bench/cpu.ts does the
 * measuring: utime+stime of each relay process from /proc around each transfer, one warm-up transfer
 * per row, rounds interleaved so a burst of load on the shared machine hits A and B alike).
 *
 *   node dist/bench/profile/ab.js --base DIR [--bytes N] [--runs N] [--only stdin,stdout] [--cpu-prof DIR]
 *     [--heavy]  (add the bare relay inside an idle proxy process) [--no-base]  (no baseline row)
 *
 * Prints each round and the medians; A/B is the median CPU ratio of this tree to the baseline.
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { CPU_RELAYS, cpuTextTable, runCpuBenchmarks, type CpuMeasurement, type CpuRelay } from '../cpu.js';
import { FORCE_SPDY_ENV } from '../../test/helpers/kubectl.js';
import { benchScriptPath, startNodeScript } from '../servers.js';

const GATES_ON = 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true';

/** The translation relay served by the proxy of another tree (`base`/bin/kube-stream-proxy.js). */
export function baselineTranslation(base: string): CpuRelay {
  const translation = CPU_RELAYS.find((r) => r.key === 'translation')!;
  return {
    ...translation,
    key: 'translation-base',
    name: `baseline translation (${base})`,
    start: (ctx) =>
      startNodeScript(
        join(base, 'bin', 'kube-stream-proxy.js'),
        ['serve', '--listen', '127.0.0.1:0', '--upstream', ctx.upstream, '--feature-gates', GATES_ON],
        /^kube-stream-proxy listening on /,
        30_000,
        ctx.node,
      ),
  };
}

/** The bare relay inside a process that also runs an idle proxy (bench/profile/heavy-bare-relay.ts). */
export const HEAVY_BARE_RELAY: CpuRelay = {
  key: 'heavy-bare',
  name: 'bare Node relay inside an idle proxy process (proxy heap)',
  env: { stdout: { ...FORCE_SPDY_ENV }, stdin: { ...FORCE_SPDY_ENV } },
  node: true,
  start: (ctx) => startNodeScript(benchScriptPath('profile/heavy-bare-relay'), [ctx.upstream], /^bare relay listening on /, 30_000, ctx.node),
};

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      bytes: { type: 'string', default: '200000000' },
      runs: { type: 'string', default: '5' },
      only: { type: 'string', default: 'stdin,stdout' },
      'cpu-prof': { type: 'string' },
      /** Add the bare relay inside an idle proxy process (the heap's share of the floor). */
      heavy: { type: 'boolean', default: false },
      /** Leave the baseline tree out (only this tree's translation and the relays). */
      'no-base': { type: 'boolean', default: false },
    },
  });
  if (!values.base && !values['no-base']) throw new Error('--base DIR (a tree with bin/ and dist/) is required, or --no-base');
  const relays = [
    ...(values.base && !values['no-base'] ? [baselineTranslation(resolve(values.base))] : []),
    CPU_RELAYS.find((r) => r.key === 'translation')!,
    CPU_RELAYS.find((r) => r.key === 'bare')!,
    ...(values.heavy ? [HEAVY_BARE_RELAY] : []),
  ];
  const rows = await runCpuBenchmarks({
    bytes: Number(values.bytes),
    rounds: Number(values.runs),
    relays,
    measurements: values.only.split(',') as CpuMeasurement[],
    ...(values['cpu-prof'] ? { cpuProfDir: values['cpu-prof'] } : {}),
    log: (line) => console.log(line),
  });
  console.log(cpuTextTable(rows));
  for (const m of new Set(rows.map((r) => r.measurement))) {
    const a = rows.find((r) => r.key === 'translation-base' && r.measurement === m)?.cpuPerGB;
    const b = rows.find((r) => r.key === 'translation' && r.measurement === m)?.cpuPerGB;
    if (a && b) console.log(`${m}: baseline ${a.toFixed(2)} → this tree ${b.toFixed(2)} CPU-s per GB (${(b / a).toFixed(2)}×)`);
  }
}

if (process.argv[1]?.endsWith('ab.js')) void main();
