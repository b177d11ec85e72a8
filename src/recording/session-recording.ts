/**
 * One exec/attach session being recorded: the {@link RemoteCommandObserver} the translator and the
 * taps call, turning their events into asciicast (`asciicast.ts`) and handing the text to the sink's
 * upload behind a bounded buffer.
 *
 * The session never waits on the sink. Past `maxBufferBytes` of text the sink has not taken yet:
 * - enforce: `fatal` aborts with a `RecordingUnavailableError` (`sink_too_slow`) and the relay ends
 *   the session;
 * - fail open: events are dropped until the sink has caught up to half the buffer, then a marker
 *   says how many bytes of events are missing (`result: gap`, metric `recordings_dropped{sink_slow}`).
 * A sink error mid-session is the same choice: enforce aborts `fatal` (within the same turn as the
 * error), fail open stops recording (`result: incomplete`, `recordings_dropped{sink_error}`). So is a
 * tap that cannot read the session's stream ({@link SessionRecording.unreadable}): a marker says so;
 * enforce aborts `fatal`, fail open goes on unrecorded (`result: incomplete`); both count it
 * (`unreadable_streams{protocol}`). The sink is fine then: what was recorded is finished, not aborted.
 *
 * A recording the session recorder begins exists nowhere until the upstream's 101 (`upgraded()`,
 * `create()`; `deferred-upload.ts`): one whose session never got it (`abandon(code)`) stores nothing.
 *
 * Nothing of the recorded content is ever logged: logs carry the id, the reason and byte counts.
 */
import { performance } from 'node:perf_hooks';
import { AsciicastWriter, type CastExit, type CastIdentity } from './asciicast.js';
import type { RelayedBytes, RemoteCommandObserver, TapProtocol } from './observer.js';
import { RecordingUnavailableError, type RecordingUnavailableReason } from './recording-errors.js';
import type { RecordingMetrics, SinkLabel } from './recording-metrics.js';
import type { RecordingResult, RecordingSummary, RecordingUpload } from './sink.js';
import { DeferredUpload, SinkOpenError } from './deferred-upload.js';

/** Default bound of cast text waiting for the sink, per session. */
export const DEFAULT_MAX_BUFFER_BYTES = 8 * 1024 * 1024;

/** Where a recording reports what happened to it (a pino logger fits; never given content). */
export interface RecordingLogger {
  warn(obj: object, msg: string): void;
}

/** Everything one recording needs. */
export interface SessionRecordingParts {
  identity: CastIdentity;
  enforce: boolean;
  upload: RecordingUpload;
  sink: SinkLabel;
  metrics: RecordingMetrics;
  log: RecordingLogger;
  /** `--session-recording-max-bytes` (0 = none). */
  maxOutputBytes: number;
  maxBufferBytes?: number;
  /** Wall-clock start (ms since the epoch); default now. */
  startedAtMs?: number;
}

/** A recorded exec/attach session. */
export class SessionRecording implements RemoteCommandObserver {
  readonly id: string;
  readonly enforce: boolean;
  readonly #parts: SessionRecordingParts;
  readonly #writer: AsciicastWriter;
  readonly #abort = new AbortController();
  readonly #t0 = performance.now();
  readonly #startedAtMs: number;
  readonly #maxBuffer: number;
  #exit: CastExit | undefined;
  #dropping = false;
  #droppedBytes = 0;
  #hadGap = false;
  #failed = false;
  #unreadable = false;
  #abandoned = false;
  #creation: Promise<RecordingUnavailableError | undefined> | undefined;
  /** A creation is awaited before the client's upgrade: its failure refuses the session (no `fatal`). */
  #refuseAtCreation = false;
  #refusedAtCreation = false;
  #closed = false;
  #ending = false;
  #done: Promise<RecordingSummary> | undefined;
  #whenDone!: (p: Promise<RecordingSummary>) => void;
  readonly #finished = new Promise<RecordingSummary>((resolve) => (this.#whenDone = (p) => void p.then(resolve)));

