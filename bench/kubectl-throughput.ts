/**
 * One timed kubectl transfer: N bytes of exec stdout (pod → kubectl) or exec stdin (kubectl → pod),
 * wall time from spawn to exit. kubectl's stdout goes into a counting sink, never to disk.
 */
import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { kubectlEnv } from '../test/helpers/kubectl.js';

/** Which way the bytes flow. */
export type Direction = 'stdout' | 'stdin';

/** How to run one kubectl against one target. */
export interface TransferSpec {
  /** kubectl binary. */
  bin: string;
  kubeconfig: string;
  /** Extra environment (e.g. the WebSocket toggles). */
  env: Record<string, string>;
  direction: Direction;
  bytes: number;
  /** Pod to exec in (default "demo"). */
  pod?: string;
  timeoutMs: number;
}

/** One measured transfer. */
export interface TransferResult {
  bytes: number;
  wallMs: number;
}

const ZEROS = Buffer.alloc(1 << 20);

/** `bytes` zero bytes as a stream (one shared 1 MiB buffer, so generating costs nothing). */
function zeroStream(bytes: number): Readable {
  let left = bytes;
  return new Readable({
    highWaterMark: ZEROS.length,
    read() {
      if (left <= 0) return void this.push(null);
      const n = Math.min(left, ZEROS.length);
      left -= n;
      this.push(n === ZEROS.length ? ZEROS : ZEROS.subarray(0, n));
      if (left <= 0) this.push(null);
    },
  });
}

/** The kubectl arguments for a transfer. */
export function transferArgs(direction: Direction, bytes: number, pod = 'demo'): string[] {
  return direction === 'stdout'
    ? ['exec', pod, '--', 'head', '-c', String(bytes), '/dev/zero']
    : // `wc -c` (not `cat > /dev/null`) so the pod side proves it received every byte; it is just as cheap.
      ['exec', '-i', pod, '--', 'sh', '-c', 'wc -c'];
}

/** Run one transfer; rejects unless kubectl exits 0 having moved exactly `bytes`. */
export function measureTransfer(spec: TransferSpec): Promise<TransferResult> {
  const args = ['--kubeconfig', spec.kubeconfig, ...transferArgs(spec.direction, spec.bytes, spec.pod)];
  const started = performance.now();
  const child = spawn(spec.bin, args, {
    env: kubectlEnv(spec.kubeconfig, spec.env),
    stdio: [spec.direction === 'stdin' ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    shell: false,
  });
  let received = 0;
  let stderr = '';
  let stdinReport = '';
  child.stdout!.on('data', (c: Buffer) => {
    received += c.length;
    if (spec.direction === 'stdin' && stdinReport.length < 100) stdinReport += c.toString();
  });
  child.stderr!.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
  });
  if (spec.direction === 'stdin') {
    child.stdin!.on('error', () => {});
    zeroStream(spec.bytes).pipe(child.stdin!);
  }
  const what = `${spec.bin} ${args.slice(2).join(' ')}`;
  return new Promise((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, spec.timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`could not start ${what}: ${err.message}`));
    });
    child.once('close', (code, signal) => {
      const wallMs = performance.now() - started;
      clearTimeout(timer);
      if (timedOut) return reject(new Error(`${what}: timed out after ${spec.timeoutMs} ms (stdout ${received} bytes)\n${stderr}`));
      if (code !== 0) return reject(new Error(`${what}: exit code=${code} signal=${signal}\n${stderr}`));
      if (spec.direction === 'stdout' && received !== spec.bytes)
        return reject(new Error(`${what}: got ${received} bytes of stdout, expected ${spec.bytes}`));
      if (spec.direction === 'stdin' && stdinReport.trim() !== String(spec.bytes))
        return reject(new Error(`${what}: the pod counted ${JSON.stringify(stdinReport.trim())} bytes of stdin, expected ${spec.bytes}`));
      resolve({ bytes: spec.bytes, wallMs });
    });
  });
}
