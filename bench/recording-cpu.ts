/**
 * The cost of session recording (`npm run bench -- --recording`, and the last part of the full run):
 * kubectl 1.33 `exec` of a text `cat` (N bytes of `yes` lines in 1 MB writes) through the proxy,
 * recorded and not, on the SPDY passthrough and the WebSocket v5 translation, without a tty and with
 * one (kubectl under `script`, a real pty). The relay's CPU (utime+stime of its process, /proc) per GB
 * the client received, and its peak RSS above the RSS before the transfer. Rounds are interleaved.
 *
 * Rows per path: unrecorded (the passthrough also with its JavaScript copy loop, the loop a recorded
 * session uses: the splice(2) fast path is off for recorded sessions), recorded (directory sink on
 * /dev/shm, `--session-recording-max-bytes 0`, the native output encoder where it is built), and
 * recorded with the JavaScript encoding (`KSP_NATIVE_CAST=0`). Target (issue 23): recording output
 * costs at most 1.5× the unrecorded translated session's CPU.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeKubeconfig } from '../dev/kubeconfig.js';
import { FORCE_SPDY_ENV, findKubectl, kubectlEnv } from '../test/helpers/kubectl.js';
import { NATIVE_SPLICE_ENV } from '../proxy/splice-native.js';
import { NATIVE_CAST_ENV } from '../src/recording/native-cast-escape.js';
import { median } from './cpu.js';
import { sampleTreeCpu, settleTree } from './proc-cpu.js';
import { startDevClusterProcess, startProxyProcess, translateAtProxy, type ServerProcess } from './servers.js';

const GATES_ON = 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true';
const BLOCK = 1_000_000;
/** A line of text as `cat` of a source file would show (63 characters and LF). */
const LINE = 'the quick brown fox jumps over the lazy dog 0123456789 ABCDEFGH';

/** One proxy configuration. */
interface Variant {
  key: string;
  name: string;
  recorded: boolean;
  env?: Record<string, string>;
  /** Paths it is measured on. */
  paths: Array<'passthrough' | 'translation'>;
}

const VARIANTS: Variant[] = [
  { key: 'plain', name: 'unrecorded', recorded: false, paths: ['passthrough', 'translation'] },
  { key: 'plain-js', name: 'unrecorded, JS copy loop (KSP_NATIVE_SPLICE=0)', recorded: false, env: { [NATIVE_SPLICE_ENV]: '0' }, paths: ['passthrough'] },
  { key: 'recorded', name: 'recorded', recorded: true, paths: ['passthrough', 'translation'] },
  { key: 'recorded-js', name: 'recorded, JavaScript encoding (KSP_NATIVE_CAST=0)', recorded: true, env: { [NATIVE_CAST_ENV]: '0' }, paths: ['passthrough', 'translation'] },
];

/** One row. */
export interface RecordingCpuRow {
  path: 'passthrough' | 'translation';
  tty: boolean;
  variant: string;
  recorded: boolean;
  /** Bytes the client received (tty: the pty's CR LF included), per round. */
  bytes: number[];
  cpuSeconds: number[];
  /** Peak RSS above the RSS before the transfer, MB, per round. */
  rssMB: number[];
  wallMs: number[];
  cpuPerGB?: number;
  /** cpuPerGB ÷ the unrecorded translated row's (same tty), same run. */
  ratioToTranslated?: number;
}

/** Options of {@link runRecordingCpu}. */
export interface RecordingCpuOptions {
  bytes: number;
  rounds: number;
  log?: (line: string) => void;
}

export const RECORDING_CPU_FULL: Pick<RecordingCpuOptions, 'bytes' | 'rounds'> = { bytes: 300_000_000, rounds: 2 };
export const RECORDING_CPU_QUICK: Pick<RecordingCpuOptions, 'bytes' | 'rounds'> = { bytes: 20_000_000, rounds: 1 };

