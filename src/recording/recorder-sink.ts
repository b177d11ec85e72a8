/**
 * The remote recorder sink (`--session-recorder-url`): each recording is streamed to the recorder
 * as it is produced, one streaming `PUT /api/v1/ingest/{id}` per session (chunked body; the
 * recorder's answer streams byte acks: `recorder-ingest.ts`), then its summary.
 *
 * Bytes stay in memory until the recorder acked them (that is the session's bounded buffer:
 * `pendingBytes`). When the connection is lost:
 * - an enforced recording fails at once (`onError` in the same turn as the socket's close: the
 *   session ends well within a second);
 * - otherwise the upload resumes (`?offset=` the acked size, or the size the recorder says it has)
 *   with a back-off for up to {@link RECONNECT_WINDOW_MS}; events that did not fit the buffer
 *   meanwhile are a marked gap (`session-recording.ts`); after the window the recording fails.
 * No ack for {@link ACK_TIMEOUT_MS} while bytes are waiting counts as a lost connection (a silent
 * network partition).
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { recorderFetch, recorderRequest, type RecorderEndpoint } from './recorder-client.js';
import type { RecordingSink, RecordingSummary, RecordingUpload } from './sink.js';

/** How long a fail-open upload keeps trying to resume. */
export const RECONNECT_WINDOW_MS = 30_000;
/** Longest wait for an ack while bytes are unacknowledged. */
export const ACK_TIMEOUT_MS = 5_000;
/** How long the end of an upload (final ack, summary) may take. */
export const FINISH_TIMEOUT_MS = 10_000;

/** Options of {@link RecorderSink}. */
export interface RecorderSinkOptions {
  reconnectWindowMs?: number;
  ackTimeoutMs?: number;
}

class RecorderUpload implements RecordingUpload {
  readonly #ep: RecorderEndpoint;
  readonly #id: string;
  readonly #failFast: boolean;
  readonly #o: Required<RecorderSinkOptions>;
  #unacked: Buffer[] = [];
  /** Offset of the first byte of #unacked. */
  #acked = 0;
  #total = 0;
  #req: ClientRequest | undefined;
  #connected = false;
  #ending = false;
  #failure: Error | undefined;
  #lostAt: number | undefined;
  #ackTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #errorListeners: Array<(e: Error) => void> = [];
  #drainListeners: Array<() => void> = [];
  #doneWaiters: Array<(e?: Error) => void> = [];

  constructor(ep: RecorderEndpoint, id: string, failFast: boolean, o: Required<RecorderSinkOptions>) {
    this.#ep = ep;
    this.#id = id;
    this.#failFast = failFast;
    this.#o = o;
  }

  /** Connect (`resume`: at `offset`); resolves once the recorder accepted (200), rejects otherwise. */
  connect(offset: number, resume: boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (e?: Error): void => {
        if (settled) return;
        settled = true;
        if (e) reject(e);
        else resolve();
      };
      let req: ClientRequest;
      try {
        const path = `/api/v1/ingest/${this.#id}${resume ? `?resume=1&offset=${offset}` : ''}`;
        req = recorderRequest(this.#ep, 'PUT', path, { 'content-type': 'application/x-asciicast' });
      } catch (e) {
        return settle(e as Error);
      }
      this.#req = req;
      // Send the head now: the body may not start before the recorder's answer.
      req.flushHeaders();
      req.on('socket', (s) => (s as { setNoDelay?: (b: boolean) => void }).setNoDelay?.(true));
      req.on('response', (res: IncomingMessage) => {
        if (res.statusCode === 409 && resume) {
          // The recorder stored more than it acked before the connection was lost: resume at its size.
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => {
            const size = (JSON.parse(body || '{}') as { size?: number }).size;
            if (typeof size !== 'number' || size < this.#acked || size > this.#total) return settle(new Error(`recorder refused the resume: ${body}`));
            this.#ackTo(size);
            this.connect(size, true).then(() => settle(), (e: Error) => settle(e));
          });
          return;
        }
        if (res.statusCode !== 200) {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => settle(new Error(`recorder answered ${res.statusCode}: ${body.slice(0, 200)}`)));
          return;
        }
        this.#connected = true;
        this.#lostAt = undefined;
        // Everything not acked goes (again) from the offset the recorder accepted.
        for (const b of this.#unacked) req.write(b);
        if (this.#ending) req.end();
        settle();
        let partial = '';
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          const lines = (partial + text).split('\n');
          partial = lines.pop()!;
          for (const l of lines) this.#answer(l);
        });
        res.on('close', () => this.#lost(req, new Error('the recorder closed the upload')));
      });
      req.on('error', (e) => {
        settle(e);
        this.#lost(req, e);
      });
      req.on('close', () => this.#lost(req, new Error('connection to the recorder lost')));
      this.#armAckTimer();
    });
  }

  #answer(line: string): void {
    if (line === '') return;
    let m: { ack?: number; done?: boolean; error?: string };
    try {
      m = JSON.parse(line) as typeof m;
    } catch {
      return;
    }
    if (typeof m.error === 'string') return this.#fail(new Error(`recorder: ${m.error}`));
    if (typeof m.ack === 'number') this.#ackTo(m.ack);
    if (m.done) {
      this.#connected = false;
      for (const w of this.#doneWaiters.splice(0)) w();
    }
  }

