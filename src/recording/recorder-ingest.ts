/**
 * The recorder's ingest API, what proxy replicas stream recordings to (`recorder-sink.ts` is the
 * other end):
 *
 * - `PUT /api/v1/ingest/{id}` — the cast bytes, as a streaming (chunked) body; creates `<id>.cast`
 *   (409 if it exists). `?resume=1&offset=N` resumes an upload whose connection was lost: the bytes
 *   from offset N (409 `{"error", "size"}` unless N is the stored size; the replica then resumes there). The answer (200,
 *   `application/x-ndjson`) starts at once and streams `{"ack": <bytes stored>}` lines — every
 *   {@link ACK_INTERVAL_MS} while bytes arrive and at least every {@link IDLE_ACK_MS} — then
 *   `{"ack": n, "done": true}` when the body ended and everything is written, or `{"error": "…"}` when
 *   the storage failed. A replica that sees no ack for its timeout treats the recorder as gone.
 * - `PUT /api/v1/ingest/{id}/summary` — the recording's index entry (JSON). The recorder closes the
 *   cast, hashes it itself, and writes `<id>.json` with `recordedBy` set to the AUTHENTICATED
 *   replica (never what the body claims). A summary without a cast is a metadata record (port-forward).
 *
 * Only the replica that created a recording may resume it or write its summary (while the recorder
 * runs; after a restart any authenticated replica may resume).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readFile } from 'node:fs/promises';
import { CastFileWriter, CastOffsetError, castPath, hashFile, writeSummary } from './cast-file.js';
import type { LiveCasts } from './live-casts.js';
import { isRecordingId, type RecordingSummary } from './sink.js';

/** Interval of acks while bytes arrive. */
export const ACK_INTERVAL_MS = 200;
/** Longest time between acks on an idle upload (the replica's liveness check). */
export const IDLE_ACK_MS = 1_000;
/** Queued bytes past which the recorder stops reading the upload (TCP backpressure to the replica). */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;
/** Largest summary body. */
export const MAX_SUMMARY_BYTES = 64 * 1024;
/** How long a recording whose upload connection was lost stays live, waiting for a resume. */
export const RESUME_GRACE_MS = 60_000;