function rssKB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Wait (up to 60 s) until `dir` holds `count` index entries (those recordings finished), then delete every file in it. */
async function removeFinished(dir: string, count = 1): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (readdirSync(dir).filter((f) => f.endsWith('.json')).length < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  for (const f of readdirSync(dir)) rmSync(join(dir, f), { force: true });
}

/** One kubectl exec of the text cat; resolves with the bytes received and the wall time. */
function transfer(bin: string, kubeconfig: string, env: Record<string, string>, tty: boolean, bytes: number, out: string, timeoutMs: number): Promise<{ bytes: number; wallMs: number }> {
  const cmd = `yes '${LINE}' | dd bs=${BLOCK} count=${bytes / BLOCK} iflag=fullblock status=none`;
  const args = ['--kubeconfig', kubeconfig, 'exec', ...(tty ? ['-t'] : []), 'demo', '--', 'sh', '-c', cmd];
  const quoted = [bin, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const [file, argv] = tty ? ['script', ['-qefc', quoted, '/dev/null']] : [bin, args];
  const started = performance.now();
  const child = spawn(file, argv as string[], { env: kubectlEnv(kubeconfig, env), stdio: ['ignore', 'pipe', 'pipe'] });
  let got = 0;
  child.stdout!.on('data', (c: Buffer) => (got += c.length));
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      const wallMs = performance.now() - started;
      if (code !== 0) return reject(new Error(`${quoted}: exit ${code}\n${stderr}`));
      if (got < bytes) return reject(new Error(`${quoted}: ${got} bytes, expected ${bytes} or more`));
      void out;
      resolve({ bytes: got, wallMs });
    });
  });
}

