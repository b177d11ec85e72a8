/**
 * One recording behind the bounded buffer: fail open drops events past the buffer and marks the gap
 * once the sink caught up; enforce aborts `fatal` (a RecordingUnavailableError whose Status is 503
 * "session recording unavailable") in the same turn as the overflow or the sink error; the session
 * recorder refuses enforced sessions it cannot open; the metrics say each of these.
 */
import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { RecordingUnavailableError } from '../../../src/recording/recording-errors.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { SessionRecorder } from '../../../src/recording/session-recorder.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { parseRecordingConfig } from '../../../src/recording/recording-config.js';
import { PortForwardRecording } from '../../../src/recording/port-forward-recording.js';
import { counterValue } from '../../helpers/metrics.js';
import { MemorySink, MemoryUpload } from './recording-fixture.js';

function make(enforce: boolean, maxBufferBytes = 1024) {
  const registry = new Registry();
  const metrics = createRecordingMetrics(registry);
  const upload = new MemoryUpload();
  const warnings: string[] = [];
  const rec = new SessionRecording({
    identity: { sessionId: '01890000-0000-7000-8000-000000000001', namespace: 'ns', pod: 'p', subresource: 'exec', command: ['sh'], tty: false, record: 'output' },
    enforce,
    upload,
    sink: 'directory',
    metrics,
    log: { warn: (obj, msg) => warnings.push(`${msg} ${JSON.stringify(obj)}`) },
    maxOutputBytes: 0,
    maxBufferBytes,
  });
  return { rec, upload, registry, warnings };
}

describe('SessionRecording', () => {
  it('fail open, the session ends while still dropping: the gap marker and the exit status are written anyway', async () => {
    const { rec, upload } = make(false);
    upload.hold();
    rec.output('stdout', Buffer.alloc(600, 'a'));
    rec.output('stdout', Buffer.alloc(600, 'b')); // past 1024 pending: dropped
    rec.exit({ exitCode: 0 });
    // The sink has not caught up when the session ends.
    const s = await rec.finish();
    expect(s.result).toBe('gap');
    expect(upload.parsed().events.map((e) => [e[1], e[2].slice(0, 20)])).toEqual([
      ['o', 'a'.repeat(20)],
      ['m', 'recording gap: 620 b'],
      ['m', 'exit 0'],
    ]);
  });

  it('fail open, slow sink: events past the buffer are dropped, then a gap marker; result gap; metric', async () => {
    const { rec, upload, registry, warnings } = make(false);
    upload.hold();
    rec.output('stdout', Buffer.alloc(600, 'a'));
    rec.output('stdout', Buffer.alloc(600, 'b')); // past 1024 pending: dropped
    rec.output('stdout', Buffer.alloc(10, 'c')); // still dropping
    expect(rec.fatal.aborted).toBe(false);
    upload.release(); // caught up: the gap is marked, recording resumes
    rec.output('stdout', Buffer.from('after'));
    rec.exit({ exitCode: 0 });
    const s = await rec.finish();
    expect(s.result).toBe('gap');
    const events = upload.parsed().events.map((e) => [e[1], e[2].length > 20 ? e[2].slice(0, 20) : e[2]]);
    expect(events).toEqual([
      ['o', 'a'.repeat(20)],
      ['m', 'recording gap: 650 b'],
      ['o', 'after'],
      ['m', 'exit 0'],
    ]);
    const text = await registry.metrics();
    expect(counterValue(text, 'kube_stream_proxy_session_recordings_dropped_total', { reason: 'sink_slow' })).toBe(1);
    expect(counterValue(text, 'kube_stream_proxy_session_recordings_total', { subresource: 'exec', result: 'gap' })).toBe(1);
    // Never recording content in logs.
    expect(warnings.join('')).not.toMatch(/aaaa|bbbb|after/);
  });

  it('enforce, slow sink: fatal aborts at the overflow with the 503 Status', () => {
    const { rec, upload, registry } = make(true);
    upload.hold();
    rec.output('stdout', Buffer.alloc(600, 'a'));
    expect(rec.fatal.aborted).toBe(false);
    rec.output('stdout', Buffer.alloc(600, 'b'));
    expect(rec.fatal.aborted).toBe(true);
    const err = rec.fatal.reason as RecordingUnavailableError;
    expect(err).toBeInstanceOf(RecordingUnavailableError);
    expect(err.reason).toBe('sink_too_slow');
    expect(err.toStatus()).toMatchObject({ kind: 'Status', status: 'Failure', code: 503, reason: 'ServiceUnavailable', message: 'session recording unavailable' });
    return registry.metrics().then((t) => expect(counterValue(t, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'mid_session' })).toBe(1));
  });

  it('enforce, sink error mid-session: fatal in the same turn; result terminated', async () => {
    const { rec, upload, registry } = make(true);
    rec.output('stdout', Buffer.from('x'));
    upload.fail(new Error('ENOSPC: no space left on device'));
    expect(rec.fatal.aborted).toBe(true);
    expect((rec.fatal.reason as RecordingUnavailableError).reason).toBe('sink_failed');
    const s = await rec.finish();
    expect(s.result).toBe('terminated');
    expect(upload.aborted).toBe(true);
    const t = await registry.metrics();
    expect(counterValue(t, 'kube_stream_proxy_session_recording_sink_errors_total', { sink: 'directory', phase: 'write' })).toBe(1);
  });

  it('fail open, sink error: the session goes on, recording incomplete, metric', async () => {
    const { rec, upload, registry } = make(false);
    upload.fail(new Error('EIO'));
    rec.output('stdout', Buffer.from('x'));
    expect(rec.fatal.aborted).toBe(false);
    expect((await rec.finish()).result).toBe('incomplete');
    expect(counterValue(await registry.metrics(), 'kube_stream_proxy_session_recordings_dropped_total', { reason: 'sink_error' })).toBe(1);
  });
});