  #ackTo(n: number): void {
    let drop = n - this.#acked;
    if (drop <= 0) return;
    this.#acked = n;
    while (drop > 0 && this.#unacked.length > 0) {
      const b = this.#unacked[0]!;
      if (b.length <= drop) {
        this.#unacked.shift();
        drop -= b.length;
      } else {
        this.#unacked[0] = b.subarray(drop);
        drop = 0;
      }
    }
    this.#armAckTimer();
    for (const l of this.#drainListeners) l();
  }

  #armAckTimer(): void {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = undefined;
    if (this.#failure || this.#acked === this.#total && !this.#ending) return;
    const req = this.#req;
    this.#ackTimer = setTimeout(() => req?.destroy(new Error(`no ack from the recorder for ${this.#o.ackTimeoutMs} ms`)), this.#o.ackTimeoutMs);
    this.#ackTimer.unref();
  }

  #lost(req: ClientRequest, e: Error): void {
    if (req !== this.#req || this.#failure) return;
    this.#req = undefined;
    const wasDone = !this.#connected && this.#ending && this.#acked === this.#total;
    this.#connected = false;
    if (wasDone) return;
    if (this.#failFast) return this.#fail(e);
    this.#lostAt ??= Date.now();
    if (Date.now() - this.#lostAt > this.#o.reconnectWindowMs) return this.#fail(e);
    const retry = (): void => {
      this.#retryTimer = undefined;
      this.connect(this.#acked, true).catch(() => undefined);
    };
    this.#retryTimer = setTimeout(retry, 500);
    this.#retryTimer.unref();
  }

  #fail(e: Error): void {
    if (this.#failure) return;
    this.#failure = e;
    clearTimeout(this.#ackTimer);
    clearTimeout(this.#retryTimer);
    this.#req?.destroy();
    this.#unacked = [];
    for (const l of this.#errorListeners.splice(0)) l(e);
    for (const w of this.#doneWaiters.splice(0)) w(e);
  }

  write(text: string | Buffer): void {
    if (this.#failure || this.#ending) return;
    const b = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
    this.#unacked.push(b);
    this.#total += b.length;
    if (this.#connected) this.#req?.write(b);
    if (!this.#ackTimer) this.#armAckTimer();
  }

  get pendingBytes(): number {
    return this.#total - this.#acked;
  }

  onError(listener: (err: Error) => void): void {
    if (this.#failure) listener(this.#failure);
    else this.#errorListeners.push(listener);
  }

  onDrain(listener: () => void): void {
    this.#drainListeners.push(listener);
  }

  async finish(summary: RecordingSummary): Promise<void> {
    this.#ending = true;
    const done = new Promise<void>((resolve, reject) => {
      if (this.#failure) return reject(this.#failure);
      this.#doneWaiters.push((e) => (e ? reject(e) : resolve()));
      const t = setTimeout(() => this.#fail(new Error('the recorder did not confirm the end of the upload')), FINISH_TIMEOUT_MS);
      t.unref();
      this.#doneWaiters.push(() => clearTimeout(t));
    });
    if (this.#connected) this.#req?.end();
    await done;
    clearTimeout(this.#ackTimer);
    await putSummary(this.#ep, summary);
  }

  async abort(summary: RecordingSummary): Promise<void> {
    this.#ending = true;
    clearTimeout(this.#ackTimer);
    clearTimeout(this.#retryTimer);
    this.#req?.destroy();
    this.#req = undefined;
    await putSummary(this.#ep, summary).catch(() => undefined);
  }
}

async function putSummary(ep: RecorderEndpoint, summary: RecordingSummary): Promise<void> {
  let last: Error | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const a = await recorderFetch(ep, 'PUT', `/api/v1/ingest/${summary.id}/summary`, JSON.stringify(summary), { 'content-type': 'application/json' });
      if (a.status === 200) return;
      last = new Error(`recorder answered ${a.status} to the summary: ${a.body.toString().slice(0, 200)}`);
      if (a.status < 500) break;
    } catch (e) {
      last = e as Error;
    }
    await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
  }
  throw last ?? new Error('summary not stored');
}

/** Recordings streamed to a remote recorder. */
export class RecorderSink implements RecordingSink {
  readonly kind = 'recorder' as const;
  readonly #ep: RecorderEndpoint;
  readonly #o: Required<RecorderSinkOptions>;

  constructor(endpoint: RecorderEndpoint, options: RecorderSinkOptions = {}) {
    this.#ep = endpoint;
    this.#o = { reconnectWindowMs: options.reconnectWindowMs ?? RECONNECT_WINDOW_MS, ackTimeoutMs: options.ackTimeoutMs ?? ACK_TIMEOUT_MS };
  }

  /** Healthy: the recorder answers `GET /healthz` (nothing is created there; checked before an upgrade). */
  async check(): Promise<void> {
    const a = await recorderFetch(this.#ep, 'GET', '/healthz');
    if (a.status !== 200) throw new Error(`recorder answered ${a.status} to /healthz`);
  }

  async open(id: string, options: { enforce?: boolean } = {}): Promise<RecordingUpload> {
    const upload = new RecorderUpload(this.#ep, id, options.enforce ?? false, this.#o);
    await upload.connect(0, false);
    return upload;
  }

  writeRecord(summary: RecordingSummary): Promise<void> {
    return putSummary(this.#ep, summary);
  }

  async close(): Promise<void> {}
}
