/**
 * Session recording through real proxies to one remote recorder (`kube-stream-proxy recorder`, the
 * built CLI, a real process that can be SIGKILLed):
 *
 * - two proxy replicas record to one recorder: kubectl 1.27 `exec -it` (SPDY) through replica A
 *   under tmux, kubectl 1.33 (WebSocket v5, passed through by the default to the dev cluster, which
 *   takes it as kube-apiserver 1.36 does; recorded by the WebSocket tap) through replica B; the
 *   recorder keeps who uploaded each;
 *   `sessions list|play --recorder` read them, and the played screen is the live one;
 * - real Chromium opens the recorder's `/sessions/` and plays the session recorded through replica A
 *   (screenshot); a caller outside the viewer group gets 403;
 * - the recorder is killed mid-session: with enforce, kubectl (1.27 and 1.33) ends within 1 s with
 *   "session recording unavailable"; without it the session goes on, 12 MB of output overflow the
 *   bounded buffer while the recorder is away (`recordings_dropped{reason="sink_slow"}`), and once the
 *   recorder is back the upload resumes: the stored cast has a `recording gap` marker, result `gap`.
 *
 * Needs `npm run build` (the recorder and `sessions` run from bin/kube-stream-proxy.js).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { chromium, type Browser } from 'playwright-core';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { findKubectl, kubectlE2eSkipReason, kubectlEnv, runKubectl, startKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { counterValue } from '../helpers/metrics.js';
import { expectShellFollowsResize, hasLine, startTmux } from '../helpers/tty.js';
import { waitFor } from '../helpers/wait.js';
import { CLI, expectPlayedAsLive, outputOf, policyYaml, startRecorderProcess, startRecordingProxy, storedRecording, writeText, type RecorderProcess, type RecordingProxy } from './recording-proxy-fixture.js';

const execFileP = promisify(execFile);
const CHROMIUM = '/usr/bin/chromium';
const BROWSER_FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Runs in the page: whether the player's terminal shows `needle` (a function: the page's CSP forbids string evaluation). */
function termIncludes(needle: string): boolean {
  const doc = (globalThis as unknown as { document: { querySelector(s: string): { textContent: string | null } | null } }).document;
  return (doc.querySelector('.ap-term')?.textContent ?? '').includes(needle);
}

const skip = kubectlE2eSkipReason();

