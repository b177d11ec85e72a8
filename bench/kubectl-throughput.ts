/**
 * One timed kubectl transfer: N bytes of exec stdout (pod → kubectl) or exec stdin (kubectl → pod),
 * wall time from spawn to exit of the whole pipeline.
 */
import { spawn } from 'node:child_process';
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

/**
 * The shell pipeline for a transfer. Producer and consumer are `dd` and `wc -c`, so neither side of
 * the measurement is a Node process: `dd` writes 1 MB blocks (coreutils `head -c` writes 4 KiB ones,
 * which measures the pipe, not the path), and `wc -c` counts what arrived (on kubectl's side for
 * stdout, in the pod for stdin).
 */
export function transferPipeline(direction: Direction, bytes: number, pod = 'demo'): string {
  if (bytes % BLOCK !== 0) throw new Error(`bytes must be a multiple of ${BLOCK}, got ${bytes}`);
  const dd = `dd if=/dev/zero bs=${BLOCK} count=${bytes / BLOCK} status=none`;
  return direction === 'stdout'
    ? `"$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" exec ${pod} -- ${dd} | wc -c`
    : `${dd} | "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" exec -i ${pod} -- sh -c 'wc -c'`;
}

/** dd block size: 1 MB. */
const BLOCK = 1_000_000;

/** Run one transfer; rejects unless kubectl exits 0 having moved exactly `bytes`. */
export function measureTransfer(spec: TransferSpec): Promise<TransferResult> {
  const script = transferPipeline(spec.direction, spec.bytes, spec.pod);
  const env = { ...kubectlEnv(spec.kubeconfig, spec.env), KUBECTL: spec.bin, KUBECONFIG_FILE: spec.kubeconfig };
  const started = performance.now();
  // pipefail is not in POSIX sh: bash reports kubectl's failure instead of wc's success.
  const child = spawn('bash', ['-o', 'pipefail', '-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const what = `${spec.bin} ${spec.direction} ${spec.bytes} bytes`;
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
      if (timedOut) return reject(new Error(`${what}: timed out after ${spec.timeoutMs} ms\n${stderr}`));
      if (code !== 0) return reject(new Error(`${what}: exit code=${code} signal=${signal}\n${stderr}`));
      if (stdout.trim() !== String(spec.bytes))
        return reject(new Error(`${what}: ${spec.direction === 'stdout' ? 'kubectl printed' : 'the pod counted'} ${JSON.stringify(stdout.trim())} bytes, expected ${spec.bytes}`));
      resolve({ bytes: spec.bytes, wallMs });
    });
  });
}
