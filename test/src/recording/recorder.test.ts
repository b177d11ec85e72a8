/**
 * The remote recorder end to end: two replicas (each its own RecorderSink and token) stream
 * recordings to one recorder (`kube-stream-proxy recorder`, the built CLI, a real process); the
 * index keeps who uploaded each and a sha256 the store verifies; `sessions list|export --recorder`
 * read them; viewers need a token and a configured group (401 / 403 otherwise); a running session
 * is followed live (SSE); SIGKILL of the recorder mid-session ends an enforced recording within 1 s
 * and lets a fail-open one resume on the restarted recorder with a gap marker; retention deletes old ones.
 * A recording belongs to the replica that created it (also after a recorder restart), is immutable
 * once its summary is stored (409), takes who and what from its cast header, and a corrupt index
 * entry is listed as `invalid` instead of breaking the list (issue 31, finding 3).
 *
 * Needs `npm run build` (the recorder and `sessions` run from bin/kube-stream-proxy.js).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess, execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { AsciicastWriter, type CastIdentity } from '../../../src/recording/asciicast.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { RecorderSink } from '../../../src/recording/recorder-sink.js';
import { RecordingStore } from '../../../src/recording/recording-store.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { newRecordingId, type RecordingUpload } from '../../../src/recording/sink.js';
import { counterValue } from '../../helpers/metrics.js';

const execFileP = promisify(execFile);
const CLI = join(resolve(import.meta.dirname, '../../..'), 'bin/kube-stream-proxy.js');

interface Recorder {
  url: string;
  child: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

async function startRecorderProcess(dir: string, work: string, port = 0, extra: string[] = []): Promise<Recorder> {
  const child = spawn(process.execPath, [CLI, 'recorder', '--listen', `127.0.0.1:${port}`, '--dir', dir, '--ingest-token-file', join(work, 'ingest.csv'), '--viewer-token-file', join(work, 'viewers.csv'), '--viewer-group', 'auditors', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+),/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => reject(new Error(`recorder exited ${code}: ${out}`)));
  });
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  return { url, child, stop: async (signal = 'SIGTERM') => (child.kill(signal), exited) };
}

const metricsOf = new WeakMap<Registry, ReturnType<typeof createRecordingMetrics>>();
function metricsFor(registry: Registry): ReturnType<typeof createRecordingMetrics> {
  let m = metricsOf.get(registry);
  if (!m) metricsOf.set(registry, (m = createRecordingMetrics(registry)));
  return m;
}

const warnings: string[] = [];
function recording(id: string, upload: RecordingUpload, enforce: boolean, registry = new Registry(), maxBufferBytes?: number): SessionRecording {
  return new SessionRecording({
    identity: { sessionId: id, user: 'alice', namespace: 'default', pod: 'demo', subresource: 'exec', command: ['sh'], tty: true, record: 'output' },
    enforce,
    upload,
    sink: 'recorder',
    metrics: metricsFor(registry),
    log: { warn: (obj, msg) => warnings.push(`${msg} ${JSON.stringify(obj)}`) },
    maxOutputBytes: 0,
    ...(maxBufferBytes !== undefined ? { maxBufferBytes } : {}),
  });
}

async function open(sink: RecorderSink, enforce: boolean, registry?: Registry, maxBufferBytes?: number): Promise<SessionRecording> {
  const id = newRecordingId();
  const upload = await sink.open(id, { enforce });
  return recording(id, upload, enforce, registry, maxBufferBytes);
}

async function get(url: string, token?: string): Promise<{ status: number; body: string }> {
  const r = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: r.status, body: await r.text() };
}

async function until(cond: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('remote recorder', () => {
  let work: string;
  let dir: string;
  let recorder: Recorder;
  const ep = (token: string, url = recorder.url) => {
    writeFileSync(join(work, `${token}.token`), `${token}\n`);
    return { url: new URL(url), tokenFile: join(work, `${token}.token`) };
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-recorder-'));
    dir = join(work, 'recordings');
    writeFileSync(join(work, 'ingest.csv'), 'replica-token-a,proxy-a,\nreplica-token-b,proxy-b,\n');
    writeFileSync(join(work, 'viewers.csv'), 'viewer-token,carol,,"auditors"\nnosy-token,mallory,,"developers"\n');
    recorder = await startRecorderProcess(dir, work);
  });
  afterAll(async () => {
    await recorder?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('two replicas to one recorder: stored with who uploaded, verified, listed and exported by the CLI', async () => {
    const a = new RecorderSink(ep('replica-token-a'));
    const b = new RecorderSink(ep('replica-token-b'));
    const ra = await open(a, false);
    const rb = await open(b, true);
    ra.resize(100, 30);
    rb.resize(90, 20);
    ra.output('stdout', Buffer.from('from replica a\r\n'));
    rb.output('stdout', Buffer.from('from replica b\r\n'));
    ra.exit({ exitCode: 0 });
    rb.exit({ exitCode: 2 });
    const [sa, sb] = await Promise.all([ra.finish(), rb.finish()]);
    expect([sa.result, sb.result]).toEqual(['complete', 'complete']);
    const store = new RecordingStore(dir);
    const ea = await store.get(ra.id);
    expect(ea).toMatchObject({ state: 'finished', recordedBy: 'proxy-a', exitCode: 0, user: 'alice' });
    expect((await store.get(rb.id))?.recordedBy).toBe('proxy-b');
    expect((await store.verify(ra.id)).ok).toBe(true);
    writeFileSync(join(work, 'viewer-token.token'), 'viewer-token\n');
    const listed = await execFileP(process.execPath, [CLI, 'sessions', 'list', '--recorder', recorder.url, '--token-file', join(work, 'viewer-token.token')]);
    expect(listed.stdout.split('\n')[0]).toMatch(/^ID\s+USER\s+CLUSTER\/NAMESPACE\/POD\s+COMMAND\s+START\s+DURATION\s+EXIT\s+BYTES\s+RESULT$/);
    expect(listed.stdout).toContain(ra.id);
    expect(listed.stdout).toMatch(new RegExp(`${rb.id}\\s+alice\\s+-/default/demo\\s+sh\\s+\\S+\\s+\\S+s\\s+2\\s+`));
    const exported = await execFileP(process.execPath, [CLI, 'sessions', 'export', ra.id, '--recorder', recorder.url, '--token-file', join(work, 'viewer-token.token')]);
    const lines = exported.stdout.split('\n');
    expect(JSON.parse(lines[0]!)).toMatchObject({ version: 2, width: 100, height: 30 });
    expect(JSON.parse(lines[1]!).slice(1)).toEqual(['o', 'from replica a\r\n']);
  });

  it('viewers: 401 without a token, 403 outside the configured group, replica tokens are not viewer tokens', async () => {
    expect((await get(`${recorder.url}/api/v1/sessions`)).status).toBe(401);
    expect((await get(`${recorder.url}/sessions/`)).status).toBe(401);
    expect((await get(`${recorder.url}/api/v1/sessions`, 'replica-token-a')).status).toBe(401);
    expect((await get(`${recorder.url}/api/v1/sessions`, 'nosy-token')).status).toBe(403);
    expect((await get(`${recorder.url}/sessions/`, 'nosy-token')).status).toBe(403);
    const ok = await get(`${recorder.url}/api/v1/sessions`, 'viewer-token');
    expect(ok.status).toBe(200);
    const id = (JSON.parse(ok.body) as { items: Array<{ id: string }> }).items[0]!.id;
    expect((await get(`${recorder.url}/api/v1/sessions/${id}/cast`, 'nosy-token')).status).toBe(403);
    expect((await get(`${recorder.url}/api/v1/sessions/${id}/cast`, 'viewer-token')).status).toBe(200);
    // Uploading needs a replica token.
    const put = await fetch(`${recorder.url}/api/v1/ingest/${newRecordingId()}`, { method: 'PUT', headers: { authorization: 'Bearer viewer-token' }, body: 'x' });
    expect(put.status).toBe(401);
  });

  it('a running session is followed live: the terminal so far, then its events, then done', async () => {
    const sink = new RecorderSink(ep('replica-token-a'));
    const rec = await open(sink, false);
    rec.resize(80, 24);
    rec.output('stdout', Buffer.from('before\r\n'));
    await until(async () => (await get(`${recorder.url}/api/v1/sessions/${rec.id}`, 'viewer-token')).status === 200, 5000, 'the header on the recorder');
    const messages: string[] = [];
    let done = false;
    const req = request(`${recorder.url}/api/v1/sessions/${rec.id}/live`, { headers: { authorization: 'Bearer viewer-token' } }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (t: string) => messages.push(t));
      res.on('end', () => (done = true));
    });
    req.end();
    await until(() => messages.join('').includes('"init"'), 5000, 'the reset');
    rec.output('stdout', Buffer.from('after\r\n'));
    await until(() => messages.join('').includes('after'), 5000, 'the live event');
    rec.exit({ exitCode: 0 });
    await rec.finish();
    await until(() => done, 5000, 'done');
    const text = messages.join('');
    const reset = JSON.parse(/^data: (\{.*\})$/m.exec(text)![1]!) as { cols: number; rows: number; init: string };
    expect(reset).toMatchObject({ cols: 80, rows: 24, init: 'before\r\n' });
    expect(text).toMatch(/^data: \[[\d.]+, "o", "after\\r\\n"\]$/m);
    expect(text).toContain('event: done');
  });

  it('SIGKILL mid-session: enforce fails within 1 s; fail open resumes on the restarted recorder with a gap marker', async () => {
    const registry = new Registry();
    const sinkE = new RecorderSink(ep('replica-token-a'));
    const sinkO = new RecorderSink(ep('replica-token-b'), { reconnectWindowMs: 20_000 });
    const enforced = await open(sinkE, true, registry);
    const open_ = await open(sinkO, false, registry, 4096);
    for (const r of [enforced, open_]) {
      r.resize(80, 24);
      r.output('stdout', Buffer.from('first\r\n'));
    }
    await until(async () => (await get(`${recorder.url}/api/v1/sessions/${open_.id}`, 'viewer-token')).status === 200, 5000, 'uploads to arrive');
    const port = Number(new URL(recorder.url).port);
    const killedAt = Date.now();
    await recorder.stop('SIGKILL');
    await until(() => enforced.fatal.aborted, 1000, 'the enforced recording to fail');
    expect(Date.now() - killedAt).toBeLessThan(1000);
    expect((enforced.fatal.reason as Error).message).toBe('session recording unavailable: the recording sink failed');
    // The fail-open session goes on while the recorder is away: more than the buffer is dropped.
    open_.output('stdout', Buffer.alloc(8000, 'x'));
    expect(open_.fatal.aborted).toBe(false);
    recorder = await startRecorderProcess(dir, work, port);
    // The upload resumes; later output is recorded again after a gap marker.
    open_.output('stdout', Buffer.from('after the restart\r\n'));
    // The upload resumes on the restarted recorder (the replica retries every 500 ms).
    let seen = '';
    await until(async () => (seen = (await get(`${recorder.url}/api/v1/sessions/${open_.id}/cast`, 'viewer-token')).body).includes('after the restart'), 15_000, 'the resumed upload').catch((e: Error) => {
      throw new Error(`${e.message}: ${seen.slice(-300)}\n${warnings.join('\n')}`);
    });
    open_.exit({ exitCode: 0 });
    const s = await open_.finish();
    expect(s.result, warnings.join('\n')).toBe('gap');
    const cast = await (await fetch(`${recorder.url}/api/v1/sessions/${open_.id}/cast`, { headers: { authorization: 'Bearer viewer-token' } })).text();
    expect(cast).toContain('first\\r\\n');
    expect(cast).toMatch(/"m", "recording gap: \d+ bytes of events dropped \(the recording sink was too slow\)"/);
    expect(cast).toContain('after the restart');
    expect((await new RecordingStore(dir).verify(open_.id)).ok).toBe(true);
    const t = await registry.metrics();
    expect(counterValue(t, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'mid_session' })).toBe(1);
    expect(counterValue(t, 'kube_stream_proxy_session_recordings_dropped_total', { reason: 'sink_slow' })).toBe(1);
    await enforced.finish();
  });

  it('retention: recordings older than --retention are deleted, newer ones kept', async () => {
    const store = new RecordingStore(dir);
    const before = (await store.list()).length;
    expect(before).toBeGreaterThan(0);
    expect(await store.removeOlderThan(3_600_000, Date.now())).toEqual([]);
    const removed = await store.removeOlderThan(1, Date.now() + 10_000);
    expect(removed.length).toBe(before);
    expect(await store.list()).toEqual([]);
  });
});

/** What a replica sends: a real cast (AsciicastWriter) in pieces, so a test can upload it in parts. */
function castParts(id: string, startedAtMs: number, identity: Partial<CastIdentity> = {}): { first: string; rest: string } {
  const pieces: string[] = [];
  const w = new AsciicastWriter(
    { sessionId: id, user: 'alice', groups: ['sre'], cluster: 'one', namespace: 'default', pod: 'demo', container: 'main', subresource: 'exec', command: ['sh', '-c', 'ls'], tty: false, record: 'output', ...identity },
    (l) => pieces.push(l.toString()),
    { startedAtMs, nativeEscape: null },
  );
  w.output('stdout', Buffer.from('first\n'), 0.1);
  const first = pieces.splice(0).join('');
  w.output('stdout', Buffer.from('second\n'), 0.2);
  w.end({ exitCode: 0 }, 0.3);
  return { first, rest: pieces.join('') };
}

