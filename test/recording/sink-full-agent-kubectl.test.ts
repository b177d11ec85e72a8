/**
 * Session recording at the edges, through the real proxy:
 *
 * - Sink full: the directory sink on a 1 MiB tmpfs (mounted here; root can, and the test says why it
 *   is skipped where mounting is refused) that runs out of space mid-session. Enforce: kubectl 1.27
 *   and 1.33 end within 1 s of the disk filling, with "session recording unavailable". Fail open:
 *   the session goes on to its end, and the metrics say the recording was dropped (`sink_error`).
 * - A session through an agent (`/clusters/NAME`, test/tunnel/tunnel-fixture.ts), recorded by a rule
 *   matching the cluster: kubectl 1.27 (SPDY passthrough over the tunnel) and 1.33 (WebSocket v5,
 *   passed through the tunnel to the cluster, which takes it as kube-apiserver 1.36 does: the proxy's
 *   `proxied_to_upstream` and the cluster's own counters say so; recorded by the WebSocket tap)
 *   `exec -it` under tmux; the cast names the cluster, and `sessions play` ends on the live screen.
 *
 * Needs `npm run build` (the agents and `sessions play` run from bin/kube-stream-proxy.js).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { CAST_HEADER_KEY } from '../../src/recording/asciicast.js';
import { moved, wayCounts, type WayCounts } from '../dev/cluster/streaming-ways.js';
import { findKubectl, kubectlE2eSkipReason, kubectlEnv, startKubectl, type KubectlVersion } from '../helpers/kubectl.js';
import { counterValue } from '../helpers/metrics.js';
import { expectShellFollowsResize, hasLine, startTmux } from '../helpers/tty.js';
import { waitFor } from '../helpers/wait.js';
import { startTunnelFixture, type TunnelFixture } from '../tunnel/tunnel-fixture.js';
import { expectPlayedAsLive, outputOf, playUnderTmux, policyYaml, startRecordingProxy, storedRecording, writeText, type RecordingProxy } from './recording-proxy-fixture.js';

const skip = kubectlE2eSkipReason();

/** Mount a `size` tmpfs on `dir`; the reason it cannot be, or undefined once mounted. */
function mountTmpfs(dir: string, size: string): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
    return undefined;
  } catch (e) {
    return `mount -t tmpfs refused (needs root or CAP_SYS_ADMIN): ${(e as { stderr?: Buffer }).stderr?.toString().trim() ?? (e as Error).message}`;
  }
}

/** Fill the filesystem of `dir` to the last byte. */
function fill(dir: string, name: string): void {
  try {
    writeFileSync(join(dir, name), Buffer.alloc(4 * 1024 * 1024, 'x'));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  }
}

// The tmpfs is mounted while the tests are collected, so the suite can say why it is skipped (the
// mount needs root or CAP_SYS_ADMIN; a loop-mounted image would need the same).
const work = skip === undefined ? mkdtempSync(join(tmpdir(), 'ksp-rec-full-')) : '';
const full = work ? join(work, 'full') : '';
if (full) mkdirSync(full);
const mountRefused = full ? mountTmpfs(full, '1m') : skip;

