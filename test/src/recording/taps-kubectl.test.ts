/**
 * The taps on real sessions: kubectl 1.27 (SPDY/3.1) and kubectl 1.33 (WebSocket v5) run
 * `exec -it demo -- sh` under tmux through a recording relay (a tee in front of the dev cluster, or
 * of the proxy translating v5, that feeds both directions to the tap as the proxy's splice relay
 * will). The cast must hold the session (header size = the first resize, `r` on resize, the output,
 * the exit status), the relayed bytes must be unchanged (sha256 taken before the tap saw them, and
 * again after), the same bytes re-fed in other splits must give the same events, and
 * `kubectl-stream-proxy sessions play` under tmux must end on the screen the live session showed.
 * Non-tty exec: stdout and stderr apart, the exit code.
 *
 * Needs `npm run build` first (sessions play runs bin/kube-stream-proxy.js).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { resolveConfig } from '../../../src/config.js';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../../dev/kubeconfig.js';
import { Registry } from 'prom-client';
import { CAST_HEADER_KEY, STDERR_END, STDERR_START } from '../../../src/recording/asciicast.js';
import type { RelayObserver } from '../../../src/recording/observer.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { relayObserverFor } from '../../../src/recording/relay-observer.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { newRecordingId } from '../../../src/recording/sink.js';
import { writeSummary } from '../../../src/recording/cast-file.js';
import { prepareRecordingDir } from '../../../src/recording/directory-sink.js';
import { writeFile } from 'node:fs/promises';
import { startServer, type RunningServer } from '../../../src/server.js';
import { FORCE_SPDY_ENV, findKubectl, kubectlE2eSkipReason, kubectlEnv, runKubectl, startKubectl, summary, type KubectlVersion } from '../../helpers/kubectl.js';
import { downloadDigest, startBytesServer } from '../../helpers/http-fixture.js';
import { PortForwardRecording } from '../../../src/recording/port-forward-recording.js';
import type { RecordingSummary } from '../../../src/recording/sink.js';
import { expectShellFollowsResize, hasLine, startTmux } from '../../helpers/tty.js';
import { headValue, MemoryUpload, requestQuery, startRecordingRelay, type RecordingRelay, type RelayedConnection } from './recording-fixture.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const CLI = join(ROOT, 'bin/kube-stream-proxy.js');

interface Recorded {
  recording: SessionRecording;
  upload: MemoryUpload;
  observer: RelayObserver;
  protocol: { kind: 'spdy' | 'websocket'; subprotocol: string };
}

/** A relay observer that records the exec it sees (the policy's job is not under test here). */
function recorderFor(sessions: Recorded[], enforce = false) {
  return (requestHead: string, responseHead: string): RelayObserver | undefined => {
    const q = requestQuery(requestHead);
    if (!/\/exec\?/.test(requestHead.split('\n')[0]!)) return undefined;
    const ws = headValue(responseHead, 'Sec-WebSocket-Protocol');
    const protocol = ws !== undefined ? { kind: 'websocket' as const, subprotocol: ws } : { kind: 'spdy' as const, subprotocol: headValue(responseHead, 'X-Stream-Protocol-Version') ?? '' };
    const upload = new MemoryUpload();
    const id = newRecordingId();
    const recording = new SessionRecording({
      identity: { sessionId: id, namespace: 'default', pod: 'demo', subresource: 'exec', command: q.getAll('command'), tty: q.get('tty') === 'true' || q.get('tty') === '1', record: 'output' },
      enforce,
      upload,
      sink: 'directory',
      metrics: createRecordingMetrics(new Registry()),
      log: { warn: () => undefined },
      maxOutputBytes: 0,
    });
    const observer = relayObserverFor(recording, protocol);
    sessions.push({ recording, upload, observer, protocol });
    return observer;
  };
}

function sha(chunks: readonly Buffer[]): string {
  const h = createHash('sha256');
  for (const c of chunks) h.update(c);
  return h.digest('hex');
}

