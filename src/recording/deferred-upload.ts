/**
 * A recording's upload that exists on the sink only once the session is upgraded: the session
 * recorder hands one to each exec/attach recording before the upgrade, and nothing is created on the
 * sink (no `.cast` file, no ingest upload) until {@link DeferredUpload.create} — when the upstream's
 * 101 has arrived. A session the upstream refuses (401, 403, …) leaves nothing behind, so callers
 * who are not allowed in cannot fill the recordings volume (docs/recording.md, "When a recording is
 * created").
 *
 * Until the sink has opened the upload, the cast text is queued here and counts as pending (the
 * session's bounded buffer applies to it as to any slow sink). An open that fails, or takes longer
 * than the open timeout, is reported once through `onError` as a {@link SinkOpenError}: enforce
 * then ends the session with its Status, fail open goes on unrecorded.
 */
import type { RecordingSummary, RecordingUpload } from './sink.js';

/** The sink could not create the recording after the upgrade (the cause says why). */
export class SinkOpenError extends Error {
  override readonly name = 'SinkOpenError';
  constructor(cause: unknown) {
    super(`the recording could not be created on the sink: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** How a {@link DeferredUpload} opens the real one. */
export interface DeferredUploadOptions {
  /** Open the upload on the sink (creates the recording there). */
  open: () => Promise<RecordingUpload>;
  /** How long the open may take; past it the upload fails (and a late one is handed to `late`). */
  timeoutMs: number;
  /** An upload that opened after the timeout: close it as a failed recording. */
  late: (upload: RecordingUpload) => void;
}

/** See the file comment. */
export class DeferredUpload implements RecordingUpload {
  readonly #o: DeferredUploadOptions;
  #queue: Array<string | Buffer> = [];
  #queued = 0;
  #real: RecordingUpload | undefined;
  #opening: Promise<RecordingUpload | undefined> | undefined;
  #failure: Error | undefined;
  readonly #errorListeners: Array<(e: Error) => void> = [];
  readonly #drainListeners: Array<() => void> = [];

  constructor(options: DeferredUploadOptions) {
    this.#o = options;
  }

  /** True once {@link create} was called. */
  get created(): boolean {
    return this.#opening !== undefined;
  }

  /** Resolves once the sink created the recording; rejects with the {@link SinkOpenError} when it could not. */
  whenCreated(): Promise<void> {
    this.create();
    return this.#opening!.then((upload) => {
      if (!upload) throw this.#failure ?? new SinkOpenError(new Error('not created'));
    });
  }

  /** Create the recording on the sink now (idempotent); the queued text follows once it is open. */
  create(): void {
    if (this.#opening) return;
    this.#opening = new Promise<RecordingUpload | undefined>((resolve) => {
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        this.#fail(new SinkOpenError(new Error(`no answer within ${this.#o.timeoutMs} ms`)));
        resolve(undefined);
      }, this.#o.timeoutMs);
      this.#o.open().then(
        (upload) => {
          clearTimeout(timer);
          if (timedOut) return this.#o.late(upload);
          this.#opened(upload);
          resolve(upload);
        },
        (e: unknown) => {
          clearTimeout(timer);
          if (timedOut) return;
          this.#fail(new SinkOpenError(e));
          resolve(undefined);
        },
      );
    });
  }

  #opened(upload: RecordingUpload): void {
    this.#real = upload;
    for (const l of this.#errorListeners) upload.onError(l);
    for (const l of this.#drainListeners) upload.onDrain(l);
    const queue = this.#queue;
    this.#queue = [];
    this.#queued = 0;
    for (const text of queue) upload.write(text);
    // The queue moved to the sink: the fill went down.
    if (queue.length > 0) for (const l of this.#drainListeners) l();
  }

  #fail(e: Error): void {
    if (this.#failure) return;
    this.#failure = e;
    this.#queue = [];
    this.#queued = 0;
    for (const l of this.#errorListeners.splice(0)) l(e);
  }

  write(text: string | Buffer): void {
    if (this.#failure) return;
    if (this.#real) return this.#real.write(text);
    this.#queue.push(text);
    this.#queued += typeof text === 'string' ? Buffer.byteLength(text) : text.length;
  }

  get pendingBytes(): number {
    return this.#real ? this.#real.pendingBytes : this.#queued;
  }

  onError(listener: (err: Error) => void): void {
    if (this.#failure) return listener(this.#failure);
    this.#errorListeners.push(listener);
    this.#real?.onError(listener);
  }

  onDrain(listener: () => void): void {
    this.#drainListeners.push(listener);
    this.#real?.onDrain(listener);
  }

  /** Never created: nothing to store. Otherwise once open, the real upload's finish. */
  async finish(summary: RecordingSummary): Promise<void> {
    const upload = await this.#opening;
    if (!this.#opening) return;
    if (!upload) throw this.#failure ?? new Error('the recording was not created');
    await upload.finish(summary);
  }

  async abort(summary: RecordingSummary): Promise<void> {
    const upload = await this.#opening;
    await upload?.abort(summary);
  }
}