describe.skipIf(mountRefused !== undefined)('sink full: the directory sink on a filesystem that runs out of space', () => {
  let cluster: DevCluster;
  const proxies: Record<'open' | 'strict', RecordingProxy> = {} as never;
  const kubeconfigs: Record<'open' | 'strict', string> = {} as never;

  beforeAll(async () => {
    cluster = await startDevCluster({ dataDir: join(work, 'pods') });
    for (const [name, enforce] of [['open', false], ['strict', true]] as const) {
      const policy = writeText(join(work, `${name}.yaml`), policyYaml({ enforce }));
      proxies[name] = await startRecordingProxy({ upstream: cluster.url, sessionRecordingConfig: policy, sessionRecordingDir: join(full, name) });
      kubeconfigs[name] = join(work, `kubeconfig-${name}`);
      writeKubeconfig(kubeconfigs[name], { server: proxies[name].url, name });
    }
  });
  afterAll(async () => {
    for (const p of Object.values(proxies)) await p?.close();
    await cluster?.close();
  });

  const clear = (): void => {
    for (const f of readdirSync(full).filter((n) => n.startsWith('filler'))) rmSync(join(full, f));
  };

  it.each<{ version: KubectlVersion }>([{ version: '1.27' }, { version: '1.33' }])('enforce, kubectl $version: the disk fills mid-session; kubectl ends within 1 s with the Status', async ({ version }) => {
    clear();
    // 2 KB a line every 50 ms: the cast's last page fills at once once the disk is full.
    const k = startKubectl(findKubectl(version), ['exec', 'demo', '--', 'sh', '-c', "while true; do echo tick; head -c 2000 /dev/zero | tr '\\0' x; echo; sleep 0.05; done"], { kubeconfig: kubeconfigs.strict, cwd: work });
    const closed = new Promise<{ code: number | null; at: number }>((r) => k.child.once('close', (code) => r({ code, at: Date.now() })));
    try {
      await k.waitForOutput(/tick/, 30_000);
      fill(full, `filler-${version}`);
      const filledAt = Date.now();
      const exit = await closed;
      expect(exit.code, k.output().stderr).toBe(1);
      expect(k.output().stderr).toContain('session recording unavailable');
      expect(exit.at - filledAt).toBeLessThan(1000);
    } finally {
      await k.stop('SIGKILL', 1000);
      clear();
    }
    const m = await waitFor('the terminated recording counted', async () => {
      const text = await (await fetch(`${proxies.strict.url}/metrics`)).text();
      return counterValue(text, 'kube_stream_proxy_session_recordings_total', { subresource: 'exec' }) >= (version === '1.27' ? 1 : 2) ? text : undefined;
    });
    expect(counterValue(m, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'mid_session' })).toBe(version === '1.27' ? 1 : 2);
    expect(counterValue(m, 'kube_stream_proxy_session_recording_sink_errors_total', { sink: 'directory', phase: 'write' })).toBeGreaterThanOrEqual(version === '1.27' ? 1 : 2);
  }, 60_000);

  it('fail open: the disk fills mid-session; the session goes on to its end, the dropped recording is counted', async () => {
    clear();
    const stdin = new PassThrough();
    const k = startKubectl(findKubectl('1.27'), ['exec', '-i', 'demo', '--', 'sh'], { kubeconfig: kubeconfigs.open, stdin, cwd: work });
    try {
      stdin.write('echo before-$((1+1))\n');
      await k.waitForOutput(/before-2/, 30_000);
      fill(full, 'filler-open');
      stdin.write("head -c 300000 /dev/zero | tr '\\0' y; echo; echo after-$((2+2))\n");
      await k.waitForOutput(/after-4/, 30_000);
      stdin.end('exit 0\n');
      expect(await new Promise<number | null>((r) => k.child.once('close', (code) => r(code)))).toBe(0);
      expect(k.output().stdout).toContain('y'.repeat(300_000));
    } finally {
      await k.stop('SIGKILL', 1000);
      clear();
    }
    const m = await waitFor('the recording counted', async () => {
      const text = await (await fetch(`${proxies.open.url}/metrics`)).text();
      return counterValue(text, 'kube_stream_proxy_session_recordings_total', { subresource: 'exec' }) >= 1 ? text : undefined;
    });
    expect(counterValue(m, 'kube_stream_proxy_session_recordings_dropped_total', { reason: 'sink_error' })).toBe(1);
    expect(counterValue(m, 'kube_stream_proxy_session_recordings_total', { subresource: 'exec', result: 'incomplete' })).toBe(1);
    expect(counterValue(m, 'kube_stream_proxy_session_recording_sink_errors_total', { sink: 'directory', phase: 'write' })).toBeGreaterThanOrEqual(1);
    expect(counterValue(m, 'kube_stream_proxy_session_recording_enforce_refusals_total')).toBe(0);
    // The log says so (without the content).
    const warned = proxies.open.lines.filter((l) => l.msg === 'session recording sink failed');
    expect(warned).toHaveLength(1);
    expect(JSON.stringify(proxies.open.lines)).not.toContain('before-2');
  }, 60_000);
});