/** Re-feed a connection's bytes to a fresh tap in `size`-byte pieces; returns the cast events. */
async function refeed(c: RelayedConnection, protocol: Recorded['protocol'], tty: boolean, size: number): Promise<Array<[number, string, string]>> {
  const upload = new MemoryUpload();
  const rec = new SessionRecording({
    identity: { sessionId: newRecordingId(), namespace: 'default', pod: 'demo', subresource: 'exec', command: ['sh'], tty, record: 'output' },
    enforce: false,
    upload,
    sink: 'directory',
    metrics: createRecordingMetrics(new Registry()),
    log: { warn: () => undefined },
    maxOutputBytes: 0,
  });
  const tap = relayObserverFor(rec, protocol);
  // Interleave as read (both directions in capture order is not kept; per direction order is what matters
  // for the events of each stream, and the client's header blocks come before the server's data on them).
  const split = (chunks: Buffer[]): Buffer[] => {
    const all = Buffer.concat(chunks);
    const out: Buffer[] = [];
    for (let i = 0; i < all.length; i += size) out.push(all.subarray(i, i + size));
    return out;
  };
  for (const b of split(c.fromClient)) tap.fromClient(b);
  // Header blocks inflate asynchronously; the tap queues behind them in order.
  for (const b of split(c.fromUpstream)) tap.fromUpstream(b);
  tap.close();
  await rec.whenFinished();
  return upload.parsed().events.filter((e) => e[1] !== 'r');
}

const skip = kubectlE2eSkipReason();

