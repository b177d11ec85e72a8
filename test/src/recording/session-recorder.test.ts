/**
 * When a recording is created (issue 31, finding 6): the session recorder decides and checks the
 * sink's health before the upgrade, but creates nothing on the sink until the upstream's 101 has
 * arrived (`upgraded()`). A session that never got its 101 (`abandon(code)`) leaves nothing on the
 * sink and is counted as a refused attempt. A sink that fails at that first creation, after the 101:
 * enforce ends the session (`fatal`, `sink_open_failed`), fail open goes on unrecorded (counted).
 */
import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { PortForwardRecording } from '../../../src/recording/port-forward-recording.js';
import { parseRecordingConfig } from '../../../src/recording/recording-config.js';
import { RecordingUnavailableError } from '../../../src/recording/recording-errors.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { SessionRecorder } from '../../../src/recording/session-recorder.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { counterValue } from '../../helpers/metrics.js';
import { waitFor } from '../../helpers/wait.js';
import { MemorySink } from './recording-fixture.js';

const policy = parseRecordingConfig({
  apiVersion: 'kube-stream-proxy.io/v1alpha1',
  kind: 'SessionRecordingConfiguration',
  rules: [
    { match: { namespaces: ['prod'] }, record: 'output', enforce: true },
    { match: { namespaces: ['dev'] }, record: 'output' },
  ],
});
const exec = { namespace: 'prod', pod: 'p', subresource: 'exec' as const, tty: false, command: ['sh'] };
const portforward = { namespace: 'prod', pod: 'p', subresource: 'portforward' as const, tty: false, command: [], ports: ['8080'] };

function recorder(sink: MemorySink | undefined, identify = false) {
  const registry = new Registry();
  const metrics = createRecordingMetrics(registry);
  const r = new SessionRecorder({ policy: () => policy, sink, metrics, log: { warn: () => undefined }, maxOutputBytes: 0, replica: 'proxy-0' });
  return { r, registry, identify };
}

