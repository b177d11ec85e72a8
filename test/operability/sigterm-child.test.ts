/**
 * SIGTERM on a real `kube-stream-proxy demo` process (built CLI, dev cluster + proxy on loopback):
 * a running `kubectl exec -- sleep 3` finishes with exit 0 inside the grace period and the process
 * exits 0; with a short grace a longer session gets the "proxy shutting down" Status.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { findKubectl, kubectlE2eSkipReason, startKubectl } from '../helpers/kubectl.js';

const skipReason = kubectlE2eSkipReason();
const BIN = resolve(import.meta.dirname, '../../bin/kube-stream-proxy.js');

interface Demo {
  child: ChildProcess;
  kubeconfig: string;
  output: () => string;
  exit: Promise<number | null>;
}

async function startDemo(work: string, grace: string): Promise<Demo> {
  const kubeconfig = join(work, 'kubeconfig');
  const child = spawn(process.execPath, [BIN, 'demo', '--listen', '127.0.0.1:0', '--kubeconfig', kubeconfig, '--shutdown-grace-period', grace], {
    cwd: work,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (c: Buffer): void => {
    out += c.toString('utf8');
    listeners.forEach((l) => l());
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  await new Promise<void>((resolveReady, reject) => {
    const check = (): void => {
      if (/kubeconfig written to/.test(out)) resolveReady();
    };
    listeners.add(check);
    void exit.then((code) => reject(new Error(`demo exited (${code}) before it was ready:\n${out}`)));
    check();
  });
  return { child, kubeconfig, output: () => out, exit };
}

describe.skipIf(skipReason !== undefined)('SIGTERM on a kube-stream-proxy demo process', () => {
  let work: string | undefined;
  let demo: Demo | undefined;
  afterEach(async () => {
    if (demo && demo.child.exitCode === null && demo.child.signalCode === null) {
      demo.child.kill('SIGKILL');
      await demo.exit;
    }
    demo = undefined;
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('a session shorter than the grace period finishes with exit 0, then the process exits 0', async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-sigterm-'));
    demo = await startDemo(work, '20s');
    const kubectl = startKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo started; sleep 3; echo done'], { kubeconfig: demo.kubeconfig, env: {} });
    try {
      await kubectl.waitForOutput(/started/, 30_000);
      demo.child.kill('SIGTERM');
      const exit = await kubectl.stop('SIGCONT', 20_000);
      expect(exit, JSON.stringify(kubectl.output())).toEqual({ code: 0, signal: null, killed: false });
      expect(kubectl.output().stdout).toBe('started\ndone\n');
      expect(await demo.exit, demo.output()).toBe(0);
      expect(demo.output()).toMatch(/SIGTERM, shutting down/);
    } finally {
      await kubectl.stop('SIGKILL', 5_000);
    }
  });

  it('a session outliving the grace period ends with the shutdown Status; kubectl exits non-zero', async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-sigterm-'));
    demo = await startDemo(work, '1s');
    const kubectl = startKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo started; sleep 60'], { kubeconfig: demo.kubeconfig, env: {} });
    try {
      await kubectl.waitForOutput(/started/, 30_000);
      demo.child.kill('SIGTERM');
      const exit = await kubectl.stop('SIGCONT', 20_000);
      expect(exit.killed).toBe(false);
      expect(exit.code, JSON.stringify(kubectl.output())).not.toBe(0);
      expect(kubectl.output().stderr).toContain('proxy shutting down');
      expect(await demo.exit, demo.output()).toBe(0);
    } finally {
      await kubectl.stop('SIGKILL', 5_000);
    }
  });
});