describe.skipIf(skip !== undefined)('recording taps on real kubectl sessions', () => {
  let work: string;
  let cluster: DevCluster;
  let proxy: RunningServer;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-taps-'));
    cluster = await startDevCluster({ dataDir: join(work, 'pods') });
    proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: cluster.url }));
  });
  afterAll(async () => {
    await proxy?.close();
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const targetOf = (url: string) => ({ host: '127.0.0.1', port: Number(new URL(url).port) });

  describe.each<{ name: string; version: KubectlVersion; env: Record<string, string>; via: 'cluster' | 'proxy'; protocol: string }>([
    { name: 'kubectl 1.27 exec -it (SPDY/3.1, passthrough)', version: '1.27', env: {}, via: 'cluster', protocol: 'v4.channel.k8s.io' },
    { name: 'kubectl 1.33 exec -it (WebSocket v5)', version: '1.33', env: {}, via: 'proxy', protocol: 'v5.channel.k8s.io' },
  ])('$name', ({ version, env, via, protocol }) => {
    let relay: RecordingRelay;
    const sessions: Recorded[] = [];
    afterAll(async () => relay?.close());

    it('records the terminal session; bytes unchanged; sessions play ends on the live screen', async () => {
      relay = await startRecordingRelay(targetOf(via === 'cluster' ? cluster.url : proxy.url), recorderFor(sessions));
      const kubeconfig = join(work, `kubeconfig-${version}`);
      writeKubeconfig(kubeconfig, { server: relay.url, name: 'relay' });
      const bin = findKubectl(version);
      const tty = await startTmux({ argv: [bin, '--kubeconfig', kubeconfig, 'exec', '-it', 'demo', '--', 'sh'], env: kubectlEnv(kubeconfig, env), width: 100, height: 30, cwd: work });
      let live: string;
      try {
        await expectShellFollowsResize(tty);
        // Clear first: what the local terminal echoed before kubectl switched it to raw mode is not the remote's.
        await tty.sendLine(`printf '\\033[H\\033[2J'; echo done-$((40+2)); stty size; printf 'a\\tb\\tc\\n'`);
        live = await tty.waitForScreen((sc) => hasLine('done-42')(sc) && hasLine('a       b       c')(sc) && /\n[#$]$/.test(sc), 15_000);
        await tty.sendLine('exit 3');
        expect(await tty.waitForExit(15_000)).toBe(3);
      } finally {
        await tty.kill();
      }
      const conn = relay.connections.find((c) => c.observer !== undefined)!;
      await conn.closed;
      const s = sessions[0]!;
      expect(s.protocol.subprotocol).toBe(protocol);
      const summaryOf = await s.recording.whenFinished();
      expect(summaryOf.exitCode).toBe(3);
      expect(summaryOf.result).toBe('complete');
      const { header, events } = s.upload.parsed();
      expect([header.version, header.width, header.height]).toEqual([2, 100, 30]);
      expect(header.title).toBe('default/demo: sh');
      expect(header[CAST_HEADER_KEY].tty).toBe(true);
      expect(events.filter((e) => e[1] === 'r').map((e) => e[2])).toContain('120x40');
      const output = events.filter((e) => e[1] === 'o').map((e) => e[2]).join('');
      for (const want of ['READY-42', '30 100', '40 120', 'done-42']) expect(output).toContain(want);
      expect(events.at(-1)).toEqual([expect.any(Number), 'm', 'exit 3']);
      // The tap never changed a relayed byte: hashes at receipt equal the hashes of the same buffers now.
      expect(sha(conn.fromUpstream)).toBe(conn.upstreamSha256AtReceipt());
      expect(sha(conn.fromClient)).toBe(conn.clientSha256AtReceipt());
      // The same bytes in other splits: the same output (times aside).
      const strip = (ev: Array<[number, string, string]>) => ev.map((e) => [e[1], e[2]]);
      const once = strip(events.filter((e) => e[1] !== 'r'));
      const joined = (ev: Array<[number, string, string]>) => strip(ev).filter((e) => e[0] === 'o').map((e) => e[1]).join('');
      for (const size of [1, 7, 4096]) {
        const again = await refeed(conn, s.protocol, true, size);
        expect(joined(again)).toBe(joined(events));
        expect(strip(again).filter((e) => e[0] === 'm')).toEqual(once.filter((e) => e[0] === 'm'));
      }
      // Play it back under tmux at the final size: the screen ends as the live one was.
      const dir = join(work, `recordings-${version}`);
      await prepareRecordingDir(dir);
      await writeFile(join(dir, `${s.recording.id}.cast`), s.upload.text, { mode: 0o600 });
      await writeSummary(dir, summaryOf);
      // The player runs under a shell that stays, so the pane does not die (tmux scrolls a dead pane's
      // screen up by one line to print "Pane is dead").
      const play = `${process.execPath} ${CLI} sessions play ${s.recording.id} --dir ${dir} --idle-time-limit 0.05; echo play-exit=$?; sleep 600`;
      const player = await startTmux({ argv: ['sh', '-c', play], env: { PATH: process.env.PATH }, width: 120, height: 40, cwd: work });
      try {
        const played = (await player.waitForScreen(hasLine('play-exit=0'), 30_000)).split('\n');
        const liveLines = live.split('\n');
        // The live screen was taken at the prompt after done-42; the playback goes on with "exit 3" typed there.
        expect(played.slice(0, liveLines.length - 1)).toEqual(liveLines.slice(0, -1));
        expect(played[liveLines.length - 1]).toBe(`${liveLines.at(-1)} exit 3`);
        expect(played[liveLines.length]).toBe('play-exit=0');
      } finally {
        await player.kill();
      }
    });
  });

  it('kubectl 1.27 exec without a tty: stdout and stderr apart (stderr in SGR red), the exit code', async () => {
    const sessions: Recorded[] = [];
    const relay = await startRecordingRelay(targetOf(cluster.url), recorderFor(sessions));
    try {
      const kubeconfig = join(work, 'kubeconfig-nontty');
      writeKubeconfig(kubeconfig, { server: relay.url, name: 'relay' });
      const r = await runKubectl(findKubectl('1.27'), ['exec', 'demo', '--', 'sh', '-c', 'echo out; echo err >&2; exit 4'], { kubeconfig, timeoutMs: 30_000 });
      expect(r.code, summary(r)).toBe(4);
      const conn = relay.connections.find((c) => c.observer !== undefined)!;
      await conn.closed;
      const s = sessions[0]!;
      const sum = await s.recording.whenFinished();
      expect(sum.exitCode).toBe(4);
      const { header, events } = s.upload.parsed();
      expect([header.width, header.height, header.command]).toEqual([80, 24, 'sh -c echo out; echo err >&2; exit 4']);
      const out = events.filter((e) => e[1] === 'o').map((e) => e[2]);
      expect(out).toContain('out\r\n');
      expect(out).toContain(`${STDERR_START}err\r\n${STDERR_END}`);
      expect(events.at(-1)![2]).toBe('exit 4');
    } finally {
      await relay.close();
    }
  });

  it('kubectl 1.33 forced onto SPDY: the same', async () => {
    const sessions: Recorded[] = [];
    const relay = await startRecordingRelay(targetOf(cluster.url), recorderFor(sessions));
    try {
      const kubeconfig = join(work, 'kubeconfig-133-spdy');
      writeKubeconfig(kubeconfig, { server: relay.url, name: 'relay' });
      const r = await runKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo hi; exit 0'], { kubeconfig, env: { ...FORCE_SPDY_ENV }, timeoutMs: 30_000 });
      expect(r.code, summary(r)).toBe(0);
      const conn = relay.connections.find((c) => c.observer !== undefined)!;
      await conn.closed;
      const sum = await sessions[0]!.recording.whenFinished();
      expect(sum.exitCode).toBe(0);
      expect(sessions[0]!.upload.parsed().events.map((e) => e[2])).toEqual(['hi\r\n', 'exit 0']);
    } finally {
      await relay.close();
    }
  });

  it('kubectl 1.27 port-forward (SPDY): a metadata record with the ports and the bytes each way', async () => {
    const fixture = await startBytesServer();
    const records: RecordingSummary[] = [];
    const sink = { kind: 'directory' as const, open: async () => { throw new Error('unused'); }, writeRecord: async (s: RecordingSummary) => void records.push(s), close: async () => undefined };
    let pf: PortForwardRecording | undefined;
    const relay = await startRecordingRelay(targetOf(cluster.url), (req) => {
      if (!/\/portforward/.test(req.split('\n')[0]!)) return undefined;
      pf = new PortForwardRecording({ id: newRecordingId(), namespace: 'default', pod: 'demo', ports: [], enforce: false }, sink, createRecordingMetrics(new Registry()), { warn: () => undefined });
      return relayObserverFor(pf, { kind: 'spdy', subprotocol: 'portforward.k8s.io' });
    });
    try {
      const kubeconfig = join(work, 'kubeconfig-pf');
      writeKubeconfig(kubeconfig, { server: relay.url, name: 'relay' });
      const k = startKubectl(findKubectl('1.27'), ['port-forward', 'pod/demo', `:${fixture.port}`], { kubeconfig, cwd: work });
      try {
        const m = await k.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${fixture.port}`), 30_000);
        const got = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/100000?seed=3`);
        expect(got.byteLength).toBe(100_000);
      } finally {
        await k.stop();
      }
      const conn = relay.connections.find((c) => c.observer !== undefined)!;
      await conn.closed;
      await pf!.finish();
      expect(records).toHaveLength(1);
      expect(records[0]).toMatchObject({ subresource: 'portforward', namespace: 'default', pod: 'demo', ports: [String(fixture.port)], record: 'metadata', result: 'complete' });
      expect(records[0]!.bytesToClient).toBeGreaterThan(100_000);
      expect(records[0]!.bytesToUpstream).toBeGreaterThan(0);
    } finally {
      await relay.close();
      await fixture.close();
    }
  });

  describe.each<{ name: string; version: KubectlVersion; env: Record<string, string>; via: 'cluster' | 'proxy' }>([
    { name: 'kubectl 1.27 (SPDY passthrough)', version: '1.27', env: {}, via: 'cluster' },
    { name: 'kubectl 1.33 (WebSocket v5)', version: '1.33', env: {}, via: 'proxy' },
  ])('enforce: the sink fails mid-session, $name ends within 1 s with the Status', ({ version, env, via }) => {
    it('kubectl exits 1 printing "session recording unavailable"', async () => {
      const sessions: Recorded[] = [];
      const relay = await startRecordingRelay(targetOf(via === 'cluster' ? cluster.url : proxy.url), recorderFor(sessions, true));
      try {
        const kubeconfig = join(work, `kubeconfig-enforce-${version}`);
        writeKubeconfig(kubeconfig, { server: relay.url, name: 'relay' });
        const k = startKubectl(findKubectl(version), ['exec', 'demo', '--', 'sh', '-c', 'while true; do echo tick; sleep 0.05; done'], { kubeconfig, env, cwd: work });
        const closed = new Promise<{ code: number | null; at: number }>((r) => k.child.once('close', (code) => r({ code, at: Date.now() })));
        try {
          await k.waitForOutput(/tick/, 30_000);
          const failedAt = Date.now();
          sessions[0]!.upload.fail(new Error('ENOSPC: no space left on device'));
          const exit = await closed;
          expect(exit.code, k.output().stderr).toBe(1);
          expect(k.output().stderr).toContain('session recording unavailable');
          expect(exit.at - failedAt).toBeLessThan(1000);
        } finally {
          await k.stop('SIGKILL', 1000);
        }
        const conn = relay.connections.find((c) => c.observer !== undefined)!;
        await conn.closed;
        expect((await sessions[0]!.recording.whenFinished()).result).toBe('terminated');
      } finally {
        await relay.close();
      }
    });
  });
});
