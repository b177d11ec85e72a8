/**
 * Instruction counts of the translated session, A/B: the proxy of a baseline tree and this tree's,
 * each under valgrind's callgrind, one long warm-up transfer (so V8 has compiled the hot paths: the
 * compiler's threads are counted too, and bench/cpu.ts's 1 MB warm-up leaves most of the tier-up
 * inside a 20 MB measurement), then the measured transfer between `callgrind_control --zero` and
 * `--dump`. Counts user-space instructions of every thread of the proxy, so they do not depend on
 * the machine's load (CPU seconds on this shared machine do, by ×2–3); the kernel's side (the
 * socket copies, the same for both trees) is not in them.
 *
 *   node dist/bench/profile/callgrind-ab.js --base DIR [--only stdin,stdout] [--warm N] [--bytes N]
 *     [--keep DIR]   (keep the dumps, for callgrind_annotate)
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { findKubectl } from '../../test/helpers/kubectl.js';
import { CLIENT } from '../harness.js';
import { measureTransfer, type Direction } from '../kubectl-throughput.js';
import { startDevClusterProcess, startNodeScript, withHeapFloor, type ServerProcess } from '../servers.js';

const GATES_ON = 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true';

/** Run a callgrind_control command against `proc`, waking its event loop with connections until done. */
async function control(proc: ServerProcess, command: '--zero' | '--dump'): Promise<void> {
  const child = spawn('callgrind_control', [command, String(proc.pid)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
  let done = false;
  void exited.then(() => (done = true));
  const { hostname, port } = new URL(proc.url);
  while (!done) {
    await new Promise<void>((r) => {
      const s = connect({ host: hostname, port: Number(port) }, () => s.end());
      s.on('error', () => r());
      s.on('close', () => r());
    });
    await Promise.race([exited, new Promise((r) => setTimeout(r, 200))]);
  }
  if ((await exited) !== 0 || !/OK/.test(output)) throw new Error(`callgrind_control ${command}: ${output}`);
}

/** Total Ir of the dumps `proc` wrote since `before`, deleting (or keeping) them. */
function collect(dir: string, before: Set<string>, pid: number, keep: string | undefined, tag: string): number {
  let total = 0;
  for (const f of readdirSync(dir).filter((f) => !before.has(f) && f.includes(`.${pid}`))) {
    const m = /^(?:summary|totals):\s*(\d+)/m.exec(readFileSync(join(dir, f), 'utf8'));
    if (m) total += Number(m[1]);
    if (keep) {
      mkdirSync(keep, { recursive: true });
      copyFileSync(join(dir, f), join(keep, `${tag}.${f}`));
    }
    rmSync(join(dir, f), { force: true });
  }
  return total;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      only: { type: 'string', default: 'stdin,stdout' },
      warm: { type: 'string', default: '30000000' },
      bytes: { type: 'string', default: '20000000' },
      keep: { type: 'string' },
    },
  });
  const trees: Array<[string, string]> = [];
  if (values.base) trees.push(['baseline', resolve(values.base)]);
  trees.push(['this tree', resolve(new URL('../../..', import.meta.url).pathname)]);
  const bin = findKubectl(CLIENT.version);
  const work = mkdtempSync(join(tmpdir(), 'ksp-cg-ab-'));
  const cluster = await startDevClusterProcess();
  try {
    for (const direction of values.only.split(',') as Direction[]) {
      for (const [label, tree] of trees) {
        const cg = join(work, 'cg');
        mkdirSync(cg, { recursive: true });
        const proc = await startNodeScript(
          join(tree, 'bin', 'kube-stream-proxy.js'),
          ['serve', '--listen', '127.0.0.1:0', '--upstream', cluster.url, '--feature-gates', GATES_ON],
          /^kube-stream-proxy listening on /,
          600_000,
          // With the heap floor, as `npm start` and the CLI run the proxy: without it a full GC falls
          // into the window or not, and decides the count (docs/benchmarks.md, "The heap floor").
          withHeapFloor('serve', { wrapper: ['valgrind', '--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${join(cg, 'cg.%p')}`] }),
        );
        try {
          const kubeconfig = join(work, 'kubeconfig');
          writeKubeconfig(kubeconfig, { server: proc.url, name: 'cg' });
          const env = { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' };
          await measureTransfer({ bin, kubeconfig, env, direction, bytes: Number(values.warm), timeoutMs: 1_800_000 });
          await control(proc, '--zero');
          const before = new Set(readdirSync(cg));
          const r = await measureTransfer({ bin, kubeconfig, env, direction, bytes: Number(values.bytes), timeoutMs: 1_800_000 });
          await control(proc, '--dump');
          const ir = collect(cg, before, proc.pid, values.keep, `${direction}.${label.replace(/\W+/g, '-')}`);
          console.log(`${direction} ${label}: ${(ir / (Number(values.bytes) / 1e6) / 1e6).toFixed(2)} M instructions per MB (${r.wallMs.toFixed(0)} ms)`);
        } finally {
          await proc.close();
        }
      }
    }
  } finally {
    await cluster.close();
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('callgrind-ab.js')) void main();
