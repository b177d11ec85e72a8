/**
 * One timed kubectl transfer: N bytes of exec stdout (pod → kubectl) or exec stdin (kubectl → pod),
 * wall time from spawn to exit of kubectl. kubectl's stdout goes to a file in memory (its size checked), its
 * stdin comes from a file of zeros in memory.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

/** dd block size in the pod: 1 MB. */
const BLOCK = 1_000_000;

/**
 * The kubectl arguments for a transfer. In the pod, `dd bs=1000000` produces stdout in 1 MB writes
 * (coreutils `head -c` writes 4 KiB ones, which would measure the pod's pipe, not the path) and
 * `wc -c` counts stdin, so the pod proves it received every byte.
 */
export function transferArgs(direction: Direction, bytes: number, pod = 'demo'): string[] {
  if (bytes % BLOCK !== 0) throw new Error(`bytes must be a multiple of ${BLOCK}, got ${bytes}`);
  return direction === 'stdout'
    ? ['exec', pod, '--', 'dd', 'if=/dev/zero', `bs=${BLOCK}`, `count=${bytes / BLOCK}`, 'status=none']
    : ['exec', '-i', pod, '--', 'sh', '-c', 'wc -c'];
}

/**
 * A folder in memory (tmpfs) for kubectl's stdout file and the stdin source file: a file sink costs
 * kubectl a memcpy per write, where a pipe to a counting process would cost a context switch per
 * 64 KiB and put that process's CPU into the measurement.
 */
function memoryDir(): string {
  return existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
}

/** A file of `bytes` zero bytes (created once per size, reused by every stdin run). */
function zeroFile(bytes: number): string {
  const path = join(memoryDir(), `ksp-bench-zeros-${bytes}`);
  if (existsSync(path) && statSync(path).size === bytes) return path;
  const fd = openSync(path, 'w');
  try {
    const block = Buffer.alloc(BLOCK);
    for (let left = bytes; left > 0; left -= BLOCK) writeSync(fd, block, 0, Math.min(BLOCK, left));
  } finally {
    closeSync(fd);
  }
  return path;
}

/** Run one transfer; rejects unless kubectl exits 0 having moved exactly `bytes`. */
export function measureTransfer(spec: TransferSpec): Promise<TransferResult> {
  const args = ['--kubeconfig', spec.kubeconfig, ...transferArgs(spec.direction, spec.bytes, spec.pod)];
  const outPath = join(memoryDir(), `ksp-bench-out-${process.pid}-${Date.now()}`);
  const stdinFd = spec.direction === 'stdin' ? openSync(zeroFile(spec.bytes), 'r') : 'ignore';
  const stdoutFd = spec.direction === 'stdout' ? openSync(outPath, 'w') : 'pipe';
  const started = performance.now();
  const child = spawn(spec.bin, args, { env: kubectlEnv(spec.kubeconfig, spec.env), stdio: [stdinFd, stdoutFd, 'pipe'] });
  if (typeof stdinFd === 'number') closeSync(stdinFd);
  if (typeof stdoutFd === 'number') closeSync(stdoutFd);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const what = `${spec.bin} ${args.slice(2).join(' ')}`;
  return new Promise((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, spec.timeoutMs);
    const done = (err?: Error): void => {
      clearTimeout(timer);
      const got = existsSync(outPath) ? statSync(outPath).size : 0;
      rmSync(outPath, { force: true });
      if (err) return reject(err);
      if (spec.direction === 'stdout' && got !== spec.bytes)
        return reject(new Error(`${what}: got ${got} bytes of stdout, expected ${spec.bytes}`));
      if (spec.direction === 'stdin' && stdout.trim() !== String(spec.bytes))
        return reject(new Error(`${what}: the pod counted ${JSON.stringify(stdout.trim())} bytes of stdin, expected ${spec.bytes}`));
      resolve({ bytes: spec.bytes, wallMs });
    };
    let wallMs = 0;
    child.once('error', (err) => done(new Error(`could not start ${what}: ${err.message}`)));
    child.once('close', (code, signal) => {
      wallMs = performance.now() - started;
      if (timedOut) return done(new Error(`${what}: timed out after ${spec.timeoutMs} ms\n${stderr}`));
      if (code !== 0) return done(new Error(`${what}: exit code=${code} signal=${signal}\n${stderr}`));
      done();
    });
  });
}
