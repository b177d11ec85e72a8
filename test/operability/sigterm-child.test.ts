/**
 * SIGTERM on a real `kube-stream-proxy demo` process (built CLI, dev cluster + proxy on loopback):
 * a running `kubectl exec -- sleep 3` finishes with exit 0 inside the grace period and the process
 * exits 0; with a short grace a longer session is ended when the grace period is over.
 *
 * The demo runs the proxy's default: kubectl's WebSocket v5 is passed through to the dev cluster
 * (1.36, which takes it itself), so a session that outlives the grace period is closed, as
 * kube-apiserver closes the streams it proxies when it stops — kubectl exits non-zero on its own,
 * without a Status. The translator's "proxy shutting down" Status on channel 3 is tested in process
 * (audit-shutdown.test.ts, `--upstream-streaming spdy`: the same `shutdown()` the signal calls).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDemo as startDemoProcess, type DemoProcess } from '../helpers/demo.js';
import { findKubectl, kubectlE2eSkipReason, startKubectl } from '../helpers/kubectl.js';
import { scrapeCounter } from '../helpers/metrics.js';

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

  it('a passed-through session outliving the grace period is closed; kubectl exits non-zero on its own', async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-sigterm-'));
    demo = await startDemo(work, '1s');
    const kubectl = startKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo started; sleep 60'], { kubeconfig: demo.kubeconfig, env: {} });
    try {
      await kubectl.waitForOutput(/started/, 30_000);
      // The session is kubectl's v5, passed through (proved by the counter, not by "it worked").
      expect(await scrapeCounter(demo.proxyUrl.href, 'apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(1);
      expect(await scrapeCounter(demo.proxyUrl.href, 'kube_stream_proxy_active_sessions', { subresource: 'exec', path: 'passthrough' })).toBe(1);
      demo.child.kill('SIGTERM');
      const exit = await kubectl.stop('SIGCONT', 20_000);
      expect(exit.killed).toBe(false);
      expect(exit.code, JSON.stringify(kubectl.output())).not.toBe(0);
      // No Status (the proxy does not write into a protocol it relays): client-go reports the lost stream.
      expect(kubectl.output().stderr).toContain('error reading from error stream');
      expect(kubectl.output().stderr).not.toContain('proxy shutting down');
      expect(await demo.exit, demo.output()).toBe(0);
      // Its audit line (JSON lines: the demo's output is no terminal) says how it ended.
      const audits = demo
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{') && l.includes('"audit":true'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(audits).toEqual([expect.objectContaining({ subresource: 'exec', clientProtocol: 'websocket', path: 'passthrough', outcome: 'shutdown', statusCode: 101 })]);
    } finally {
      await kubectl.stop('SIGKILL', 5_000);
    }
  });
});