const metric = async (registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> => counterValue(await registry.metrics(), name, labels);

describe('SessionRecorder: nothing on the sink before the 101', () => {
  it('exec refused by the upstream (401): no upload was ever opened, the attempt is counted, nothing is active', async () => {
    const sink = new MemorySink();
    const { r, registry } = recorder(sink);
    const rec = (await r.begin(exec)) as SessionRecording;
    expect(rec).toBeInstanceOf(SessionRecording);
    expect(sink.uploads.size).toBe(0);
    expect(rec.created).toBe(false);
    rec.abandon(401);
    // Whatever closes it later (a relay, a tap) stores nothing either.
    rec.exit({ error: 'not upgraded (401)' });
    await rec.finish();
    expect(sink.uploads.size).toBe(0);
    expect(sink.records).toHaveLength(0);
    expect(await metric(registry, 'kube_stream_proxy_session_recording_refused_attempts_total', { code: '401' })).toBe(1);
    expect(await metric(registry, 'kube_stream_proxy_session_recordings_total')).toBe(0);
    expect(await metric(registry, 'kube_stream_proxy_session_recordings_active')).toBe(0);
  });

  it('port-forward refused: no record is written', async () => {
    const sink = new MemorySink();
    const { r, registry } = recorder(sink);
    const pf = (await r.begin(portforward)) as PortForwardRecording;
    expect(pf).toBeInstanceOf(PortForwardRecording);
    pf.abandon(403);
    await pf.finish();
    expect(sink.records).toHaveLength(0);
    expect(await metric(registry, 'kube_stream_proxy_session_recording_refused_attempts_total', { code: '403' })).toBe(1);
    expect(await metric(registry, 'kube_stream_proxy_session_recordings_active')).toBe(0);
  });

  it('after the 101: created then, with the events from before it in order; port-forward writes its record', async () => {
    const sink = new MemorySink();
    const { r, registry } = recorder(sink);
    const rec = (await r.begin(exec)) as SessionRecording;
    // A tap may see the upstream's first bytes in the same turn as the 101 head.
    rec.output('stdout', Buffer.from('first'));
    expect(sink.uploads.size).toBe(0);
    rec.upgraded();
    rec.output('stdout', Buffer.from('second'));
    rec.exit({ exitCode: 0 });
    const s = await rec.finish();
    expect(s.result).toBe('complete');
    const upload = sink.uploads.get(rec.id)!;
    expect(upload.parsed().events.map((e) => e[2])).toEqual(['first', 'second', 'exit 0']);
    expect(upload.summary).toMatchObject({ id: rec.id, result: 'complete' });
    const pf = (await r.begin(portforward)) as PortForwardRecording;
    pf.upgraded();
    await pf.finish();
    expect(sink.records).toHaveLength(1);
    expect(await metric(registry, 'kube_stream_proxy_session_recording_refused_attempts_total')).toBe(0);
  });

  it('sink unhealthy before the upgrade: enforce refused (503), fail open unrecorded; nothing opened', async () => {
    const sink = new MemorySink();
    sink.checkError = new Error('no space left on the recordings volume');
    const { r, registry } = recorder(sink);
    const e = await r.begin(exec).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(RecordingUnavailableError);
    expect((e as RecordingUnavailableError).toStatus().code).toBe(503);
    expect(await r.begin({ ...exec, namespace: 'dev' })).toBeUndefined();
    expect(sink.uploads.size).toBe(0);
    expect(await metric(registry, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'start' })).toBe(1);
    expect(await metric(registry, 'kube_stream_proxy_session_recordings_dropped_total', { reason: 'open_failed' })).toBe(1);
  });

  it('enforce: the sink fails at the creation after the 101: fatal (sink_open_failed), the session is ended', async () => {
    const sink = new MemorySink();
    const { r, registry } = recorder(sink);
    const rec = (await r.begin(exec)) as SessionRecording;
    sink.openError = new Error('ENOSPC: no space left on device');
    rec.upgraded();
    await waitFor('fatal', async () => (rec.fatal.aborted ? true : undefined), 2000, 5);
    expect(rec.fatal.reason).toBeInstanceOf(RecordingUnavailableError);
    expect((rec.fatal.reason as RecordingUnavailableError).reason).toBe('sink_open_failed');
    expect((await rec.finish()).result).toBe('terminated');
    expect(await metric(registry, 'kube_stream_proxy_session_recording_sink_errors_total', { phase: 'open' })).toBe(1);
    expect(await metric(registry, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'mid_session' })).toBe(1);
  });

  it('fail open: the sink fails at the creation after the 101: the session goes on, counted as open_failed', async () => {
    const sink = new MemorySink();
    const { r, registry } = recorder(sink);
    const rec = (await r.begin({ ...exec, namespace: 'dev' })) as SessionRecording;
    sink.openError = new Error('recorder unreachable');
    rec.upgraded();
    await waitFor('open_failed counted', async () => ((await metric(registry, 'kube_stream_proxy_session_recordings_dropped_total', { reason: 'open_failed' })) === 1 ? true : undefined), 2000, 5);
    rec.output('stdout', Buffer.from('x'));
    expect(rec.fatal.aborted).toBe(false);
    expect((await rec.finish()).result).toBe('incomplete');
  });

  it('passthrough, enforce: create() before the client\'s 101 waits for the sink; a failure refuses (nothing stored, counted at start)', async () => {
    const sink = new MemorySink();
    const { r, registry } = recorder(sink);
    const ok = (await r.begin(exec)) as SessionRecording;
    expect(await ok.create()).toBeUndefined();
    expect(sink.uploads.has(ok.id)).toBe(true);
    expect(ok.created).toBe(true);
    const refused = (await r.begin(exec)) as SessionRecording;
    sink.openError = new Error('recorder answered 401');
    const error = await refused.create();
    expect(error).toBeInstanceOf(RecordingUnavailableError);
    expect(error!.toStatus()).toMatchObject({ code: 503, message: 'session recording unavailable' });
    // Not a running session: nothing to end, nothing stored; the handler abandons it.
    expect(refused.fatal.aborted).toBe(false);
    expect(refused.created).toBe(false);
    refused.abandon(503);
    await refused.finish();
    expect(sink.uploads.has(refused.id)).toBe(false);
    expect(await metric(registry, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'start' })).toBe(1);
    expect(await metric(registry, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'mid_session' })).toBe(0);
    expect(await metric(registry, 'kube_stream_proxy_session_recording_sink_errors_total', { phase: 'open' })).toBe(1);
    ok.exit({ exitCode: 0 });
    await ok.finish();
    expect(await metric(registry, 'kube_stream_proxy_session_recordings_active')).toBe(0);
  });

  it('passthrough, fail open: create() does not wait for the sink', async () => {
    const sink = new MemorySink();
    const { r } = recorder(sink);
    const rec = (await r.begin({ ...exec, namespace: 'dev' })) as SessionRecording;
    let opened = false;
    const open = sink.open.bind(sink);
    sink.open = (id: string) => new Promise((resolve) => setTimeout(() => ((opened = true), resolve(open(id))), 50));
    expect(await rec.create()).toBeUndefined();
    expect(opened).toBe(false);
    await waitFor('opened', async () => (opened ? true : undefined), 2000, 5);
  });
});
