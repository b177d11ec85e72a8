/**
 * Session recording through the real proxy (issue 23's acceptance), with the directory sink, in
 * front of a dev cluster playing kube-apiserver 1.36 (it takes WebSocket v5 and the tunnel itself).
 * Every path a session can take is recorded, each proved by the proxy's counters (kubectl ≥ 1.30
 * falls back to SPDY silently):
 *
 * - kubectl 1.27 (SPDY/3.1, passthrough), 1.33 (WebSocket v5, translated: the recording of the
 *   translator's own view, so that proxy runs with `--upstream-streaming spdy` —
 *   `apiserver_stream_translator_requests_total`) and 1.33 through the default (v5 passed through,
 *   recorded by the WebSocket tap — `apiserver_websocket_streaming_requests_total{proxy_type="proxied_to_upstream"}`)
 *   run `exec -it demo -- sh` under tmux: commands, a resize, `exit 3`; the stored cast has the
 *   session, the audit line names it, and `sessions play` under tmux ends on the live screen.
 * - `attach -it` to a tty pod (every client), the same.
 * - Non-tty exec: stderr apart (SGR red), exit code, a valid asciicast v2 file.
 * - `record: full` (kubectl 1.27 passthrough, 1.33 translated, 1.33 v5 passed through): stdin as `i` events.
 * - WebSocket v4 passthrough (@kubernetes/client-node with the translation gate off, to a 1.29 dev
 *   cluster, which offers no v5): the WebSocket tap.
 * - SPDY passthrough: a 50 MB `cat` through a recorded session arrives byte-identical (sha256) and is
 *   recorded whole, with the splice(2) fast path off (`copy: js` on the close line); the same
 *   unrecorded session does go native when the addon is loaded.
 * - Port-forward (1.27 SPDY passthrough, 1.33 tunnel, 1.33 tunnel passed through): a metadata record only.
 * - An enforced rule with the sink unusable: refused with 503 before the upgrade.
 * - The recording metrics, read from /metrics.
 *
 * Needs `npm run build` first (`sessions play` runs bin/kube-stream-proxy.js).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { Exec, KubeConfig, type V1Status } from '@kubernetes/client-node';
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { loadNativeSplice } from '../../proxy/splice-native.js';
import { CAST_HEADER_KEY, STDERR_END, STDERR_START } from '../../src/recording/asciicast.js';
import { downloadDigest, startBytesServer } from '../helpers/http-fixture.js';
import { FORCE_SPDY_ENV, findKubectl, kubectlE2eSkipReason, kubectlEnv, runKubectl, startKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { counterValue } from '../helpers/metrics.js';
import { expectShellFollowsResize, hasLine, startTmux } from '../helpers/tty.js';
import { expectPlayedAsLive, expectValidAsciicastV2, outputOf, playUnderTmux, policyYaml, startRecordingProxy, storedRecording, writeText, type RecordingProxy } from './recording-proxy-fixture.js';

const skip = kubectlE2eSkipReason();
const MB = 1024 * 1024;

/** A recording proxy in front of the dev cluster, with its own recordings folder and kubeconfig. */
interface Target {
  rp: RecordingProxy;
  dir: string;
  kubeconfig: string;
  /** Audit lines taken so far. */
  audits: number;
}

/** Which way a session went, and the counter of the proxy that proves it. */
type Way = 'passthrough' | 'translated' | 'websocket-passthrough';

/** The proxy counter a session of `way` moves by one (none for SPDY passthrough). */
const WAY_COUNTERS: Record<Way, (subresource: 'exec' | 'attach') => Array<[string, Record<string, string>, number]>> = {
  passthrough: () => [
    ['apiserver_stream_translator_requests_total', {}, 0],
    ['apiserver_websocket_streaming_requests_total', {}, 0],
  ],
  translated: (subresource) => [
    ['apiserver_stream_translator_requests_total', { code: '200' }, 1],
    ['apiserver_websocket_streaming_requests_total', { subresource, proxy_type: 'translated_at_apiserver' }, 1],
  ],
  'websocket-passthrough': (subresource) => [
    ['apiserver_stream_translator_requests_total', {}, 0],
    ['apiserver_websocket_streaming_requests_total', { subresource, proxy_type: 'proxied_to_upstream' }, 1],
  ],
};