  constructor(parts: SessionRecordingParts) {
    this.#parts = parts;
    this.id = parts.identity.sessionId;
    this.enforce = parts.enforce;
    this.#startedAtMs = parts.startedAtMs ?? Date.now();
    this.#maxBuffer = parts.maxBufferBytes ?? DEFAULT_MAX_BUFFER_BYTES;
    parts.upload.onError((err) => this.#sinkFailed(err));
    parts.upload.onDrain(() => this.#drained());
    if (this.created) parts.metrics.addActiveRecordings(1);
    this.#writer = new AsciicastWriter(parts.identity, (text) => this.#write(text), {
      startedAtMs: this.#startedAtMs,
      maxOutputBytes: parts.maxOutputBytes,
    });
  }

  get fatal(): AbortSignal {
    return this.#abort.signal;
  }

  /**
   * False while the recording exists nowhere (the session recorder's recordings, before the upstream's
   * 101: `deferred-upload.ts`); true once {@link upgraded}, and always for one given an open upload.
   */
  get created(): boolean {
    const upload = this.#parts.upload;
    return !(upload instanceof DeferredUpload) || (upload.created && !this.#refusedAtCreation);
  }

  /**
   * The upstream's 101 arrived and the client is upgraded: create the recording on the sink now, with
   * what was observed so far. A creation that fails is a sink failure of the running session
   * (enforce: `fatal`, the relay ends it with the Status). The translator calls it (v5 carries a Status).
   */
  upgraded(): void {
    void this.#create(false);
  }

  /**
   * The upstream's 101 arrived, the client has not got it yet (the passthrough: a SPDY client cannot
   * be told a Status before its streams exist): create the recording now. Enforce: resolves once it
   * is created, or with the error to refuse the session with instead of relaying the 101 (nothing is
   * stored; `enforce_refusals{phase="start"}`). Fail open: resolves at once.
   */
  create(): Promise<RecordingUnavailableError | undefined> {
    return this.#create(true);
  }

  #create(wait: boolean): Promise<RecordingUnavailableError | undefined> {
    if (this.#creation) return this.#creation;
    const upload = this.#parts.upload;
    if (!(upload instanceof DeferredUpload) || this.#done) return (this.#creation = Promise.resolve(undefined));
    this.#parts.metrics.addActiveRecordings(1);
    this.#refuseAtCreation = wait && this.enforce;
    if (!this.#refuseAtCreation) {
      upload.create();
      return (this.#creation = Promise.resolve(undefined));
    }
    return (this.#creation = upload.whenCreated().then(
      () => {
        this.#refuseAtCreation = false;
        return undefined;
      },
      (e: unknown) => {
        // Refused before the client's upgrade: this recording never existed (see #sinkFailed).
        this.#refusedAtCreation = true;
        this.#parts.metrics.addActiveRecordings(-1);
        return new RecordingUnavailableError('sink_open_failed', { cause: e });
      },
    ));
  }

  /**
   * The session never got the upstream's 101 (`statusCode`: what the client was answered): nothing was
   * or will be stored for it; counted as a refused attempt. No-op once created.
   */
  abandon(statusCode: number): void {
    if (this.created || this.#abandoned) return;
    this.#abandoned = true;
    this.#parts.metrics.incRefusedAttempt(statusCode);
    void this.finish();
  }

  /** Who the recording names (the audit line carries the same). */
  get caller(): { user?: string; userUnknown?: string } {
    const { user, userUnknown } = this.#parts.identity;
    return { ...(user !== undefined ? { user } : {}), ...(userUnknown !== undefined ? { userUnknown } : {}) };
  }

  /** What is recorded (`full` includes stdin: a tap unmasks and copies stdin only then). */
  get records(): 'output' | 'full' {
    return this.#parts.identity.record;
  }

  /** Seconds since the start. */
  #now(): number {
    return (performance.now() - this.#t0) / 1000;
  }

  stdin(data: Buffer): void {
    if (!this.#closed && !this.#failed) this.#writer.input(data, this.#now());
  }

  output(stream: 'stdout' | 'stderr', data: Buffer): void {
    if (!this.#closed && !this.#failed) this.#writer.output(stream, data, this.#now());
  }

  resize(cols: number, rows: number): void {
    if (!this.#closed && !this.#failed) this.#writer.resize(cols, rows, this.#now());
  }

  exit(exit: CastExit): void {
    this.#exit ??= exit;
  }

  /** The outcome seen so far (the tap decoded the error stream), if any: the passthrough's audit line takes its exit code. */
  get exitStatus(): CastExit | undefined {
    return this.#exit;
  }

  close(bytes?: RelayedBytes): void {
    void this.finish(bytes);
  }

  /** Resolves with the summary once the recording was finished by whoever closes it (the relay, a tap). */
  whenFinished(): Promise<RecordingSummary> {
    return this.#finished;
  }

  /** End the recording: the exit marker, then the upload's finish with the summary. Idempotent. */
  finish(bytes?: RelayedBytes): Promise<RecordingSummary> {
    if (this.#done) return this.#done;
    if (!this.created) {
      // Never upgraded: nothing exists on the sink, and nothing is stored now.
      this.#closed = true;
      this.#done = Promise.resolve(this.#summary(bytes));
      this.#whenDone(this.#done);
      return this.#done;
    }
    this.#closed = true;
    if (!this.#failed) {
      // The last lines go out whatever the buffer's fill (a few hundred bytes): a recording that is
      // still dropping says how much it lost, and the exit status is never lost.
      this.#ending = true;
      if (this.#dropping) this.#drained(true);
      this.#writer.end(this.#exit, this.#now());
    }
    const summary = this.#summary(bytes);
    const { upload, metrics, sink, log } = this.#parts;
    this.#done = (this.#failed ? upload.abort(summary) : upload.finish(summary)).then(
      () => summary,
      (err: Error) => {
        // The summary could not be stored: the recording is incomplete on the sink.
        if (!this.#failed) metrics.incSinkError(sink, 'write');
        log.warn({ recordingId: this.id, err: { message: err.message } }, 'session recording could not be finished');
        summary.result = 'incomplete';
        return summary;
      },
    ).then((s) => {
      metrics.incRecording(this.#parts.identity.subresource, s.result);
      metrics.addActiveRecordings(-1);
      return s;
    });
    this.#whenDone(this.#done);
    return this.#done;
  }

  #summary(bytes: RelayedBytes | undefined): RecordingSummary {
    const id = this.#parts.identity;
    const exit = this.#exit;
    let result: RecordingResult = 'complete';
    if (this.#abort.signal.aborted) result = 'terminated';
    else if (this.#failed || this.#unreadable) result = 'incomplete';
    else if (this.#hadGap) result = 'gap';
    else if (this.#writer.limitReached) result = 'truncated';
    return {
      id: this.id,
      subresource: id.subresource,
      ...(id.user !== undefined ? { user: id.user } : {}),
      ...(id.groups !== undefined ? { groups: [...id.groups] } : {}),
      ...(id.userUnknown !== undefined ? { userUnknown: id.userUnknown } : {}),
      ...(id.cluster !== undefined ? { cluster: id.cluster } : {}),
      namespace: id.namespace,
      pod: id.pod,
      ...(id.container !== undefined ? { container: id.container } : {}),
      command: [...id.command],
      tty: id.tty,
      record: id.record,
      enforce: this.enforce,
      start: new Date(this.#startedAtMs).toISOString(),
      durationSeconds: Math.round(this.#now() * 1000) / 1000,
      exitCode: exit !== undefined && 'exitCode' in exit ? exit.exitCode : null,
      ...(exit !== undefined && 'error' in exit ? { error: exit.error } : {}),
      recordedBytes: this.#writer.recordedBytes,
      ...(bytes ? { bytesToUpstream: bytes.toUpstream, bytesToClient: bytes.toClient } : {}),
      result,
      ...(id.recordedBy !== undefined ? { recordedBy: id.recordedBy } : {}),
    };
  }

  #write(text: string | Buffer): void {
    if (this.#failed) return;
    const { upload, metrics, sink } = this.#parts;
    const n = typeof text === 'string' ? Buffer.byteLength(text) : text.length;
    // Dropping, and the sink has room again (a drain may never come when nothing was pending).
    if (this.#dropping && upload.pendingBytes + n <= this.#maxBuffer / 2) this.#drained();
    if (this.#dropping) {
      this.#droppedBytes += n;
      return;
    }
    if (upload.pendingBytes + n > this.#maxBuffer && !this.#ending) {
      if (this.enforce) return this.#fatal('sink_too_slow');
      this.#dropping = true;
      this.#droppedBytes = n;
      if (!this.#hadGap) metrics.incDropped('sink_slow');
      this.#hadGap = true;
      this.#parts.log.warn({ recordingId: this.id, bufferBytes: this.#maxBuffer }, 'session recording sink too slow: dropping events');
      return;
    }
    metrics.addRecordedBytes(sink, n);
    upload.write(text);
  }

  #drained(force = false): void {
    if (!this.#dropping || this.#failed || (!force && this.#parts.upload.pendingBytes > this.#maxBuffer / 2)) return;
    this.#dropping = false;
    const n = this.#droppedBytes;
    this.#droppedBytes = 0;
    // At the last event's time (t=0 is clamped to it): the gap lies between that event and the next.
    this.#writer.marker(`recording gap: ${n} bytes of events dropped (the recording sink was too slow)`, 0);
  }

  #sinkFailed(err: Error): void {
    if (this.#failed) return;
    const { metrics, sink, log } = this.#parts;
    // The first creation on the sink, after the upgrade (`deferred-upload.ts`), or a later write.
    const opening = err instanceof SinkOpenError;
    metrics.incSinkError(sink, opening ? 'open' : 'write');
    log.warn({ recordingId: this.id, sink, err: { message: err.message } }, opening ? 'session recording could not be created' : 'session recording sink failed');
    if (opening && this.#refuseAtCreation) {
      // The session is refused before the client's upgrade (`create()` answers it): nothing runs.
      this.#failed = true;
      metrics.incEnforceRefusal('start');
      return;
    }
    if (this.enforce) return this.#fatal(opening ? 'sink_open_failed' : 'sink_failed', err);
    this.#failed = true;
    metrics.incDropped(opening ? 'open_failed' : 'sink_error');
  }

  unreadable(protocol: TapProtocol, cause: Error): void {
    if (this.#unreadable || this.#closed) return;
    this.#unreadable = true;
    const { metrics, log } = this.#parts;
    const code = (cause as { code?: unknown }).code;
    metrics.incUnreadableStream(protocol);
    // The cause's code only: its message may quote what the peer sent.
    log.warn({ recordingId: this.id, protocol, err: { name: cause.name, code } }, 'session recording: the stream could not be read');
    if (!this.#failed) this.#writer.marker(`recording stopped: the session's ${protocol} stream could not be read${typeof code === 'string' ? ` (${code})` : ''}`, this.#now());
    if (!this.enforce || this.#abort.signal.aborted) return;
    metrics.incEnforceRefusal('mid_session');
    this.#abort.abort(new RecordingUnavailableError('stream_unreadable', { cause }));
  }

  #fatal(reason: RecordingUnavailableReason, cause?: unknown): void {
    if (this.#abort.signal.aborted) return;
    this.#failed = true;
    this.#parts.metrics.incEnforceRefusal('mid_session');
    this.#abort.abort(new RecordingUnavailableError(reason, { cause }));
  }
}