/** Run the recording rows. */
export async function runRecordingCpu(o: RecordingCpuOptions): Promise<RecordingCpuRow[]> {
  const log = o.log ?? (() => {});
  if (o.bytes % BLOCK !== 0) throw new Error(`bytes must be a multiple of ${BLOCK}`);
  const bin = findKubectl('1.33');
  const work = mkdtempSync(join(tmpdir(), 'ksp-bench-rec-'));
  const shm = existsSync('/dev/shm') ? mkdtempSync('/dev/shm/ksp-bench-rec-') : join(work, 'recordings');
  const policy = join(work, 'policy.yaml');
  writeFileSync(policy, 'apiVersion: kube-stream-proxy.io/v1alpha1\nkind: SessionRecordingConfiguration\nrules:\n- name: all\n  record: output\n');
  const cluster = await startDevClusterProcess();
  const procs = new Map<string, { proc: ServerProcess; kubeconfig: string }>();
  const rows: RecordingCpuRow[] = [];
  const timeoutMs = Math.max(120_000, (o.bytes / 1_000_000) * 1000);
  try {
    for (const v of VARIANTS) {
      const dir = join(shm, v.key);
      mkdirSync(dir, { recursive: true });
      // `--upstream-streaming spdy`: the translation rows measure the proxy's translator (the 1.36
      // dev cluster would take v5 itself); the SPDY passthrough rows are unchanged by it.
      const args = ['--feature-gates', GATES_ON, ...translateAtProxy(), ...(v.recorded ? ['--session-recording-config', policy, '--session-recording-dir', dir, '--session-recording-max-bytes', '0'] : [])];
      const proc = await startProxyProcess(cluster.url, args, v.env ? { env: v.env } : {});
      const kubeconfig = join(work, `kubeconfig-${v.key}`);
      writeKubeconfig(kubeconfig, { server: proc.url, name: v.key });
      procs.set(v.key, { proc, kubeconfig });
      for (const path of v.paths) for (const tty of [false, true]) rows.push({ path, tty, variant: v.name, recorded: v.recorded, bytes: [], cpuSeconds: [], rssMB: [], wallMs: [] });
    }
    const variantOf = (r: RecordingCpuRow): Variant => VARIANTS.find((v) => v.name === r.variant)!;
    const envOf = (r: RecordingCpuRow): Record<string, string> => (r.path === 'passthrough' ? { ...FORCE_SPDY_ENV } : { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' });
    // One unmeasured warm-up per row (JIT).
    for (const r of rows) {
      const { kubeconfig } = procs.get(variantOf(r).key)!;
      await transfer(bin, kubeconfig, envOf(r), r.tty, BLOCK * 5, join(work, 'out'), timeoutMs);
    }
    for (const v of VARIANTS.filter((x) => x.recorded)) await removeFinished(join(shm, v.key), rows.filter((r) => variantOf(r) === v).length);
    for (let round = 1; round <= o.rounds; round++) {
      for (const r of rows) {
        const v = variantOf(r);
        const { proc, kubeconfig } = procs.get(v.key)!;
        const rss0 = rssKB(proc.pid);
        let peak = rss0;
        const sampler = setInterval(() => (peak = Math.max(peak, rssKB(proc.pid))), 50);
        const before = sampleTreeCpu(proc.pid);
        const t = await transfer(bin, kubeconfig, envOf(r), r.tty, o.bytes, join(work, 'out'), timeoutMs);
        const cpu = (await settleTree(proc.pid, before)).seconds - before.seconds;
        clearInterval(sampler);
        peak = Math.max(peak, rssKB(proc.pid));
        r.bytes.push(t.bytes);
        r.cpuSeconds.push(cpu);
        r.rssMB.push((peak - rss0) / 1024);
        r.wallMs.push(t.wallMs);
        log(`round ${round}/${o.rounds} ${r.path} ${r.tty ? 'tty' : 'no tty'} ${r.variant}: ${(cpu / (t.bytes / 1e9)).toFixed(2)} CPU-s/GB, +${((peak - rss0) / 1024).toFixed(1)} MB RSS`);
        // The recording is not kept (the directory is in memory): once its index entry is written
        // (the recording has finished), its files go.
        if (v.recorded) await removeFinished(join(shm, v.key));
      }
    }
  } finally {
    for (const { proc } of procs.values()) await proc.close();
    await cluster.close();
    rmSync(work, { recursive: true, force: true });
    rmSync(shm, { recursive: true, force: true });
  }
  for (const r of rows) r.cpuPerGB = median(r.cpuSeconds.map((c, i) => c / (r.bytes[i]! / 1e9)));
  for (const r of rows) {
    const base = rows.find((b) => b.path === 'translation' && b.tty === r.tty && !b.recorded);
    if (base?.cpuPerGB && r.cpuPerGB !== undefined) r.ratioToTranslated = r.cpuPerGB / base.cpuPerGB;
  }
  return rows;
}

const HEAD = ['path', 'tty', 'session', 'MB received', 'CPU-s per GB', '× unrecorded translated', 'peak RSS above start, MB', 'relay CPU-s (each round)'];

function cells(r: RecordingCpuRow): string[] {
  return [
    r.path === 'passthrough' ? 'passthrough (SPDY)' : 'translation (WS v5 → SPDY)',
    r.tty ? 'yes' : 'no',
    r.variant,
    (median(r.bytes) / 1e6).toFixed(0),
    r.cpuPerGB === undefined ? '' : r.cpuPerGB.toFixed(2),
    r.ratioToTranslated === undefined ? '' : r.ratioToTranslated.toFixed(2),
    median(r.rssMB).toFixed(1),
    r.cpuSeconds.map((c) => c.toFixed(2)).join(', '),
  ];
}

/** Fixed-width text table. */
export function recordingCpuTextTable(rows: RecordingCpuRow[]): string {
  const all = [HEAD, ...rows.map(cells)];
  const widths = HEAD.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  return all.map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

/** Markdown table. */
export function recordingCpuMarkdown(rows: RecordingCpuRow[]): string {
  return [`| ${HEAD.join(' | ')} |`, `|${HEAD.map((_, i) => (i >= 3 && i <= 6 ? '---:' : '---')).join('|')}|`, ...rows.map((r) => `| ${cells(r).join(' | ')} |`)].join('\n');
}
