/**
 * Session recording's Prometheus metrics, in one place (the conventions of `src/metrics.ts`: the
 * project's `kube_stream_proxy_` prefix, help text, low-cardinality labels only — never a user, pod
 * or recording id — and one function per counter). Created on the server's Registry.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { METRICS_NAMESPACE } from '../metrics.js';
import type { TapProtocol } from './observer.js';
import type { RecordingResult } from './sink.js';

/** The sink kinds (`sink` label). */
export type SinkLabel = 'directory' | 'recorder';

/** Why a recording lost events or ended early (`reason` label of the dropped counter). */
export type DropReason = 'sink_slow' | 'sink_error' | 'open_failed';

/** When enforce refused a session (`phase` label). */
export type EnforcePhase = 'start' | 'mid_session';

/** The recording metrics. */
export interface RecordingMetrics {
  /** `kube_stream_proxy_session_recordings_total{subresource,result}`: recordings finished, by how they ended. */
  incRecording(subresource: 'exec' | 'attach' | 'portforward', result: RecordingResult): void;
  /** `kube_stream_proxy_session_recordings_active`: recordings open now. */
  addActiveRecordings(delta: 1 | -1): void;
  /** `kube_stream_proxy_session_recording_bytes_total{sink}`: cast bytes handed to the sink. */
  addRecordedBytes(sink: SinkLabel, bytes: number): void;
  /** `kube_stream_proxy_session_recording_sink_errors_total{sink,phase}`: sink failures (open or write). */
  incSinkError(sink: SinkLabel, phase: 'open' | 'write'): void;
  /** `kube_stream_proxy_session_recordings_dropped_total{reason}`: recordings that lost events (fail open). */
  incDropped(reason: DropReason): void;
  /** `kube_stream_proxy_session_recording_enforce_refusals_total{phase}`: sessions refused or ended because enforce could not record them. */
  incEnforceRefusal(phase: EnforcePhase): void;
  /** `kube_stream_proxy_session_recording_unreadable_streams_total{protocol}`: taps that could not read a session's stream (enforce ended it, fail open marked it incomplete). */
  incUnreadableStream(protocol: TapProtocol): void;
  /**
   * `kube_stream_proxy_session_recording_refused_attempts_total{code}`: sessions a recording rule
   * matched that never got the upstream's 101 (`code`: what the client was answered), so nothing was stored.
   */
  incRefusedAttempt(code: number): void;
  /** `kube_stream_proxy_session_recording_config_reloads_total{result}`: `--session-recording-config` reloads. */
  incConfigReload(result: 'success' | 'failure'): void;
  /** `kube_stream_proxy_session_recording_config_last_reload_successful`: 1 when the last (re)load was good. */
  setConfigHealthy(ok: boolean): void;
}

/** Register the recording metrics on `registry`. */
export function createRecordingMetrics(registry: Registry): RecordingMetrics {
  const recordings = new Counter({
    name: `${METRICS_NAMESPACE}_session_recordings_total`,
    help: 'Session recordings finished, by subresource and result (complete, truncated, gap, incomplete, terminated).',
    labelNames: ['subresource', 'result'] as const,
    registers: [registry],
  });
  const active = new Gauge({
    name: `${METRICS_NAMESPACE}_session_recordings_active`,
    help: 'Session recordings open now.',
    registers: [registry],
  });
  const bytes = new Counter({
    name: `${METRICS_NAMESPACE}_session_recording_bytes_total`,
    help: 'Bytes of recordings (asciicast text and metadata records) handed to the sink, by sink.',
    labelNames: ['sink'] as const,
    registers: [registry],
  });
  const sinkErrors = new Counter({
    name: `${METRICS_NAMESPACE}_session_recording_sink_errors_total`,
    help: 'Recording sink failures, by sink and phase (open: the recording could not start; write: it failed mid-session).',
    labelNames: ['sink', 'phase'] as const,
    registers: [registry],
  });
  const dropped = new Counter({
    name: `${METRICS_NAMESPACE}_session_recordings_dropped_total`,
    help: 'Recordings (fail open) that lost events or were not made, by reason (sink_slow: past the bounded buffer; sink_error; open_failed).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const refusals = new Counter({
    name: `${METRICS_NAMESPACE}_session_recording_enforce_refusals_total`,
    help: 'Sessions refused before the upgrade (start) or ended (mid_session) because an enforced recording could not be made.',
    labelNames: ['phase'] as const,
    registers: [registry],
  });
  const unreadable = new Counter({
    name: `${METRICS_NAMESPACE}_session_recording_unreadable_streams_total`,
    help: "Recorded sessions whose relayed stream a tap could not read (SPDY or WebSocket framing its reader would not accept either), by protocol: enforce ended the session, fail open marked the recording incomplete.",
    labelNames: ['protocol'] as const,
    registers: [registry],
  });
  const refusedAttempts = new Counter({
    name: `${METRICS_NAMESPACE}_session_recording_refused_attempts_total`,
    help: "Sessions a recording rule matched that never got the upstream's 101, by the HTTP code the client was answered (the upstream's refusal, or the proxy's when the upgrade failed; 499: the client left): nothing was stored for them.",
    labelNames: ['code'] as const,
    registers: [registry],
  });
  const reloads = new Counter({
    name: `${METRICS_NAMESPACE}_session_recording_config_reloads_total`,
    help: 'Loads of --session-recording-config, by result (a failed reload keeps the previous configuration).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const healthy = new Gauge({
    name: `${METRICS_NAMESPACE}_session_recording_config_last_reload_successful`,
    help: '1 when the last load of --session-recording-config succeeded, 0 when it was rejected.',
    registers: [registry],
  });
  return {
    incRecording: (subresource, result) => recordings.inc({ subresource, result }),
    addActiveRecordings: (delta) => active.inc(delta),
    addRecordedBytes: (sink, n) => bytes.inc({ sink }, n),
    incSinkError: (sink, phase) => sinkErrors.inc({ sink, phase }),
    incDropped: (reason) => dropped.inc({ reason }),
    incEnforceRefusal: (phase) => refusals.inc({ phase }),
    incUnreadableStream: (protocol) => unreadable.inc({ protocol }),
    incRefusedAttempt: (code) => refusedAttempts.inc({ code: String(code) }),
    incConfigReload: (result) => reloads.inc({ result }),
    setConfigHealthy: (ok) => healthy.set(ok ? 1 : 0),
  };
}