describe('SessionRecorder', () => {
  const policy = parseRecordingConfig({
    apiVersion: 'kube-stream-proxy.io/v1alpha1',
    kind: 'SessionRecordingConfiguration',
    rules: [
      { match: { namespaces: ['prod'] }, record: 'full', enforce: true },
      { match: { namespaces: ['dev'] }, record: 'output' },
    ],
  });
  const req = { namespace: 'prod', pod: 'p', subresource: 'exec' as const, tty: true, command: ['sh'], user: 'alice', groups: ['sre'] };

  it('not matched: undefined; matched: a recording with the identity; port-forward: a metadata record', async () => {
    const sink = new MemorySink();
    const r = new SessionRecorder({ policy: () => policy, sink, metrics: createRecordingMetrics(new Registry()), log: { warn: () => undefined }, maxOutputBytes: 0, replica: 'proxy-0' });
    expect(await r.begin({ ...req, namespace: 'other' })).toBeUndefined();
    const rec = await r.begin(req);
    expect(rec).toBeInstanceOf(SessionRecording);
    expect((rec as SessionRecording).enforce).toBe(true);
    const pf = await r.begin({ ...req, namespace: 'dev', subresource: 'portforward', tty: false, command: [], ports: ['8080'] });
    expect(pf).toBeInstanceOf(PortForwardRecording);
    (pf as PortForwardRecording).upgraded();
    (pf as PortForwardRecording).fromClient(Buffer.alloc(10));
    (pf as PortForwardRecording).fromUpstream(Buffer.alloc(30));
    const s = await (pf as PortForwardRecording).finish();
    expect(s).toMatchObject({ subresource: 'portforward', ports: ['8080'], bytesToUpstream: 10, bytesToClient: 30, record: 'metadata', user: 'alice', recordedBy: 'proxy-0' });
    expect(sink.records).toHaveLength(1);
  });

  it('enforce and the sink is unusable: RecordingUnavailableError before any upgrade; fail open: unrecorded', async () => {
    const registry = new Registry();
    const sink = new MemorySink();
    sink.checkError = new Error('recorder unreachable');
    const r = new SessionRecorder({ policy: () => policy, sink, metrics: createRecordingMetrics(registry), log: { warn: () => undefined }, maxOutputBytes: 0 });
    const e = await r.begin(req).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(RecordingUnavailableError);
    expect((e as RecordingUnavailableError).toStatus().code).toBe(503);
    expect(await r.begin({ ...req, namespace: 'dev' })).toBeUndefined();
    const t = await registry.metrics();
    expect(counterValue(t, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'start' })).toBe(1);
    expect(counterValue(t, 'kube_stream_proxy_session_recordings_dropped_total', { reason: 'open_failed' })).toBe(1);
    expect(counterValue(t, 'kube_stream_proxy_session_recording_sink_errors_total', { phase: 'open' })).toBe(2);
  });

  it('enforce with no sink configured: refused (no_sink)', async () => {
    const r = new SessionRecorder({ policy: () => policy, sink: undefined, metrics: createRecordingMetrics(new Registry()), log: { warn: () => undefined }, maxOutputBytes: 0 });
    await expect(r.begin(req)).rejects.toMatchObject({ reason: 'no_sink' });
  });
});
