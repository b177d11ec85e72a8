/**
 * SIGTERM on a real `kube-stream-proxy demo` process (built CLI, dev cluster + proxy on loopback):
 * a running `kubectl exec -- sleep 3` finishes with exit 0 inside the grace period and the process
 * exits 0; with a short grace a longer session gets the "proxy shutting down" Status.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDemo as startDemoProcess, type DemoProcess } from '../helpers/demo.js';
import { findKubectl, kubectlE2eSkipReason, startKubectl } from '../helpers/kubectl.js';

const skipReason = kubectlE2eSkipReason();

function startDemo(work: string, grace: string): Promise<DemoProcess> {
  return startDemoProcess(work, ['--listen', '127.0.0.1:0', '--kubeconfig', join(work, 'kubeconfig'), '--shutdown-grace-period', grace]);
}

describe.skipIf(skipReason !== undefined)('SIGTERM on a kube-stream-proxy demo process', () => {
  let work: string | undefined;
  let demo: DemoProcess | undefined;
  afterEach(async () => {
    await demo?.stop();
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
