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
 * - `PUT /api/v1/ingest/{id}/summary` — the recording's index entry (JSON, validated: 400 naming
 *   each bad field). The recorder closes the cast, hashes it itself, and writes `<id>.json` with
 *   `recordedBy` set to the AUTHENTICATED replica (never what the body claims); who and what (user,
 *   groups, cluster, namespace, pod, container, subresource, command, tty, record) and the start
 *   come from the cast's header, written when the recording was created, not from the body. A
 *   summary without a cast is a metadata record (port-forward: `record: metadata`), stored once.
 *
 * Ownership: the replica that created a recording owns it (`recording-owner.ts`: on disk from
 * creation, so a recorder restart changes nothing); only it may resume the upload or write the
 * summary (403 for any other). Once the summary is stored the recording is immutable: resuming,
 * re-creating or re-summarising it is 409 for every replica, the owner included.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { access, link, readFile, unlink, writeFile } from 'node:fs/promises';
import { aggregateMessage } from '../auth/field-errors.js';
import { CastFileWriter, CastOffsetError, castPath, FILE_MODE, hashFile, summaryPath } from './cast-file.js';
import type { LiveCasts } from './live-casts.js';
import { claimRecording, readOwner, releaseRecording } from './recording-owner.js';
import { readCastHeader } from './recording-store.js';
import { isRecordingId, type RecordingSummary } from './sink.js';
import { headerFacts, validateRecordingSummary } from './summary-validation.js';

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

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    (e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return false;
      throw e;
    },
  );
}

/**
 * Write the index entry only if there is none: a temporary file, then `link(2)`, which fails with
 * EEXIST instead of replacing (a rename would replace). Resolves false when an entry exists.
 */