describe.skipIf(skip !== undefined)('recording to a remote recorder through real proxies', () => {
  let work: string;
  let recDir: string;
  let cluster: DevCluster;
  let recorder: RecorderProcess;
  const proxies: Record<'a' | 'b' | 'strict', RecordingProxy> = {} as never;
  const kubeconfigs: Record<'a' | 'b' | 'strict', string> = {} as never;
  let interactiveId: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-recorder-'));
    recDir = join(work, 'recorder');
    writeText(join(work, 'ingest.csv'), 'token-a,replica-a,\ntoken-b,replica-b,\ntoken-s,replica-strict,\n');
    writeText(join(work, 'viewers.csv'), 'viewer-token,carol,,"auditors"\nnosy-token,mallory,,"developers"\n');
    for (const [k, t] of [['a', 'token-a'], ['b', 'token-b'], ['s', 'token-s'], ['viewer', 'viewer-token']] as const) writeText(join(work, `${k}.token`), `${t}\n`);
    cluster = await startDevCluster({ dataDir: join(work, 'pods') });
    recorder = await startRecorderProcess(recDir, work);
    const open = writeText(join(work, 'open.yaml'), policyYaml());
    const strict = writeText(join(work, 'strict.yaml'), policyYaml({ enforce: true }));
    for (const [name, policy, token] of [['a', open, 'a'], ['b', open, 'b'], ['strict', strict, 's']] as const) {
      proxies[name] = await startRecordingProxy({ upstream: cluster.url, sessionRecordingConfig: policy, sessionRecorderUrl: recorder.url, sessionRecorderTokenFile: join(work, `${token}.token`) });
      kubeconfigs[name] = join(work, `kubeconfig-${name}`);
      writeKubeconfig(kubeconfigs[name], { server: proxies[name].url, name });
    }
  }, 60_000);
  afterAll(async () => {
    for (const p of Object.values(proxies)) await p?.close();
    await recorder?.kill('SIGTERM');
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const sessionsCli = async (...args: string[]): Promise<string> => (await execFileP(process.execPath, [CLI, 'sessions', ...args], { cwd: work })).stdout;

  it('two replicas record to one recorder; sessions list and play read them from it', async () => {
    const tty = await startTmux({ argv: [findKubectl('1.27'), '--kubeconfig', kubeconfigs.a, 'exec', '-it', 'demo', '--', 'sh'], env: kubectlEnv(kubeconfigs.a), width: 100, height: 30, cwd: work });
    let live: string;
    try {
      await expectShellFollowsResize(tty);
      await tty.sendLine(`printf '\\033[H\\033[2J'; echo browser-$((6*7)); stty size`);
      live = await tty.waitForScreen((sc) => hasLine('browser-42')(sc) && hasLine('40 120')(sc) && /\n[#$]$/.test(sc), 15_000);
      await tty.sendLine('exit 3');
      expect(await tty.waitForExit(15_000)).toBe(3);
    } finally {
      await tty.kill();
    }
    const r = await runKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo via-b; exit 0'], { kubeconfig: kubeconfigs.b, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(0);
    const [auditA, auditB] = [await proxies.a.audit(1), await proxies.b.audit(1)];
    expect(auditB).toMatchObject({ path: 'passthrough', clientProtocol: 'websocket', exitCode: 0 });
    const metricsB = await (await fetch(`${proxies.b.url}/metrics`)).text();
    expect(counterValue(metricsB, 'apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(1);
    expect(counterValue(metricsB, 'apiserver_stream_translator_requests_total')).toBe(0);
    interactiveId = auditA.recordingId;
    const a = await storedRecording(recDir, auditA.recordingId);
    const b = await storedRecording(recDir, auditB.recordingId);
    expect(a.summary).toMatchObject({ recordedBy: 'replica-a', exitCode: 3, result: 'complete', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(b.summary).toMatchObject({ recordedBy: 'replica-b', exitCode: 0, result: 'complete' });
    expect(outputOf(b.events)).toBe('via-b\r\n');
    const listed = (await sessionsCli('list', '--recorder', recorder.url, '--token-file', join(work, 'viewer.token'), '-o', 'json')).trim().split('\n').map((l) => JSON.parse(l));
    expect(listed.map((e) => e.id).sort()).toEqual([auditA.recordingId, auditB.recordingId].sort());
    // Played from the recorder under tmux: the live screen again.
    const play = `${process.execPath} ${CLI} sessions play ${auditA.recordingId} --recorder ${recorder.url} --token-file ${join(work, 'viewer.token')} --idle-time-limit 0.05; echo play-exit=$?; sleep 600`;
    const player = await startTmux({ argv: ['sh', '-c', play], env: { PATH: process.env.PATH }, width: 120, height: 40, cwd: work });
    try {
      expectPlayedAsLive((await player.waitForScreen(hasLine('play-exit=0'), 30_000)).split('\n'), live, 'exit 3');
    } finally {
      await player.kill();
    }
    const m = await (await fetch(`${proxies.a.url}/metrics`)).text();
    expect(counterValue(m, 'kube_stream_proxy_session_recordings_total', { subresource: 'exec', result: 'complete' })).toBe(1);
    expect(counterValue(m, 'kube_stream_proxy_session_recording_bytes_total', { sink: 'recorder' })).toBeGreaterThan(0);
  });

  it('real Chromium plays the session recorded through the proxy on /sessions/; 403 outside the viewer group', async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium (scripts/provision-test-tools.sh installs it for npm test)`).toBe(true);
    const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: BROWSER_FLAGS, headless: true });
    try {
      const context = await browser.newContext({ extraHTTPHeaders: { authorization: 'Bearer viewer-token' }, viewport: { width: 1100, height: 800 } });
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      expect((await page.goto(`${recorder.url}/sessions/`))?.status()).toBe(200);
      await page.waitForSelector(`tr[data-id="${interactiveId}"]`);
      await page.click(`tr[data-id="${interactiveId}"]`);
      await page.waitForFunction(termIncludes, 'browser-42', { timeout: 20_000 });
      // The screen was cleared before the output: the command line scrolled off, its output and the size
      // stay (the size is the next output event: waited for, not read at once, so a loaded machine's
      // player that is one event behind does not fail it).
      await page.waitForFunction(termIncludes, '40 120', { timeout: 20_000 });
      const shot = join(process.env.KSP_SCREENSHOT_DIR ?? work, 'sessions-page-through-proxy.png');
      await page.screenshot({ path: shot });
      expect(statSync(shot).size).toBeGreaterThan(5000);
      expect(errors).toEqual([]);
      await context.close();
      const nosy = await browser.newContext({ extraHTTPHeaders: { authorization: 'Bearer nosy-token' } });
      const p2 = await nosy.newPage();
      expect((await p2.goto(`${recorder.url}/sessions/`))?.status()).toBe(403);
      expect((await p2.goto(`${recorder.url}/api/v1/sessions/${interactiveId}/cast`))?.status()).toBe(403);
      expect(await p2.textContent('body')).not.toContain('browser-42');
      await nosy.close();
    } finally {
      await browser.close();
    }
  }, 60_000);

  it('the recorder is killed mid-session, fail open: the session goes on, the gap is marked and counted once the recorder is back', async () => {
    const stdin = new PassThrough();
    const k = startKubectl(findKubectl('1.27'), ['exec', '-i', 'demo', '--', 'sh'], { kubeconfig: kubeconfigs.a, stdin, cwd: work });
    try {
      stdin.write('echo before-$((1+1))\n');
      await k.waitForOutput(/before-2/, 30_000);
      await recorder.kill('SIGKILL');
      // 12 MB while the recorder is away: past the 8 MiB buffer.
      stdin.write('yes 0123456789abcdef | head -c 12000000; echo after-$((2+2))\n');
      await k.waitForOutput(/after-4/, 60_000);
      expect(k.output().stdout.length).toBeGreaterThan(12_000_000);
      const m = await (await fetch(`${proxies.a.url}/metrics`)).text();
      expect(counterValue(m, 'kube_stream_proxy_session_recordings_dropped_total', { reason: 'sink_slow' })).toBe(1);
      recorder = await startRecorderProcess(recDir, work, recorder.port);
      // The upload resumes on the restarted recorder; once it caught up, the gap is marked in the cast.
      await waitFor('the gap marker on the recorder', async () => {
        for (const f of readdirSync(recDir).filter((n) => n.endsWith('.cast'))) {
          const text = readFileSync(join(recDir, f), 'latin1');
          if (text.slice(-4096).includes('recording gap:')) return true;
        }
        return undefined;
      }, 30_000, 200);
      stdin.write('echo resumed-$((3+3))\n');
      await k.waitForOutput(/resumed-6/, 30_000);
      stdin.end('exit 0\n');
      const closed = await new Promise<number | null>((r) => k.child.once('close', (code) => r(code)));
      expect(closed).toBe(0);
    } finally {
      await k.stop('SIGKILL', 1000);
      if (recorder.child.exitCode !== null || recorder.child.signalCode !== null) recorder = await startRecorderProcess(recDir, work, recorder.port);
    }
    const audit = proxies.a.audits().at(-1)!;
    const rec = await storedRecording(recDir, audit.recordingId, 40_000);
    expect(rec.summary).toMatchObject({ result: 'gap', exitCode: 0, recordedBy: 'replica-a' });
    const markers = rec.events.filter((e) => e[1] === 'm').map((e) => e[2]);
    expect(markers.some((t) => /^recording gap: \d+ bytes of events dropped/.test(t)), markers.join('\n')).toBe(true);
    expect(markers.at(-1)).toBe('exit 0');
    const out = outputOf(rec.events);
    expect(out).toContain('before-2');
    expect(out).toContain('resumed-6');
  }, 120_000);

  describe.each<{ version: KubectlVersion }>([{ version: '1.27' }, { version: '1.33' }])('enforce, kubectl $version', ({ version }) => {
    it('the recorder is SIGKILLed mid-session: kubectl ends within 1 s with "session recording unavailable"', async () => {
      const before = await (await fetch(`${proxies.strict.url}/metrics`)).text();
      const k = startKubectl(findKubectl(version), ['exec', 'demo', '--', 'sh', '-c', 'while true; do echo tick; sleep 0.05; done'], { kubeconfig: kubeconfigs.strict, cwd: work });
      const closed = new Promise<{ code: number | null; at: number }>((r) => k.child.once('close', (code) => r({ code, at: Date.now() })));
      try {
        await k.waitForOutput(/tick/, 30_000);
        const killedAt = Date.now();
        await recorder.kill('SIGKILL');
        const exit = await closed;
        expect(exit.code, k.output().stderr).toBe(1);
        expect(k.output().stderr).toContain('session recording unavailable');
        expect(exit.at - killedAt).toBeLessThan(1000);
      } finally {
        await k.stop('SIGKILL', 1000);
        recorder = await startRecorderProcess(recDir, work, recorder.port);
      }
      const after = await waitFor('the enforce refusal counted', async () => {
        const m = await (await fetch(`${proxies.strict.url}/metrics`)).text();
        const n = (x: string) => counterValue(x, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'mid_session' });
        return n(m) > n(before) ? m : undefined;
      });
      const terminated = (x: string) => counterValue(x, 'kube_stream_proxy_session_recordings_total', { result: 'terminated' });
      await waitFor('the recording ended as terminated', async () => {
        const m = await (await fetch(`${proxies.strict.url}/metrics`)).text();
        return terminated(m) > terminated(before) ? true : undefined;
      });
      expect(counterValue(after, 'kube_stream_proxy_session_recording_sink_errors_total', { sink: 'recorder', phase: 'write' })).toBeGreaterThan(counterValue(before, 'kube_stream_proxy_session_recording_sink_errors_total', { sink: 'recorder', phase: 'write' }));
    }, 60_000);
  });
});