function json(res: ServerResponse, code: number, body: object): void {
  res.writeHead(code, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

/** The ingest side of one recorder. */
export class RecorderIngest {
  readonly #dir: string;
  readonly #live: LiveCasts;
  /** Recording id → the replica that created it. */
  readonly #owners = new Map<string, string>();
  /** Open writers (between the body's end and the summary, or while uploading). */
  readonly #writers = new Map<string, CastFileWriter>();
  readonly #graceTimers = new Map<string, NodeJS.Timeout>();
  readonly #onStored: (summary: RecordingSummary) => void;

  constructor(dir: string, live: LiveCasts, onStored: (summary: RecordingSummary) => void = () => undefined) {
    this.#dir = dir;
    this.#live = live;
    this.#onStored = onStored;
  }

  /** True while `id` is being uploaded. */
  isActive(id: string): boolean {
    return this.#writers.has(id) || this.#live.isLive(id);
  }

  /** Handle `PUT /api/v1/ingest/{id}[/summary]` from `replica`. */
  async handle(req: IncomingMessage, res: ServerResponse, id: string, part: 'cast' | 'summary', replica: string, offset: number, resume: boolean): Promise<void> {
    if (!isRecordingId(id)) return json(res, 400, { error: 'not a recording id' });
    const owner = this.#owners.get(id);
    if (owner !== undefined && owner !== replica) return json(res, 403, { error: `recording ${id} belongs to another replica` });
    if (part === 'summary') return this.#summary(req, res, id, replica);
    if (this.#writers.has(id)) return json(res, 409, { error: 'an upload of this recording is in progress' });
    let writer: CastFileWriter;
    try {
      writer = resume ? await CastFileWriter.resume(this.#dir, id, offset) : await CastFileWriter.create(this.#dir, id);
    } catch (e) {
      if (e instanceof CastOffsetError) return json(res, 409, { error: e.message, size: e.size });
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return json(res, 409, { error: 'recording exists' });
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return json(res, 404, { error: 'no such recording to resume' });
      return json(res, 507, { error: `cannot store the recording: ${(e as Error).message}` });
    }
    this.#owners.set(id, replica);
    this.#writers.set(id, writer);
    clearTimeout(this.#graceTimers.get(id));
    this.#graceTimers.delete(id);
    if (!resume) this.#live.open(id);
    else if (!this.#live.isLive(id)) this.#live.open(id, await readFile(castPath(this.#dir, id)).catch(() => undefined));
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
    res.flushHeaders();
    let acked = -1;
    let lastAckAt = 0;
    const stored = (): number => writer.size - writer.pendingBytes;
    const ack = (force: boolean): void => {
      const n = stored();
      if (!force && n === acked && Date.now() - lastAckAt < IDLE_ACK_MS) return;
      acked = n;
      lastAckAt = Date.now();
      res.write(`{"ack":${n}}\n`);
    };
    ack(true);
    const timer = setInterval(() => ack(false), ACK_INTERVAL_MS);
    let failed = false;
    writer.onError((err) => {
      failed = true;
      clearInterval(timer);
      res.end(`${JSON.stringify({ error: `storage failed: ${err.message}` })}\n`);
      req.destroy();
    });
    writer.onDrain(() => {
      if (req.isPaused() && writer.pendingBytes < MAX_QUEUED_BYTES / 2) req.resume();
    });
    req.on('data', (chunk: Buffer) => {
      writer.write(chunk);
      this.#live.push(id, chunk);
      if (writer.pendingBytes > MAX_QUEUED_BYTES) req.pause();
    });
    let ended = false;
    req.on('end', () => {
      ended = true;
      // Everything written (not yet synced: the summary closes and syncs), then the final ack.
      const finish = (): void => {
        if (failed) return;
        if (writer.pendingBytes > 0) return void setTimeout(finish, 10);
        clearInterval(timer);
        res.end(`{"ack":${stored()},"done":true}\n`);
      };
      finish();
    });
    req.on('close', () => {
      clearInterval(timer);
      if (ended || failed) return;
      // Connection lost mid-upload: keep what was stored, wait for a resume.
      this.#writers.delete(id);
      void writer.close().catch(() => undefined);
      this.#graceTimers.set(
        id,
        setTimeout(() => {
          this.#graceTimers.delete(id);
          this.#live.end(id);
        }, RESUME_GRACE_MS).unref(),
      );
    });
  }

  async #summary(req: IncomingMessage, res: ServerResponse, id: string, replica: string): Promise<void> {
    let body = '';
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > MAX_SUMMARY_BYTES) return json(res, 413, { error: 'summary too large' });
      body += (c as Buffer).toString('utf8');
    }
    let summary: RecordingSummary;
    try {
      summary = JSON.parse(body) as RecordingSummary;
    } catch {
      return json(res, 400, { error: 'summary is not JSON' });
    }
    if (typeof summary !== 'object' || summary === null || summary.id !== id) return json(res, 400, { error: 'summary id does not match' });
    const writer = this.#writers.get(id);
    this.#writers.delete(id);
    clearTimeout(this.#graceTimers.get(id));
    this.#graceTimers.delete(id);
    let stored: { sha256?: string; castBytes?: number } = {};
    try {
      if (writer) {
        const { sha256, bytes } = await writer.close();
        stored = { sha256, castBytes: bytes };
      } else if (summary.record !== 'metadata') {
        const { sha256, bytes } = await hashFile(castPath(this.#dir, id));
        stored = { sha256, castBytes: bytes };
      }
      // The replica's own claims of size and hash are never kept: the recorder hashed what it stored.
      const { sha256: _claimed, castBytes: _claimedBytes, ...rest } = summary;
      const final: RecordingSummary = { ...rest, ...stored, recordedBy: replica };
      await writeSummary(this.#dir, final);
      this.#owners.delete(id);
      this.#live.end(id);
      this.#onStored(final);
      json(res, 200, { stored: true, ...stored });
    } catch (e) {
      json(res, 507, { error: `cannot store the summary: ${(e as Error).message}` });
    }
  }
}
