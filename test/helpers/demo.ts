/**
 * `kube-stream-proxy demo` (what `npm start` runs) as a child process of a test: the built CLI on the
 * runtime running the tests (`process.execPath`), output collected, ready once it has written its
 * kubeconfig. Always stop it ({@link DemoProcess.stop}).
 * Used by test/operability/sigterm-child.test.ts and test/e2e/readme-try.test.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';

/** The CLI entry point (`bin/kube-stream-proxy.js`; needs `dist/`, i.e. `npx tsc -p tsconfig.json`). */
export const CLI = resolve(import.meta.dirname, '../../bin/kube-stream-proxy.js');

/** A running demo. */
export interface DemoProcess {
  child: ChildProcess;
  /** Absolute path of the kubeconfig it wrote (pointing kubectl at the proxy). */
  kubeconfig: string;
  /** The proxy's URL, e.g. `http://127.0.0.1:40123`. */
  proxyUrl: URL;
  /** Everything it printed so far (stdout and stderr). */
  output: () => string;
  /** Its exit code (null when killed by a signal). */
  exit: Promise<number | null>;
  /** If it still runs: SIGTERM (its graceful shutdown, which also ends the pods' processes), SIGKILL after 15 s; waits for the exit. */
  stop: () => Promise<void>;
}

/**
 * Start `kube-stream-proxy demo ARGS` in `cwd` (its default kubeconfig lands in
 * `cwd/.kube-stream-proxy/kubeconfig`). Pass `--listen 127.0.0.1:0` for a free port.
 */
export async function startDemo(cwd: string, args: readonly string[]): Promise<DemoProcess> {
  const child = spawn(process.execPath, [CLI, 'demo', ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (c: Buffer): void => {
    out += c.toString('utf8');
    listeners.forEach((l) => l());
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  const ready = await new Promise<{ kubeconfig: string; proxyUrl: URL }>((resolveReady, reject) => {
    const check = (): void => {
      const kubeconfig = /^kubeconfig written to (.+)$/m.exec(out)?.[1];
      const proxy = /^kube-stream-proxy listening on (\S+),/m.exec(out)?.[1];
      if (kubeconfig && proxy) resolveReady({ kubeconfig, proxyUrl: new URL(proxy) });
    };
    listeners.add(check);
    void exit.then((code) => reject(new Error(`demo exited (${code}) before it was ready:\n${out}`)));
    check();
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exit;
      clearTimeout(timer);
    }
    await exit;
  };
  return { child, ...ready, output: () => out, exit, stop };
}
