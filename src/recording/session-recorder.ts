/**
 * The server's session recorder: asked once per streaming request, before any upgrade, it applies the
 * policy and opens the recording on the sink.
 *
 * - `record: none` (or no rule matched): `undefined`, the relay runs exactly as without recording.
 * - exec/attach: a {@link SessionRecording} (the translator calls it directly; passthrough relays
 *   wrap it in a tap: `createSpdyTap`, `createWebSocketTap`).
 * - portforward: a {@link PortForwardRecording} (metadata only).
 *
 * When the recording cannot be opened (no sink, the directory is not writable, the recorder does not
 * answer within {@link OPEN_TIMEOUT_MS}), an enforced rule throws `RecordingUnavailableError`: the
 * handler answers `toStatus()` (503 "session recording unavailable") before the upgrade. A fail-open
 * rule logs, counts (`recordings_dropped{reason="open_failed"}`) and returns undefined.
 */
import type { CastIdentity } from './asciicast.js';
import { decideRecording, type RecordingDecision, type RecordingPolicy, type RecordingRequest } from './policy.js';
import { PortForwardRecording } from './port-forward-recording.js';
import { RecordingUnavailableError } from './recording-errors.js';
import type { RecordingMetrics } from './recording-metrics.js';
import { SessionRecording, type RecordingLogger } from './session-recording.js';
import { newRecordingId, type RecordingSink, type RecordingUpload } from './sink.js';

/** How long opening a recording may take before the session is refused (enforce) or goes unrecorded. */
export const OPEN_TIMEOUT_MS = 5_000;

/** A streaming request, as the recorder is asked about it. */
export interface RecordableRequest extends RecordingRequest {
  /** exec: the `command` values; attach and portforward: empty. */
  command: readonly string[];
  /** portforward: the `ports` values. */
  ports?: readonly string[];
}

/** Options of {@link SessionRecorder}. */
export interface SessionRecorderOptions {
  /** The policy in force (read per request: reloads apply to new sessions). */
  policy: () => RecordingPolicy;
  /** Undefined when no sink is configured: enforced rules then refuse every session they match. */
  sink: RecordingSink | undefined;
  metrics: RecordingMetrics;
  log: RecordingLogger;
  /** `--session-recording-max-bytes` (0 = none). */
  maxOutputBytes: number;
  /** Per-session bound of cast text waiting for the sink. */
  maxBufferBytes?: number;
  /** This replica's name, written into each recording. */
  replica?: string;
  openTimeoutMs?: number;
}

/** What {@link SessionRecorder.begin} returns for a recorded request. */
export type BegunRecording = SessionRecording | PortForwardRecording;

/** `p`, or a rejection after `ms`; a value that arrives too late is handed to `late`. */
function withTimeout<T>(p: Promise<T>, ms: number, late: (v: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      reject(new Error(`no answer within ${ms} ms`));
    }, ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        if (timedOut) late(v);
        else resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/** Policy + sink, per server. */
export class SessionRecorder {
  readonly #o: SessionRecorderOptions;

  constructor(options: SessionRecorderOptions) {
    this.#o = options;
  }

  /** The policy's decision for `request` (pure). */
  decide(request: RecordingRequest): RecordingDecision {
    return decideRecording(this.#o.policy(), request);
  }

  /**
   * Decide and open. Resolves undefined when the request is not recorded; rejects with
   * {@link RecordingUnavailableError} when an enforced recording cannot be made.
   */
  async begin(request: RecordableRequest): Promise<BegunRecording | undefined> {
    const decision = this.decide(request);
    if (decision.record === 'none') return undefined;
    const { sink, metrics, log } = this.#o;
    const refuse = (reason: 'no_sink' | 'sink_open_failed', cause?: unknown): undefined => {
      if (decision.enforce) {
        metrics.incEnforceRefusal('start');
        throw new RecordingUnavailableError(reason, { cause });
      }
      metrics.incDropped('open_failed');
      return undefined;
    };
    if (sink === undefined) return refuse('no_sink');
    const id = newRecordingId();
    const who = {
      ...(request.user !== undefined ? { user: request.user } : {}),
      ...(request.groups !== undefined ? { groups: [...request.groups] } : {}),
      ...(request.cluster ? { cluster: request.cluster } : {}),
      ...(this.#o.replica !== undefined ? { recordedBy: this.#o.replica } : {}),
    };
    if (request.subresource === 'portforward') {
      return new PortForwardRecording(
        { id, ...who, namespace: request.namespace, pod: request.pod, ports: request.ports ?? [], enforce: decision.enforce },
        sink,
        metrics,
        log,
      );
    }
    let upload: RecordingUpload;
    try {
      upload = await withTimeout(sink.open(id, { enforce: decision.enforce }), this.#o.openTimeoutMs ?? OPEN_TIMEOUT_MS, (u) => {
        // Opened after the session went on without it: close it as a failed recording.
        void u.abort({ id, subresource: request.subresource, namespace: request.namespace, pod: request.pod, record: decision.record === 'full' ? 'full' : 'output', enforce: decision.enforce, start: new Date().toISOString(), durationSeconds: 0, exitCode: null, error: 'the recording opened too late', result: 'incomplete' }).catch(() => undefined);
      });
    } catch (err) {
      metrics.incSinkError(sink.kind, 'open');
      log.warn({ recordingId: id, sink: sink.kind, rule: decision.rule, enforce: decision.enforce, err: { message: (err as Error).message } }, 'session recording could not be started');
      return refuse('sink_open_failed', err);
    }
    const identity: CastIdentity = {
      sessionId: id,
      ...who,
      namespace: request.namespace,
      pod: request.pod,
      ...(request.container !== undefined ? { container: request.container } : {}),
      subresource: request.subresource,
      command: [...request.command],
      tty: request.tty,
      record: decision.record,
    };
    return new SessionRecording({
      identity,
      enforce: decision.enforce,
      upload,
      sink: sink.kind,
      metrics,
      log,
      maxOutputBytes: this.#o.maxOutputBytes,
      ...(this.#o.maxBufferBytes !== undefined ? { maxBufferBytes: this.#o.maxBufferBytes } : {}),
    });
  }
}
