/**
 * Issue 32, item 6: WebSocket `v5.channel.k8s.io` passed through (the gate
 * `TranslateStreamCloseWebsocketRequests=false`, in front of the dev cluster's 1.36 kubelet, which
 * serves v5 itself) is recorded by the WebSocket tap: channel-prefixed binary frames, stdin's CLOSE
 * `[255, 0]`, the Status on channel 3. With kubectl 1.33 as the client:
 *
 * - `record: full`: stdin as `i` (the CLOSE message is no input), stdout, stderr (red), the exit
 *   status from channel 3; the session passed through (the translator counted nothing, the kubelet
 *   counted a v5 request) and kubectl's output and exit code are the command's;
 * - `enforce`: the recorder is killed mid-session; the tap ends the v5 session with the Status on
 *   channel 3 and close 1000, so kubectl exits within a second with "session recording unavailable".
 *
 * And the port-forward tunnel (`SPDY/3.1+portforward.k8s.io`) passed through (`PortForwardWebsockets=false`,
 * the kubelet tunnels itself): its metadata record names the forwarded port, read from the SPDY
 * stream headers inside the client's WebSocket frames (kubectl's tunnel request has no `ports` query).
 *
 * Needs `npm run build` (the recorder runs bin/kube-stream-proxy.js).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../../dev/kubeconfig.js';
import { STDERR_END, STDERR_START } from '../../../src/recording/asciicast.js';
import { downloadDigest, startBytesServer } from '../../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary } from '../../helpers/kubectl.js';
import { counterValue } from '../../helpers/metrics.js';
import { waitFor } from '../../helpers/wait.js';
import { outputOf, policyYaml, startRecorderProcess, startRecordingProxy, storedRecording, writeText, type RecordingProxy } from '../../recording/recording-proxy-fixture.js';

/** The proxy's and the dev cluster's metric text. */
async function metricsOf(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

const skip = kubectlE2eSkipReason();

describe.skipIf(skip !== undefined)('WebSocket v5 passed through is recorded by the WebSocket tap', () => {
  let work: string;
  let cluster: DevCluster;
  const gateOff = 'TranslateStreamCloseWebsocketRequests=false';

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-v5-'));
    cluster = await startDevCluster({ dataDir: join(work, 'pods') });
  });
  afterAll(async () => {
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('record full: stdin (not its CLOSE), stdout, stderr and the exit status from channel 3', async () => {
    const dir = join(work, 'casts');
    const rp: RecordingProxy = await startRecordingProxy({
      upstream: cluster.url,
      featureGates: gateOff,
      sessionRecordingConfig: writeText(join(work, 'full.yaml'), policyYaml({ record: 'full' })),
      sessionRecordingDir: dir,
    });
    try {
      const kubeconfig = join(work, 'kubeconfig-full');
      writeKubeconfig(kubeconfig, { server: rp.url, name: 'v5' });
      const proxied = async (): Promise<number> => counterValue(await metricsOf(cluster.url), 'apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'proxied_to_kubelet' });
      const proxiedBefore = await proxied();
      // kubectl sends stdin, then CLOSE [255, 0] at its EOF; cat then ends.
      const r = await runKubectl(findKubectl('1.33'), ['exec', '-i', 'demo', '--', 'sh', '-c', 'cat; echo to-stderr >&2; exit 3'], { kubeconfig, stdin: Buffer.from('typed over v5\n'), timeoutMs: 30_000 });
      expect(r.code, summary(r)).toBe(3);
      expect(r.stdout.toString()).toBe('typed over v5\n');
      expect(r.stderr).toContain('to-stderr');
      // Passed through: the dev cluster got the v5 WebSocket and passed it to its kubelet; the proxy translated nothing.
      expect(await proxied()).toBe(proxiedBefore + 1);
      expect(counterValue(await metricsOf(rp.url), 'apiserver_stream_translator_requests_total', {})).toBe(0);
      const audit = await rp.audit(1);
      const rec = await storedRecording(dir, audit.recordingId);
      expect(rec.summary.result).toBe('complete');
      expect(rec.summary.exitCode).toBe(3);
      expect(rec.events.filter((e) => e[1] === 'i').map((e) => e[2]).join('')).toBe('typed over v5\n');
      expect(outputOf(rec.events)).toBe(`typed over v5\r\n${STDERR_START}to-stderr\r\n${STDERR_END}`);
      expect(rec.events.filter((e) => e[1] === 'm').map((e) => e[2])).toEqual(['exit 3']);
    } finally {
      await rp.close();
    }
  }, 60_000);

  it('enforce: the recorder dies mid-session; the session ends with the Status on channel 3 within a second', async () => {
    writeText(join(work, 'ingest.csv'), 'token-s,replica-strict,\n');
    writeText(join(work, 's.token'), 'token-s\n');
    writeText(join(work, 'viewers.csv'), 'viewer-token,carol,,"auditors"\n');
    const recorder = await startRecorderProcess(join(work, 'recorder'), work);
    const rp = await startRecordingProxy({
      upstream: cluster.url,
      featureGates: gateOff,
      sessionRecordingConfig: writeText(join(work, 'strict.yaml'), policyYaml({ enforce: true })),
      sessionRecorderUrl: recorder.url,
      sessionRecorderTokenFile: join(work, 's.token'),
    });
    const kubeconfig = join(work, 'kubeconfig-strict');
    writeKubeconfig(kubeconfig, { server: rp.url, name: 'strict' });
    const k = startKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'while true; do echo tick; sleep 0.05; done'], { kubeconfig, cwd: work });
    const closed = new Promise<{ code: number | null; at: number }>((r) => k.child.once('close', (code) => r({ code, at: Date.now() })));
    try {
      await k.waitForOutput(/tick/, 30_000);
      const killedAt = Date.now();
      await recorder.kill('SIGKILL');
      const exit = await closed;
      expect(exit.code, k.output().stderr).toBe(1);
      expect(k.output().stderr).toContain('session recording unavailable');
      expect(exit.at - killedAt).toBeLessThan(1000);
      await waitFor('the recording ended as terminated', async () =>
        counterValue(await metricsOf(rp.url), 'kube_stream_proxy_session_recordings_total', { result: 'terminated' }) > 0 ? true : undefined,
      );
      expect(counterValue(await metricsOf(rp.url), 'apiserver_stream_translator_requests_total', {})).toBe(0);
    } finally {
      await k.stop('SIGKILL', 1000);
      await recorder.kill('SIGKILL');
      await rp.close();
    }
  }, 60_000);

  it('the port-forward tunnel passed through: a metadata record with the forwarded port and the bytes', async () => {
    const dir = join(work, 'pf-casts');
    const rp = await startRecordingProxy({
      upstream: cluster.url,
      featureGates: 'PortForwardWebsockets=false',
      sessionRecordingConfig: writeText(join(work, 'pf.yaml'), policyYaml({ match: '{subresources: [portforward]}' })),
      sessionRecordingDir: dir,
    });
    const fixture = await startBytesServer();
    try {
      const kubeconfig = join(work, 'kubeconfig-pf');
      writeKubeconfig(kubeconfig, { server: rp.url, name: 'pf' });
      const proxied = async (): Promise<number> => counterValue(await metricsOf(cluster.url), 'apiserver_websocket_streaming_requests_total', { subresource: 'portforward', proxy_type: 'proxied_to_kubelet' });
      const before = await proxied();
      const k = startKubectl(findKubectl('1.33'), ['port-forward', 'pod/demo', `:${fixture.port}`], { kubeconfig, cwd: work });
      try {
        const m = await k.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${fixture.port}`), 30_000);
        const got = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/100000?seed=3`);
        expect(got.byteLength).toBe(100_000);
      } finally {
        await k.stop();
      }
      // The tunnel reached the kubelet as a WebSocket: passed through, not unwrapped by the proxy.
      expect(await proxied()).toBe(before + 1);
      const audit = await rp.audit(1);
      expect(audit).toMatchObject({ subresource: 'portforward', recordingId: expect.any(String) });
      const rec = await storedRecording(dir, audit.recordingId);
      expect(rec.summary).toMatchObject({ subresource: 'portforward', pod: 'demo', ports: [String(fixture.port)], record: 'metadata', result: 'complete' });
      expect(rec.summary.bytesToClient).toBeGreaterThan(100_000);
    } finally {
      await fixture.close();
      await rp.close();
    }
  }, 60_000);
});
