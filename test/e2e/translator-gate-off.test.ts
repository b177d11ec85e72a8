/**
 * `--feature-gates TranslateStreamCloseWebsocketRequests=false`: WebSocket v5 requests are no longer
 * translated (not even with the fixture's `--upstream-streaming spdy`). They pass through to the
 * upstream as kubectl sent them, the translator counter never moves, and what happens next is the
 * upstream's answer:
 * - the fixture's dev cluster plays kube-apiserver 1.36 with a 1.36 kubelet, which serves v5 itself:
 *   every command succeeds over WebSockets, and the dev cluster's own counters count each session;
 * - a 1.29 dev cluster has no v5 and refuses the WebSocket handshake, so kubectl falls back to SPDY
 *   (passthrough) and the command still succeeds.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { resolveConfig } from '../../src/config.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { moved, wayCounts } from '../dev/cluster/streaming-ways.js';
import { scrapeCounter } from '../helpers/metrics.js';
import { waitFor } from '../helpers/wait.js';
import { sha256File } from '../helpers/hash.js';
import { findKubectl, kubectlE2eSkipReason, kubectlEnv, runKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { writeDeterministicFile } from '../helpers/random-data.js';
import { startTmux } from '../helpers/tty.js';
import { startTranslatorFixture, type TranslatorFixture } from '../translator/translator-fixture.js';

const VERSIONS: KubectlVersion[] = ['1.30', '1.33'];
const CP_BYTES = 5_000_000;

describe.skipIf(kubectlE2eSkipReason() !== undefined)('translator gate off: v5 passed through to a 1.36 dev cluster, which serves it', () => {
  let fx: TranslatorFixture;
  let cpSha: string;

  beforeAll(async () => {
    fx = await startTranslatorFixture({ featureGates: { TranslateStreamCloseWebsocketRequests: false } });
    cpSha = (await writeDeterministicFile(join(fx.work, 'cp-source.bin'), 41, CP_BYTES)).sha256;
  });

  afterAll(async () => {
    await fx?.close();
  });

  describe.each(VERSIONS)('kubectl %s', (version) => {
    let bin: string;
    const kubectl = (args: string[], stdin?: Buffer) =>
      runKubectl(bin, args, { kubeconfig: fx.kubeconfig, cwd: fx.work, timeoutMs: 60_000, ...(stdin ? { stdin } : {}) });

    beforeAll(() => {
      bin = findKubectl(version);
    });

    it('echo, exit code, stdin EOF, cp and attach succeed; the translator counter stays untouched', async () => {
      const before = await fx.translatedByCode();
      const ways = await wayCounts(fx.cluster);
      const echo = await kubectl(['exec', 'demo', '--', 'echo', 'hi']);
      expect(echo.code, summary(echo)).toBe(0);
      expect(echo.stdout.toString()).toBe('hi\n');
      const exit = await kubectl(['exec', 'demo', '--', 'sh', '-c', 'exit 3']);
      expect(exit.code, summary(exit)).toBe(3);
      const cat = await kubectl(['exec', '-i', 'demo', '--', 'cat'], Buffer.from('data\n'));
      expect(cat.code, summary(cat)).toBe(0);
      expect(cat.stdout.toString()).toBe('data\n');
      const tag = version.replace('.', '');
      const up = await kubectl(['cp', 'cp-source.bin', `demo:off-${tag}.bin`]);
      expect(up.code, summary(up)).toBe(0);
      const down = await kubectl(['cp', `demo:off-${tag}.bin`, `off-down-${tag}.bin`]);
      expect(down.code, summary(down)).toBe(0);
      expect((await sha256File(join(fx.work, `off-down-${tag}.bin`))).sha256).toBe(cpSha);
      const attach = await kubectl(['attach', '-i', 'demo'], Buffer.from('echo attached-ok\nexit 0\n'));
      expect(attach.code, summary(attach)).toBe(0);
      expect(attach.stdout.toString()).toContain('attached-ok');
      expect(await fx.translatedByCode()).toEqual(before);
      // Six exec sessions (echo, exit, cat, cp up's probe and tar, cp down's tar) and the attach, all
      // over WebSockets, handed by the dev cluster's apiserver to its kubelet.
      expect(moved(ways, await wayCounts(fx.cluster))).toEqual({
        'apiserver/exec/proxied_to_kubelet': 6,
        'kubelet/exec': 6,
        'apiserver/attach/proxied_to_kubelet': 1,
        'kubelet/attach': 1,
      });
    });

    it('exec -it works and is not translated', async () => {
      const before = await fx.translatedByCode();
      const ways = await wayCounts(fx.cluster);
      const tty = await startTmux({
        argv: [bin, '--kubeconfig', fx.kubeconfig, 'exec', '-it', 'demo', '--', 'sh'],
        env: kubectlEnv(fx.kubeconfig),
        width: 100,
        height: 30,
        cwd: fx.work,
      });
      try {
        const hasLine = (line: string) => (s: string) => s.split('\n').some((l) => l.trim() === line);
        const size = (): Promise<void> => tty.sendLine('stty size');
        await size();
        await tty.waitForScreen(hasLine('30 100'), 30_000, { onPoll: size, retryEveryMs: 1000 });
        await tty.sendLine('exit 0');
        expect(await tty.waitForExit(15_000)).toBe(0);
      } finally {
        await tty.kill();
      }
      expect(await fx.translatedByCode()).toEqual(before);
      expect(moved(ways, await wayCounts(fx.cluster))).toEqual({ 'apiserver/exec/proxied_to_kubelet': 1, 'kubelet/exec': 1 });
    });
  });
});

describe.skipIf(kubectlE2eSkipReason() !== undefined)('translator gate off: v5 passed through to a 1.29 dev cluster, which refuses it; kubectl falls back to SPDY', () => {
  let work: string;
  let cluster: DevCluster;
  let proxy: RunningServer;
  let kubeconfig: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-gate-off-1.29-'));
    cluster = await startDevCluster({ dataDir: join(work, 'pods'), apiserverVersion: '1.29' });
    // As the fixture: --upstream-streaming spdy, the gate off.
    proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: cluster.url, upstreamStreaming: 'spdy', featureGates: 'TranslateStreamCloseWebsocketRequests=false' }));
    kubeconfig = join(work, 'kubeconfig');
    writeKubeconfig(kubeconfig, { server: proxy.url, name: 'gate-off' });
  });
  afterAll(async () => {
    await proxy?.close();
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it.each(VERSIONS)('kubectl %s: the refused WebSocket, then the SPDY session; nothing translated', async (version) => {
    const sessions = (labels: Record<string, string>): Promise<number> => scrapeCounter(proxy.url, 'kube_stream_proxy_streaming_requests_total', { subresource: 'exec', path: 'passthrough', ...labels });
    const [refusedBefore, spdyBefore] = [await sessions({ protocol: 'websocket', outcome: 'upstream_refused' }), await sessions({ protocol: 'spdy', outcome: 'success' })];
    const r = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'sh', '-c', 'echo hi; exit 3'], { kubeconfig, cwd: work, timeoutMs: 60_000 });
    expect(r.code, summary(r)).toBe(3);
    expect(r.stdout.toString()).toBe('hi\n');
    await waitFor('the SPDY session counted', async () => ((await sessions({ protocol: 'spdy', outcome: 'success' })) === spdyBefore + 1 ? true : undefined), 10_000, 50);
    expect(await sessions({ protocol: 'websocket', outcome: 'upstream_refused' })).toBe(refusedBefore + 1);
    expect(await scrapeCounter(proxy.url, 'apiserver_stream_translator_requests_total')).toBe(0);
    expect(await scrapeCounter(proxy.url, 'kube_stream_proxy_upstream_streaming_fallbacks_total')).toBe(0);
  });
});