describe.skipIf(skip !== undefined)('session recording through the proxy (directory sink)', () => {
  let work: string;
  let cluster: DevCluster;
  /** `--upstream-streaming spdy`: kubectl ≥ 1.30's v5 translated here, so the translator's recording is what is tested. */
  const translating = {} as Target;
  /** The default: v5 passed through to the dev cluster (which takes it), recorded by the WebSocket tap. */
  const passing = {} as Target;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-e2e-'));
    cluster = await startDevCluster({ dataDir: join(work, 'pods') });
    // A tty pod for attach -it, and one the policy does not record.
    cluster.pods.create({ name: 'ttydemo', containers: [{ name: 'ttydemo', image: 'busybox', stdin: true, stdinOnce: false, tty: true }] });
    cluster.pods.create({ name: 'unrecorded' });
    const policy = writeText(join(work, 'policy.yaml'), policyYaml({ match: '{pods: [demo, ttydemo]}' }));
    for (const [name, target, flags] of [['recording', translating, { upstreamStreaming: 'spdy' }], ['recording-default', passing, {}]] as const) {
      target.dir = join(work, `recordings-${name}`);
      target.rp = await startRecordingProxy({ upstream: cluster.url, sessionRecordingConfig: policy, sessionRecordingDir: target.dir, ...flags });
      target.kubeconfig = join(work, `kubeconfig-${name}`);
      target.audits = 0;
      writeKubeconfig(target.kubeconfig, { server: target.rp.url, name });
    }
  });
  afterAll(async () => {
    await translating.rp?.close();
    await passing.rp?.close();
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const metrics = async (t: Target): Promise<string> => (await fetch(`${t.rp.url}/metrics`)).text();
  /** The next session's audit line. */
  const nextAudit = async (t: Target): Promise<Record<string, any>> => t.rp.audit(++t.audits);

  describe.each<{ version: KubectlVersion; protocol: string; way: Way; target: () => Target }>([
    { version: '1.27', protocol: 'spdy', way: 'passthrough', target: () => translating },
    { version: '1.33', protocol: 'websocket', way: 'translated', target: () => translating },
    { version: '1.33', protocol: 'websocket', way: 'websocket-passthrough', target: () => passing },
  ])('kubectl $version ($protocol, $way)', ({ version, way, target }) => {
    it.each(['exec', 'attach'] as const)('%s -it under tmux: recorded, audited, and played back to the live screen', async (subresource) => {
      const t = target();
      const { kubeconfig, dir } = t;
      const before = await metrics(t);
      const pod = subresource === 'exec' ? 'demo' : 'ttydemo';
      const argv = subresource === 'exec' ? ['exec', '-it', pod, '--', 'sh'] : ['attach', '-it', pod];
      const tty = await startTmux({ argv: [findKubectl(version), '--kubeconfig', kubeconfig, ...argv], env: kubectlEnv(kubeconfig), width: 100, height: 30, cwd: work });
      let live: string;
      try {
        await expectShellFollowsResize(tty);
        // Clear first: what the local terminal showed before kubectl switched it to raw mode is not the remote's.
        await tty.sendLine(`printf '\\033[H\\033[2J'; echo done-$((40+2)); stty size; printf 'a\\tb\\tc\\n'`);
        live = await tty.waitForScreen((sc) => hasLine('done-42')(sc) && hasLine('a       b       c')(sc) && /\n[#$]$/.test(sc), 15_000);
        await tty.sendLine('exit 3');
        expect(await tty.waitForExit(15_000)).toBe(3);
      } finally {
        await tty.kill();
      }
      const audit = await nextAudit(t);
      // The exit code on the audit line: from the translator's Status, or (passthrough) from the recording's tap.
      expect(audit).toMatchObject({ subresource, pod, path: way === 'translated' ? 'translated' : 'passthrough', recordingId: expect.stringMatching(/^[0-9a-f-]{36}$/), exitCode: 3 });
      const rec = await storedRecording(dir, audit.recordingId);
      expect(rec.summary).toMatchObject({ id: audit.recordingId, subresource, pod, tty: true, exitCode: 3, result: 'complete', record: 'output' });
      const resizes = rec.events.filter((e) => e[1] === 'r').map((e) => e[2]);
      if (subresource === 'exec') expect([rec.header.version, rec.header.width, rec.header.height]).toEqual([2, 100, 30]);
      else {
        // kubectl attach sends the size plus one first, then the size, to make the attached program redraw.
        expect([rec.header.version, rec.header.width, rec.header.height]).toEqual([2, 101, 31]);
        expect(resizes[0]).toBe('100x30');
      }
      expect(rec.header[CAST_HEADER_KEY]).toMatchObject({ sessionId: audit.recordingId, subresource, pod, tty: true });
      expect(resizes).toContain('120x40');
      const output = outputOf(rec.events);
      for (const want of ['READY-42', '30 100', '40 120', 'done-42']) expect(output).toContain(want);
      expect(rec.events.at(-1)).toEqual([expect.any(Number), 'm', 'exit 3']);
      expectValidAsciicastV2(rec.text);
      expectPlayedAsLive(await playUnderTmux(audit.recordingId, dir, 120, 40, work), live, 'exit 3');
      const after = await metrics(t);
      // The path, from the proxy's own counters (kubectl ≥ 1.30 would fall back to SPDY silently).
      for (const [name, labels, delta] of WAY_COUNTERS[way](subresource)) expect(counterValue(after, name, labels) - counterValue(before, name, labels), `${name}${JSON.stringify(labels)}`).toBe(delta);
      const recorded = (m: string) => counterValue(m, 'kube_stream_proxy_session_recordings_total', { subresource, result: 'complete' });
      expect(recorded(after) - recorded(before)).toBe(1);
      expect(counterValue(after, 'kube_stream_proxy_session_recording_bytes_total', { sink: 'directory' })).toBeGreaterThan(counterValue(before, 'kube_stream_proxy_session_recording_bytes_total', { sink: 'directory' }));
    });

    it('exec without a tty: stdout and stderr apart, the exit code, valid asciicast v2', async () => {
      const t = target();
      const { kubeconfig, dir } = t;
      const before = await metrics(t);
      const cmd = "echo out; echo err >&2; printf '%s\\n' 'quote\" back\\ tab\té'; exit 4";
      const r = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'sh', '-c', cmd], { kubeconfig, timeoutMs: 30_000 });
      expect(r.code, summary(r)).toBe(4);
      const audit = await nextAudit(t);
      expect(audit.exitCode).toBe(4);
      const after = await metrics(t);
      for (const [name, labels, delta] of WAY_COUNTERS[way]('exec')) expect(counterValue(after, name, labels) - counterValue(before, name, labels), `${name}${JSON.stringify(labels)}`).toBe(delta);
      const rec = await storedRecording(dir, audit.recordingId);
      expect(rec.summary).toMatchObject({ subresource: 'exec', tty: false, exitCode: 4, result: 'complete' });
      expect([rec.header.width, rec.header.height]).toEqual([80, 24]);
      const out = rec.events.filter((e) => e[1] === 'o').map((e) => e[2]).join('');
      expect(out).toContain('out\r\n');
      expect(out).toContain(`${STDERR_START}err\r\n${STDERR_END}`);
      expect(out).toContain('quote" back\\ tab\té\r\n');
      expect(rec.events.at(-1)![2]).toBe('exit 4');
      expectValidAsciicastV2(rec.text);
      // Played in a terminal: the lines as the client's terminal showed them, stderr among them.
      const played = await playUnderTmux(audit.recordingId, dir, 80, 24, work);
      // (stdout and stderr are two streams: their order is the order they reached the proxy.)
      expect(played[3]).toBe('play-exit=0');
      expect(played.slice(0, 3)).toEqual(expect.arrayContaining(['err', 'out', expect.stringMatching(/^quote" back\\ tab +é$/)]));
    });
  });

  it.each<{ version: KubectlVersion; way: Way }>([
    { version: '1.27', way: 'passthrough' },
    // The translator's stdin (before it is masked): translated here.
    { version: '1.33', way: 'translated' },
    // The WebSocket tap's stdin (channel 0, unmasked): the default.
    { version: '1.33', way: 'websocket-passthrough' },
  ])('record: full, kubectl $version ($way): stdin is recorded as i events', async ({ version, way }) => {
    const name = `${version}-${way}`;
    const policy = writeText(join(work, `full-${name}.yaml`), policyYaml({ match: '{pods: [demo]}', record: 'full' }));
    const fullDir = join(work, `recordings-full-${name}`);
    const full = await startRecordingProxy({ upstream: cluster.url, sessionRecordingConfig: policy, sessionRecordingDir: fullDir, ...(way === 'translated' ? { upstreamStreaming: 'spdy' as const } : {}) });
    try {
      const kc = join(work, `kubeconfig-full-${name}`);
      writeKubeconfig(kc, { server: full.url, name: 'full' });
      const r = await runKubectl(findKubectl(version), ['exec', '-i', 'demo', '--', 'sh', '-c', 'read line; echo "got $line"'], { kubeconfig: kc, stdin: Buffer.from('typed-secret\n'), timeoutMs: 30_000 });
      expect(r.code, summary(r)).toBe(0);
      const audit = await full.audit(1);
      expect(audit.path).toBe(way === 'translated' ? 'translated' : 'passthrough');
      const m = await (await fetch(`${full.url}/metrics`)).text();
      for (const [n, labels, delta] of WAY_COUNTERS[way]('exec')) expect(counterValue(m, n, labels), `${n}${JSON.stringify(labels)}`).toBe(delta);
      const rec = await storedRecording(fullDir, audit.recordingId);
      expect(rec.summary).toMatchObject({ record: 'full', exitCode: 0 });
      expect(rec.events.filter((e) => e[1] === 'i').map((e) => e[2]).join('')).toBe('typed-secret\n');
      expect(outputOf(rec.events)).toBe('got typed-secret\r\n');
      expectValidAsciicastV2(rec.text);
    } finally {
      await full.close();
    }
  });

  it('kubectl 1.33 forced onto SPDY: recorded on the passthrough', async () => {
    const r = await runKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo hi; exit 0'], { kubeconfig: translating.kubeconfig, env: { ...FORCE_SPDY_ENV }, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(0);
    const audit = await nextAudit(translating);
    expect(audit.path).toBe('passthrough');
    const rec = await storedRecording(translating.dir, audit.recordingId);
    expect(rec.events.map((e) => e[2])).toEqual(['hi\r\n', 'exit 0']);
  });

  it('WebSocket v4 passthrough (@kubernetes/client-node, translation gate off): recorded by the WebSocket tap', async () => {
    const policy = writeText(join(work, 'ws.yaml'), policyYaml({ match: '{pods: [demo]}' }));
    const wsDir = join(work, 'recordings-ws');
    // client-node offers v5 first: a 1.29 dev cluster (no v5 at its apiserver or kubelet) settles on v4.
    const older = await startDevCluster({ dataDir: join(work, 'pods-1.29'), apiserverVersion: '1.29' });
    const gateOff = await startRecordingProxy({ upstream: older.url, sessionRecordingConfig: policy, sessionRecordingDir: wsDir, featureGates: 'TranslateStreamCloseWebsocketRequests=false' });
    try {
      const kc = new KubeConfig();
      kc.loadFromOptions({ clusters: [{ name: 'p', server: gateOff.url, skipTLSVerify: true }], users: [{ name: 'p' }], contexts: [{ name: 'p', cluster: 'p', user: 'p' }], currentContext: 'p' });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      const sink = (into: Buffer[]) => new Writable({ write: (c: Buffer, _e, cb) => (into.push(Buffer.from(c)), cb()) });
      let status: V1Status | undefined;
      const ws = (await new Exec(kc).exec('default', 'demo', 'demo', ['sh', '-c', 'echo over-ws; echo err >&2; exit 5'], sink(out), sink(err), null, false, (s) => (status = s))) as unknown as { protocol: string; once(e: 'close', l: () => void): void };
      expect(ws.protocol).toBe('v4.channel.k8s.io');
      await new Promise<void>((r) => ws.once('close', () => r()));
      expect(Buffer.concat(out).toString()).toBe('over-ws\n');
      expect(status?.reason).toBe('NonZeroExitCode');
      const audit = await gateOff.audit(1);
      expect(audit).toMatchObject({ path: 'passthrough', clientProtocol: 'websocket', recordingId: expect.any(String) });
      const rec = await storedRecording(wsDir, audit.recordingId);
      expect(rec.summary).toMatchObject({ exitCode: 5, result: 'complete' });
      expect(outputOf(rec.events)).toBe(`over-ws\r\n${STDERR_START}err\r\n${STDERR_END}`);
      expect(gateOff.lines.filter((l) => l.msg === 'upgraded connection closed').at(-1)).toMatchObject({ copy: 'js' });
    } finally {
      await gateOff.close();
      await older.close();
    }
  });

  it('SPDY passthrough: a 50 MB cat arrives byte-identical, is recorded whole, with the splice(2) fast path off', async () => {
    const { rp, dir, kubeconfig } = translating;
    const bytes = 50 * MB;
    // `yes` output: the source is known exactly, so both sides can be hashed.
    const line = 'abcdefghijklmnopqrstuvwxyz0123456789\n';
    const h = createHash('sha256');
    const block = Buffer.from(line.repeat(Math.ceil(bytes / line.length))).subarray(0, bytes);
    h.update(block);
    const source = h.digest('hex');
    const cmd = `yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c ${bytes}`;
    const r = await runKubectl(findKubectl('1.27'), ['exec', 'demo', '--', 'sh', '-c', cmd], { kubeconfig, hashStdout: true, timeoutMs: 120_000 });
    expect(r.code, summary(r)).toBe(0);
    expect(r.stdoutDigest).toEqual({ sha256: source, byteLength: bytes });
    const audit = await nextAudit(translating);
    const rec = await storedRecording(dir, audit.recordingId, 60_000);
    expect(rec.summary).toMatchObject({ result: 'complete', recordedBytes: bytes, exitCode: 0 });
    // The cast holds every byte (LF written as CRLF for a non-tty session).
    const out = outputOf(rec.events);
    const lf = block.reduce((n, b) => (b === 0x0a ? n + 1 : n), 0);
    expect(out.length).toBe(bytes + lf);
    expect(createHash('sha256').update(out.replaceAll('\r\n', '\n')).digest('hex')).toBe(source);
    const closed = rp.lines.filter((l) => l.msg === 'upgraded connection closed');
    expect(closed.at(-1)).toMatchObject({ copy: 'js' });
    expect(closed.at(-1)!.toClient).toBeGreaterThan(bytes);
    // The same session unrecorded moves to the kernel copy (when the addon is loaded here).
    const plain = await runKubectl(findKubectl('1.27'), ['exec', 'unrecorded', '--', 'sh', '-c', cmd], { kubeconfig, hashStdout: true, timeoutMs: 120_000 });
    expect(plain.stdoutDigest).toEqual({ sha256: source, byteLength: bytes });
    const plainAudit = await nextAudit(translating);
    expect(plainAudit.recordingId).toBeUndefined();
    const plainClosed = rp.lines.filter((l) => l.msg === 'upgraded connection closed').at(-1)!;
    expect(plainClosed.copy).toBe(loadNativeSplice() ? 'native' : 'js');
  }, 240_000);

  it.each<{ version: KubectlVersion; path: string; target: () => Target; proxyType?: string }>([
    { version: '1.27', path: 'passthrough', target: () => translating },
    // The proxy's tunnel (translating proxy) and the tunnel passed through (the default).
    { version: '1.33', path: 'tunnel', target: () => translating, proxyType: 'tunneled_at_apiserver' },
    { version: '1.33', path: 'passthrough', target: () => passing, proxyType: 'proxied_to_upstream' },
  ])('kubectl $version port-forward ($path, $proxyType): a metadata record with the ports and bytes, no cast', async ({ version, path, target, proxyType }) => {
    const t = target();
    const { kubeconfig, dir } = t;
    const ways = (m: string): number => counterValue(m, 'apiserver_websocket_streaming_requests_total', { subresource: 'portforward', ...(proxyType ? { proxy_type: proxyType } : {}) });
    const before = ways(await metrics(t));
    const fixture = await startBytesServer();
    try {
      const k = startKubectl(findKubectl(version), ['port-forward', 'pod/demo', `:${fixture.port}`], { kubeconfig, cwd: work });
      try {
        const m = await k.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${fixture.port}`), 30_000);
        const got = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/100000?seed=3`);
        expect(got.byteLength).toBe(100_000);
      } finally {
        await k.stop();
      }
      const audit = await nextAudit(t);
      expect(audit).toMatchObject({ subresource: 'portforward', path, recordingId: expect.any(String) });
      expect(ways(await metrics(t)) - before).toBe(proxyType ? 1 : 0);
      const rec = await storedRecording(dir, audit.recordingId);
      expect(rec.summary).toMatchObject({ subresource: 'portforward', pod: 'demo', ports: [String(fixture.port)], record: 'metadata', result: 'complete' });
      expect(rec.summary.bytesToClient).toBeGreaterThan(100_000);
      expect(rec.text).toBe('');
      expect(readdirSync(dir)).not.toContain(`${audit.recordingId}.cast`);
    } finally {
      await fixture.close();
    }
  });

  it('enforce with an unusable sink: refused with 503 "session recording unavailable" before any upgrade, counted', async () => {
    const blocked = join(work, 'blocked');
    mkdirSync(blocked);
    // A file where the directory should be: the sink cannot open (root ignores modes, not ENOTDIR).
    const sinkDir = join(blocked, 'not-a-dir');
    writeText(sinkDir, 'x');
    chmodSync(sinkDir, 0o600);
    const policy = writeText(join(work, 'enforce.yaml'), policyYaml({ enforce: true }));
    const strict = await startRecordingProxy({ upstream: cluster.url, sessionRecordingConfig: policy, sessionRecordingDir: sinkDir });
    try {
      const kc = join(work, 'kubeconfig-strict');
      writeKubeconfig(kc, { server: strict.url, name: 'strict' });
      const execsBefore = cluster.requests.filter((q) => q.url.includes('/exec?')).length;
      for (const version of ['1.27', '1.33'] as const) {
        const r = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'echo', 'should-not-run'], { kubeconfig: kc, timeoutMs: 30_000 });
        expect(r.code, summary(r)).toBe(1);
        expect(r.stdout.toString()).not.toContain('should-not-run');
        expect(r.stderr).toContain('session recording unavailable');
      }
      const m = await (await fetch(`${strict.url}/metrics`)).text();
      // kubectl 1.33 tries WebSocket, then SPDY: every attempt refused before the upgrade.
      expect(counterValue(m, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'start' })).toBeGreaterThanOrEqual(2);
      expect(counterValue(m, 'kube_stream_proxy_session_recording_sink_errors_total', { sink: 'directory', phase: 'open' })).toBeGreaterThanOrEqual(2);
      expect(counterValue(m, 'kube_stream_proxy_streaming_requests_total', { outcome: 'recording_unavailable' })).toBeGreaterThanOrEqual(2);
      expect(strict.audits().every((a) => a.statusCode === 503 && a.outcome === 'recording_unavailable')).toBe(true);
      // Nothing reached the pod: the dev cluster saw no exec request.
      expect(cluster.requests.filter((q) => q.url.includes('/exec?')).length).toBe(execsBefore);
    } finally {
      await strict.close();
    }
  });
});