afterAll(() => {
  if (mountRefused === undefined) execFileSync('umount', ['-l', full]);
  if (work) rmSync(work, { recursive: true, force: true });
});

describe.skipIf(skip !== undefined)('a session through an agent, recorded by a rule on its cluster', () => {
  let fx: TunnelFixture;
  let dir: string;

  beforeAll(async () => {
    fx = await startTunnelFixture({ one: ['alpha'] }, {}, {
      serveFlags: (work) => ({
        sessionRecordingConfig: writeText(join(work, 'policy.yaml'), policyYaml({ match: '{clusters: [one]}' })),
        sessionRecordingDir: (dir = join(work, 'recordings')),
      }),
    });
    await fx.startAgent('one').waitForOutput(/tunnel established/, 20_000);
  }, 60_000);
  afterAll(async () => fx?.close());

  it.each<{ version: KubectlVersion; websocket: boolean; recordings: number; inCluster: WayCounts }>([
    { version: '1.27', websocket: false, recordings: 1, inCluster: {} },
    { version: '1.33', websocket: true, recordings: 2, inCluster: { 'apiserver/exec/proxied_to_kubelet': 1, 'kubelet/exec': 1 } },
  ])('kubectl $version exec -it through /clusters/one: recorded with the cluster; played back to the live screen', async ({ version, websocket, recordings, inCluster }) => {
    const passedThrough = (): Promise<number> => fx.metric('apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'proxied_to_upstream' });
    const before = await passedThrough();
    const ways = await wayCounts(fx.clusters.one!);
    const kubeconfig = fx.kubeconfigs.one!;
    const tty = await startTmux({ argv: [findKubectl(version), '--kubeconfig', kubeconfig, 'exec', '-it', 'alpha', '--', 'sh'], env: kubectlEnv(kubeconfig), width: 100, height: 30, cwd: fx.work });
    let live: string;
    try {
      await expectShellFollowsResize(tty);
      await tty.sendLine(`printf '\\033[H\\033[2J'; echo agent-$((40+2)); stty size`);
      live = await tty.waitForScreen((sc) => hasLine('agent-42')(sc) && hasLine('40 120')(sc) && /\n[#$]$/.test(sc), 15_000);
      await tty.sendLine('exit 3');
      expect(await tty.waitForExit(15_000)).toBe(3);
    } finally {
      await tty.kill();
    }
    // Which way it went: passed through by the proxy (never translated here), and who served it in the cluster.
    expect((await passedThrough()) - before).toBe(websocket ? 1 : 0);
    expect(await fx.metric('apiserver_stream_translator_requests_total')).toBe(0);
    expect(moved(ways, await wayCounts(fx.clusters.one!))).toEqual(inCluster);
    const id = await waitFor('the recording', async () => {
      const ids = readdirSync(dir).filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5)).sort();
      return ids.length === recordings ? ids.at(-1) : undefined;
    });
    const rec = await storedRecording(dir, id);
    expect(rec.summary).toMatchObject({ cluster: 'one', pod: 'alpha', exitCode: 3, result: 'complete' });
    expect(rec.header[CAST_HEADER_KEY]).toMatchObject({ cluster: 'one', pod: 'alpha' });
    expect(outputOf(rec.events)).toContain('agent-42');
    expectPlayedAsLive(await playUnderTmux(id, dir, 120, 40, fx.work), live, 'exit 3');
  });
});