/** The index entry an honest replica sends. */
function honestSummary(id: string, startedAtMs: number, over: Record<string, unknown> = {}): Record<string, unknown> {
  return { id, subresource: 'exec', user: 'alice', groups: ['sre'], cluster: 'one', namespace: 'default', pod: 'demo', container: 'main', command: ['sh', '-c', 'ls'], tty: false, record: 'output', enforce: false, start: new Date(startedAtMs).toISOString(), durationSeconds: 0.3, exitCode: 0, recordedBytes: 13, result: 'complete', ...over };
}

describe('remote recorder: a recording belongs to the replica that created it, and is immutable once finished', () => {
  let work: string;
  let dir: string;
  let recorder: Recorder;
  const put = async (token: string, path: string, body: string): Promise<{ status: number; text: string }> => {
    const r = await fetch(`${recorder.url}${path}`, { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' }, body });
    return { status: r.status, text: await r.text() };
  };
  const files = (id: string): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const ext of ['cast', 'json']) {
      try {
        out[ext] = readFileSync(join(dir, `${id}.${ext}`), 'utf8');
      } catch {
        // absent
      }
    }
    return out;
  };
  const viewerToken = (): string => join(work, 'viewer.token');

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-recorder-owner-'));
    dir = join(work, 'recordings');
    writeFileSync(join(work, 'ingest.csv'), 'replica-token-a,proxy-a,\nreplica-token-b,proxy-b,\n');
    writeFileSync(join(work, 'viewers.csv'), 'viewer-token,carol,,"auditors"\n');
    writeFileSync(viewerToken(), 'viewer-token\n');
    recorder = await startRecorderProcess(dir, work);
  });
  afterAll(async () => {
    await recorder?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('ownership survives a recorder restart; after the summary nobody may append, re-summarise or re-create it (409)', async () => {
    const id = newRecordingId();
    const startedAtMs = Date.now();
    const { first, rest } = castParts(id, startedAtMs);
    const created = await put('replica-token-a', `/api/v1/ingest/${id}`, first);
    expect(created.status).toBe(200);
    expect(created.text.trim().split('\n').at(-1)).toBe(`{"ack":${Buffer.byteLength(first)},"done":true}`);
    // The recorder restarts: what it knew in memory is gone; the owner is not.
    const port = Number(new URL(recorder.url).port);
    await recorder.stop();
    recorder = await startRecorderProcess(dir, work, port);
    const size = Buffer.byteLength(first);
    const forged = '[0.150000, "o", "forged by b\\r\\n"]\n';
    expect((await put('replica-token-b', `/api/v1/ingest/${id}?resume=1&offset=${size}`, forged)).status).toBe(403);
    expect((await put('replica-token-b', `/api/v1/ingest/${id}/summary`, JSON.stringify(honestSummary(id, startedAtMs, { user: 'mallory' })))).status).toBe(403);
    expect((await put('replica-token-b', `/api/v1/ingest/${id}`, forged)).status).toBe(409);
    expect(files(id).cast).toBe(first);
    // The owner resumes and finishes.
    expect((await put('replica-token-a', `/api/v1/ingest/${id}?resume=1&offset=${size}`, rest)).status).toBe(200);
    const stored = await put('replica-token-a', `/api/v1/ingest/${id}/summary`, JSON.stringify(honestSummary(id, startedAtMs)));
    expect(stored.status, stored.text).toBe(200);
    const before = files(id);
    expect(before.cast).toBe(first + rest);
    expect(JSON.parse(before.json!)).toMatchObject({ recordedBy: 'proxy-a', user: 'alice', result: 'complete' });
    // Finished: immutable for every replica, the owner included.
    const end = Buffer.byteLength(first + rest);
    for (const token of ['replica-token-a', 'replica-token-b']) {
      expect((await put(token, `/api/v1/ingest/${id}?resume=1&offset=${end}`, forged)).status, token).toBe(409);
      expect((await put(token, `/api/v1/ingest/${id}`, forged)).status, token).toBe(409);
      expect((await put(token, `/api/v1/ingest/${id}/summary`, JSON.stringify(honestSummary(id, startedAtMs, { user: 'mallory', start: '2001-01-01T00:00:00.000Z', record: 'metadata' })))).status, token).toBe(409);
      expect((await put(token, `/api/v1/ingest/${id}/summary`, JSON.stringify({ ...honestSummary(id, startedAtMs), subresource: 'portforward', record: 'metadata', ports: ['80'] }))).status, token).toBe(409);
    }
    expect(files(id)).toEqual(before);
    const verified = await execFileP(process.execPath, [CLI, 'sessions', 'verify', id, '--dir', dir]);
    expect(verified.stdout).toBe(`OK      ${id}  sha256 matches\n`);
  });

  it('a metadata record (no cast) is written once; a recording with a cast is never a metadata record', async () => {
    const id = newRecordingId();
    const record = { ...honestSummary(id, Date.now()), subresource: 'portforward', record: 'metadata', ports: ['8080'], command: undefined, tty: undefined, recordedBytes: undefined, bytesToUpstream: 10, bytesToClient: 20 };
    expect((await put('replica-token-b', `/api/v1/ingest/${id}/summary`, JSON.stringify(record))).status).toBe(200);
    const before = files(id);
    expect(JSON.parse(before.json!)).toMatchObject({ record: 'metadata', recordedBy: 'proxy-b', ports: ['8080'] });
    expect((await put('replica-token-a', `/api/v1/ingest/${id}`, '{"version": 2}\n')).status).toBe(409);
    expect((await put('replica-token-b', `/api/v1/ingest/${id}/summary`, JSON.stringify({ ...record, bytesToClient: 0 }))).status).toBe(409);
    expect(files(id)).toEqual(before);
    // No cast and not a metadata record: there is nothing to index.
    const lone = newRecordingId();
    expect((await put('replica-token-a', `/api/v1/ingest/${lone}/summary`, JSON.stringify(honestSummary(lone, Date.now())))).status).toBe(404);
    expect(files(lone)).toEqual({});
  });

  it('the index takes who and what from the cast header; a summary with bad types is refused (400) naming each field', async () => {
    const id = newRecordingId();
    const startedAtMs = Date.now() - 5_000;
    const { first, rest } = castParts(id, startedAtMs);
    expect((await put('replica-token-a', `/api/v1/ingest/${id}`, first + rest)).status).toBe(200);
    const bad = await put('replica-token-a', `/api/v1/ingest/${id}/summary`, JSON.stringify({ ...honestSummary(id, startedAtMs), enforce: 'yes', start: 'yesterday', durationSeconds: '1', exitCode: '0', result: 'owned', command: 'rm -rf /', recordedBytes: -1 }));
    expect(bad.status).toBe(400);
    for (const field of ['enforce', 'start', 'durationSeconds', 'exitCode', 'result', 'command', 'recordedBytes']) expect(bad.text).toContain(`${field}: `);
    expect(files(id).json).toBeUndefined();
    // Well typed, but lying about who and what: the header (written when the recording was created) decides.
    const lying = honestSummary(id, startedAtMs, { user: 'mallory', groups: ['system:masters'], cluster: 'two', namespace: 'kube-system', pod: 'other', container: 'x', command: ['true'], tty: true, record: 'metadata', start: '2001-01-01T00:00:00.000Z', recordedBy: 'proxy-b' });
    const ok = await put('replica-token-a', `/api/v1/ingest/${id}/summary`, JSON.stringify(lying));
    expect(ok.status, ok.text).toBe(200);
    const stored = JSON.parse(files(id).json!) as Record<string, unknown>;
    expect(stored).toMatchObject({ user: 'alice', groups: ['sre'], cluster: 'one', namespace: 'default', pod: 'demo', container: 'main', command: ['sh', '-c', 'ls'], tty: false, record: 'output', subresource: 'exec', recordedBy: 'proxy-a', exitCode: 0, result: 'complete' });
    expect(Math.abs(Date.parse(stored.start as string) - startedAtMs)).toBeLessThan(1000);
    // So retention keeps it (it started seconds ago, not in 2001).
    expect(await new RecordingStore(dir).removeOlderThan(24 * 3_600_000, Date.now())).not.toContain(id);
    expect((await new RecordingStore(dir).verify(id)).ok).toBe(true);
  });

  it('a corrupt index entry never breaks a listing: shown as invalid by the API, sessions list (recorder and directory) and verify', async () => {
    const good = newRecordingId();
    const { first, rest } = castParts(good, Date.now());
    expect((await put('replica-token-a', `/api/v1/ingest/${good}`, first + rest)).status).toBe(200);
    expect((await put('replica-token-a', `/api/v1/ingest/${good}/summary`, JSON.stringify(honestSummary(good, Date.now())))).status).toBe(200);
    // Written behind the recorder's back (a disk edit, an older bug): typed wrong, and not JSON at all.
    const typo = newRecordingId();
    const parts = castParts(typo, Date.now(), { user: 'bob' });
    writeFileSync(join(dir, `${typo}.cast`), parts.first + parts.rest);
    writeFileSync(join(dir, `${typo}.json`), JSON.stringify({ id: typo, subresource: 'exec', namespace: 7, pod: 'demo', command: 'rm -rf /', record: 'output', enforce: false, start: 5, durationSeconds: 'long', exitCode: '0', result: 'owned' }));
    const garbage = newRecordingId();
    writeFileSync(join(dir, `${garbage}.json`), '{"id": "not json');
    const api = await get(`${recorder.url}/api/v1/sessions`, 'viewer-token');
    expect(api.status).toBe(200);
    const items = (JSON.parse(api.body) as { items: Array<{ id: string; state: string; user?: string; durationSeconds: unknown; start: unknown }> }).items;
    expect(items.find((e) => e.id === good)).toMatchObject({ state: 'finished' });
    expect(items.find((e) => e.id === typo)).toMatchObject({ state: 'invalid', user: 'bob' });
    expect(items.find((e) => e.id === garbage)).toMatchObject({ state: 'invalid' });
    for (const e of items) {
      expect(typeof e.start).toBe('string');
      expect(typeof e.durationSeconds).toBe('number');
    }
    for (const from of [['--recorder', recorder.url, '--token-file', viewerToken()], ['--dir', dir]]) {
      const listed = await execFileP(process.execPath, [CLI, 'sessions', 'list', ...from]);
      const line = (id: string): string => listed.stdout.split('\n').find((l) => l.startsWith(id)) ?? '';
      expect(line(good)).toMatch(/\scomplete$/);
      expect(line(typo)).toMatch(/^\S+\s+bob\s.*\sinvalid$/);
      expect(line(garbage)).toMatch(/\sinvalid$/);
    }
    const verify = await execFileP(process.execPath, [CLI, 'sessions', 'verify', '--dir', dir]).catch((e: { code: number; stdout: string }) => e);
    expect((verify as { code: number }).code).toBe(1);
    expect((verify as { stdout: string }).stdout).toContain(`OK      ${good}  sha256 matches\n`);
    expect((verify as { stdout: string }).stdout).toMatch(new RegExp(`FAILED  ${typo}  the index entry is invalid: .*durationSeconds`));
    expect((verify as { stdout: string }).stdout).toMatch(new RegExp(`FAILED  ${garbage}  the index entry is invalid: not JSON`));
  });
});
