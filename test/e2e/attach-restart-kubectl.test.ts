/**
 * Issue 16, part 4: `kubectl attach -i demo` arriving while the pod's main process is being
 * restarted (its previous attacher typed `exit 0`) used to hang every third run: the attacher was
 * parked on a process that was gone and its stdin went nowhere. Real kubectl, back to back, no
 * pause between runs, against the dev cluster directly: each run prints its output (or fails with a
 * clear error) within 5 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';

const RUNS = 20;
const PER_RUN_TIMEOUT_MS = 5_000;

const CLIENTS: { name: string; version: KubectlVersion; env: Record<string, string> }[] = [
  { name: 'kubectl 1.33 (WebSocket first)', version: '1.33', env: {} },
  { name: 'kubectl 1.28 (SPDY)', version: '1.28', env: {} },
];

describe.skipIf(kubectlE2eSkipReason() !== undefined)('attach -i … exit 0, back to back, across main-process restarts', () => {
  let work: string;
  let cluster: DevCluster;
  let kubeconfig: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-attach-restart-'));
    cluster = await startDevCluster({ dataDir: join(work, 'pods') });
    kubeconfig = join(work, 'kubeconfig');
    writeKubeconfig(kubeconfig, { server: cluster.url, name: 'attach-restart' });
  });
  afterAll(async () => {
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it.each(CLIENTS)(`$name: ${RUNS} sessions, none hangs`, async ({ version, env }) => {
    const bin = findKubectl(version);
    const main = cluster.pods.get('default', 'demo')!.mains.get('demo')!;
    const restartsBefore = main.restartCount;
    for (let i = 0; i < RUNS; i++) {
      const marker = `attached-ok-${i}`;
      // A KubectlTimeoutError (the hang) rejects and fails the test with what kubectl printed.
      const r = await runKubectl(bin, ['attach', '-i', 'demo'], {
        kubeconfig,
        env,
        stdin: Buffer.from(`echo ${marker}\nexit 0\n`),
        timeoutMs: PER_RUN_TIMEOUT_MS,
      });
      if (r.code === 0) expect(r.stdout.toString(), summary(r)).toContain(marker);
      else expect(r.stderr, `run ${i} failed without a clear error\n${summary(r)}`).toMatch(/error/i);
    }
    // Every session ended its main process, so each one ran in a restarted process.
    expect(main.restartCount).toBeGreaterThanOrEqual(restartsBefore + RUNS - 1);
  }, 3 * RUNS * PER_RUN_TIMEOUT_MS);
});
