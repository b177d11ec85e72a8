/**
 * The server's session recorder: asked once per streaming request, before any upgrade, it applies the
 * policy, checks the sink's health and names the caller; the recording it returns is created on the
 * sink only once the upstream's 101 has arrived (`upgraded()`), so a session the upstream refuses
 * stores nothing (`abandon(code)` counts it: `session_recording_refused_attempts_total{code}`).
 *
 * - `record: none` (or no rule matched): `undefined`, the relay runs exactly as without recording.
 * - exec/attach: a {@link SessionRecording} over a {@link DeferredUpload} (the translator calls it
 *   directly; passthrough relays wrap it in a tap: `createSpdyTap`, `createWebSocketTap`).
 * - portforward: a {@link PortForwardRecording} (metadata only), written at the end if upgraded.
 *
 * When the sink is unusable before the upgrade (no sink, the directory is not writable or full, the
 * recorder does not answer within {@link OPEN_TIMEOUT_MS}), an enforced rule throws
 * `RecordingUnavailableError`: the handler answers `toStatus()` (503 "session recording
 * unavailable") before the upgrade. A fail-open rule logs, counts
 * (`recordings_dropped{reason="open_failed"}`) and returns undefined. A sink that fails when the
 * recording is created after the 101 is a sink failure of the running session: enforce ends it with
 * the Status, fail open goes on unrecorded (`session-recording.ts`).
 *
 * The caller (`--authn passthrough`, where the proxy does not authenticate it) is named by the
 * `identify` the handler passes — the upstream's SelfSubjectReview (`caller-identity.ts`) — asked only
 * for a recorded session; an unknown caller is recorded with the reason, never refused.
 */
import type { CastIdentity } from './asciicast.js';
import { CallerIdentities, type CallerIdentity } from './caller-identity.js';
import { DeferredUpload } from './deferred-upload.js';
import { decideRecording, type RecordingDecision, type RecordingPolicy, type RecordingRequest } from './policy.js';
import { PortForwardRecording } from './port-forward-recording.js';
import { RecordingUnavailableError } from './recording-errors.js';
import type { RecordingMetrics } from './recording-metrics.js';
import { SessionRecording, type RecordingLogger } from './session-recording.js';
import { newRecordingId, type RecordingSink } from './sink.js';

/** How long the sink's health check (and creating a recording) may take before it counts as failed. */
export const OPEN_TIMEOUT_MS = 5_000;

/**
 * How long a healthy sink check is reused: sessions that start together cost one check (a flood of
 * attempts costs one per second), and a sink that fails meanwhile fails at the creation after the 101.
 */
export const SINK_CHECK_TTL_MS = 1_000;

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
  /** Who callers are in passthrough (default: a new cache per recorder). */
  identities?: CallerIdentities;
}

/** Options of {@link SessionRecorder.begin}. */
export interface BeginOptions {
  /** Who the caller is, when the request does not say (passthrough); asked only for a recorded session. */
  identify?: () => Promise<CallerIdentity>;
}

/** What {@link SessionRecorder.begin} returns for a recorded request. */
export type BegunRecording = SessionRecording | PortForwardRecording;

/** `p`, or a rejection after `ms`. */
function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
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
  /** Who passthrough callers are: one cache per server. */
  readonly identities: CallerIdentities;
  #healthy = 0;
  #checking: Promise<void> | undefined;

  constructor(options: SessionRecorderOptions) {
    this.#o = options;
    this.identities = options.identities ?? new CallerIdentities();
  }

  /** The policy's decision for `request` (pure). */
  decide(request: RecordingRequest): RecordingDecision {
    return decideRecording(this.#o.policy(), request);
  }

  /** The sink's health: one check at a time, a healthy answer reused for {@link SINK_CHECK_TTL_MS}. */
  #checkSink(sink: RecordingSink): Promise<void> {
    if (!sink.check || Date.now() < this.#healthy) return Promise.resolve();
    return (this.#checking ??= withTimeout(sink.check(), this.#o.openTimeoutMs ?? OPEN_TIMEOUT_MS).then(
      () => {
        this.#checking = undefined;
        this.#healthy = Date.now() + SINK_CHECK_TTL_MS;
      },
      (e: unknown) => {
        this.#checking = undefined;
        throw e;
      },
    ));
  }

  /**
   * Decide, check the sink, name the caller. Resolves undefined when the request is not recorded;
   * rejects with {@link RecordingUnavailableError} when an enforced recording cannot be made. The
   * recording returned exists nowhere yet: the relay calls `upgraded()` at the 101, else `abandon(code)`.
   */
  async begin(request: RecordableRequest, options: BeginOptions = {}): Promise<BegunRecording | undefined> {
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
    try {
      await this.#checkSink(sink);
    } catch (err) {
      metrics.incSinkError(sink.kind, 'open');
      log.warn({ sink: sink.kind, rule: decision.rule, enforce: decision.enforce, err: { message: (err as Error).message } }, 'session recording sink unusable: the session cannot be recorded');
      return refuse('sink_open_failed', err);
    }
    // Named before the upgrade, so the cast header (written at the creation) names the caller.
    let user = request.user;
    let groups = request.groups;
    let userUnknown: string | undefined;
    if (user === undefined && options.identify) {
      const found = await options.identify();
      if ('user' in found) ({ user, groups } = found);
      else userUnknown = found.unknown;
    }
    const id = newRecordingId();
    const who = {
      ...(user !== undefined ? { user } : {}),
      ...(groups !== undefined ? { groups: [...groups] } : {}),
      ...(userUnknown !== undefined ? { userUnknown } : {}),
      ...(request.cluster ? { cluster: request.cluster } : {}),
      ...(this.#o.replica !== undefined ? { recordedBy: this.#o.replica } : {}),
    };
    if (request.subresource === 'portforward') {
      return new PortForwardRecording(
        { id, ...who, namespace: request.namespace, pod: request.pod, ports: request.ports ?? [], enforce: decision.enforce },
        sink,
        metrics,
        log,
        { created: false },
      );
    }
    const record = decision.record === 'full' ? 'full' : 'output';
    const upload = new DeferredUpload({
      open: () => sink.open(id, { enforce: decision.enforce }),
      timeoutMs: this.#o.openTimeoutMs ?? OPEN_TIMEOUT_MS,
      // Created after the session went on without it: close it as a failed recording.
      late: (u) =>
        void u.abort({ id, subresource: request.subresource, ...who, namespace: request.namespace, pod: request.pod, record, enforce: decision.enforce, start: new Date().toISOString(), durationSeconds: 0, exitCode: null, error: 'the recording opened too late', result: 'incomplete' }).catch(() => undefined),
    });
    const identity: CastIdentity = {
      sessionId: id,
      ...who,
      namespace: request.namespace,
      pod: request.pod,
      ...(request.container !== undefined ? { container: request.container } : {}),
      subresource: request.subresource,
      command: [...request.command],
      tty: request.tty,
      record,
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