async function writeSummaryOnce(dir: string, summary: RecordingSummary): Promise<boolean> {
  const final = summaryPath(dir, summary.id);
  const tmp = `${final}.tmp-${process.pid}`;
  await writeFile(tmp, JSON.stringify(summary, null, 2) + '\n', { mode: FILE_MODE, flag: 'w' });
  try {
    await link(tmp, final);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

/** Who and what: taken from the cast's header, never from the summary's body. */
const IDENTITY_FIELDS = ['subresource', 'user', 'groups', 'userUnknown', 'cluster', 'namespace', 'pod', 'container', 'command', 'tty', 'record'] as const;

/**
 * `summary` with who and what taken from the cast's header, when it has one (a recording whose
 * upload stopped before its first line has none: the owner's validated summary stands). The start
 * is the header's `timestamp` (whole seconds) unless the summary's start lies within that second.
 */
function withHeaderIdentity(summary: RecordingSummary, header: unknown): RecordingSummary {
  if (header === undefined) return summary;
  const facts = headerFacts(header);
  const k = facts.identity as Record<string, unknown>;
  const who: Record<string, unknown> = { id: summary.id };
  for (const f of IDENTITY_FIELDS) if (k[f] !== undefined) who[f] = k[f];
  who.subresource ??= 'exec';
  who.namespace ??= '';
  who.pod ??= '';
  who.record ??= 'output';
  const rest: Record<string, unknown> = { ...summary };
  for (const f of IDENTITY_FIELDS) delete rest[f];
  if (facts.timestamp !== undefined) {
    const from = facts.timestamp * 1000;
    const claimed = Date.parse(summary.start);
    if (!(claimed >= from && claimed < from + 1000)) rest.start = new Date(from).toISOString();
  }
  return { ...who, ...rest } as unknown as RecordingSummary;
}

/** The ingest side of one recorder. */
export class RecorderIngest {
  readonly #dir: string;
  readonly #live: LiveCasts;
  /** Open writers (between the body's end and the summary, or while uploading). */
  readonly #writers = new Map<string, CastFileWriter>();
  readonly #graceTimers = new Map<string, NodeJS.Timeout>();
  /** Per recording, the tail of its queue: creating, resuming and finishing one never interleave. */
  readonly #queues = new Map<string, Promise<unknown>>();
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

  /** Run `fn` after every earlier step of recording `id` (they all touch its files). */
  #serially<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const run = (this.#queues.get(id) ?? Promise.resolve()).then(fn, fn);
    const tail = run.catch(() => undefined);
    this.#queues.set(id, tail);
    void tail.then(() => {
      if (this.#queues.get(id) === tail) this.#queues.delete(id);
    });
    return run;
  }

  /** Handle `PUT /api/v1/ingest/{id}[/summary]` from `replica`. */
  async handle(req: IncomingMessage, res: ServerResponse, id: string, part: 'cast' | 'summary', replica: string, offset: number, resume: boolean): Promise<void> {
    if (!isRecordingId(id)) return json(res, 400, { error: 'not a recording id' });
    if (part === 'summary') return this.#summary(req, res, id, replica);
    const writer = await this.#serially(id, () => this.#open(res, id, replica, offset, resume));
    if (writer === undefined) return;
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
      // Connection lost mid-upload: keep what was stored, wait for a resume (unless the summary came first).
      if (this.#writers.get(id) !== writer) return;
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

  /** Create or resume the cast of `id` for `replica`; undefined when refused (the answer is sent). */
  async #open(res: ServerResponse, id: string, replica: string, offset: number, resume: boolean): Promise<CastFileWriter | undefined> {
    const refuse = (code: number, body: object): undefined => void json(res, code, body);
    let writer: CastFileWriter;
    try {
      if (await exists(summaryPath(this.#dir, id))) return refuse(409, { error: `recording ${id} is finished` });
      if (resume) {
        const owner = await readOwner(this.#dir, id);
        if (owner === undefined) {
          if (!(await exists(castPath(this.#dir, id)))) return refuse(404, { error: 'no such recording to resume' });
          return refuse(403, { error: `recording ${id} has no recorded owner` });
        }
        if (owner.replica !== replica) return refuse(403, { error: `recording ${id} belongs to another replica` });
      } else if ((await claimRecording(this.#dir, id, replica)).replica !== replica) {
        return refuse(409, { error: 'recording exists' });
      }
      if (this.#writers.has(id)) return refuse(409, { error: 'an upload of this recording is in progress' });
      writer = resume ? await CastFileWriter.resume(this.#dir, id, offset) : await CastFileWriter.create(this.#dir, id);
    } catch (e) {
      if (e instanceof CastOffsetError) return refuse(409, { error: e.message, size: e.size });
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return refuse(409, { error: 'recording exists' });
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return refuse(404, { error: 'no such recording to resume' });
      return refuse(507, { error: `cannot store the recording: ${(e as Error).message}` });
    }
    this.#writers.set(id, writer);
    clearTimeout(this.#graceTimers.get(id));
    this.#graceTimers.delete(id);
    if (!resume) this.#live.open(id);
    else if (!this.#live.isLive(id)) this.#live.open(id, await readFile(castPath(this.#dir, id)).catch(() => undefined));
    return writer;
  }

  async #summary(req: IncomingMessage, res: ServerResponse, id: string, replica: string): Promise<void> {
    let body = '';
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > MAX_SUMMARY_BYTES) return json(res, 413, { error: 'summary too large' });
      body += (c as Buffer).toString('utf8');
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return json(res, 400, { error: 'summary is not JSON' });
    }
    const checked = validateRecordingSummary(parsed);
    if (!checked.ok) return json(res, 400, { error: `invalid summary: ${aggregateMessage(checked.errors)}`, causes: checked.errors.map((e) => ({ field: e.field, message: e.body() })) });
    if (checked.summary.id !== id) return json(res, 400, { error: 'summary id does not match' });
    return this.#serially(id, () => this.#store(res, id, replica, checked.summary));
  }

  /** Store the index entry of `id` (validated `summary`) for `replica`, once. */
  async #store(res: ServerResponse, id: string, replica: string, summary: RecordingSummary): Promise<void> {
    try {
      if (await exists(summaryPath(this.#dir, id))) return json(res, 409, { error: `recording ${id} is finished` });
      const owner = await readOwner(this.#dir, id);
      const hasCast = await exists(castPath(this.#dir, id));
      if (owner !== undefined && owner.replica !== replica) return json(res, 403, { error: `recording ${id} belongs to another replica` });
      if (owner === undefined && hasCast) return json(res, 403, { error: `recording ${id} has no recorded owner` });
      if (!hasCast && (owner !== undefined || summary.record !== 'metadata' || summary.subresource !== 'portforward')) {
        return json(res, 404, { error: 'no such recording (only a port-forward metadata record has no cast)' });
      }
      let final = summary;
      let stored: { sha256?: string; castBytes?: number } = {};
      if (hasCast) {
        final = withHeaderIdentity(summary, await readCastHeader(castPath(this.#dir, id)));
        if (final.record === 'metadata') return json(res, 400, { error: 'record: Invalid value: "metadata": a recording with a cast is not a metadata record' });
        const writer = this.#writers.get(id);
        this.#writers.delete(id);
        clearTimeout(this.#graceTimers.get(id));
        this.#graceTimers.delete(id);
        const { sha256, bytes } = writer ? await writer.close() : await hashFile(castPath(this.#dir, id));
        stored = { sha256, castBytes: bytes };
      }
      // The replica's own claims of size and hash are never kept: the recorder hashed what it stored.
      const { sha256: _claimed, castBytes: _claimedBytes, ...rest } = final;
      const entry: RecordingSummary = { ...rest, ...stored, recordedBy: replica };
      if (!(await writeSummaryOnce(this.#dir, entry))) return json(res, 409, { error: `recording ${id} is finished` });
      await releaseRecording(this.#dir, id).catch(() => undefined);
      this.#live.end(id);
      this.#onStored(entry);
      json(res, 200, { stored: true, ...stored });
    } catch (e) {
      json(res, 507, { error: `cannot store the summary: ${(e as Error).message}` });
    }
  }
}
