/**
 * One recording's files in a recordings directory, written as the session runs: `<id>.cast` (mode
 * 0600) appended through one queue, and at the end the `<id>.json` sidecar (the index entry, with the
 * cast's size and sha256) written atomically (temporary file, then rename).
 *
 * Durability: data is handed to the kernel as it comes and `fdatasync` runs at most once per
 * {@link SYNC_INTERVAL_MS} while there is unsynced data, so a crash of the machine loses at most
 * about a second; a crash of the process loses nothing already written.
 *
 * Used by the directory sink (the proxy writes its own recordings) and by the remote recorder (it
 * writes what replicas stream to it), so both directories have the same layout and
 * `kube-stream-proxy sessions` reads either.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, rename, stat, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { RecordingSummary } from './sink.js';

/** Longest time unsynced data stays in the page cache only. */
export const SYNC_INTERVAL_MS = 1000;

/** Mode of recording files (content may include anything the session showed). */
export const FILE_MODE = 0o600;

/** `<dir>/<id>.cast`. */
export function castPath(dir: string, id: string): string {
  return join(dir, `${id}.cast`);
}

/** `<dir>/<id>.json`. */
export function summaryPath(dir: string, id: string): string {
  return join(dir, `${id}.json`);
}

/** sha256 (hex) and size of a file, streamed. */
export async function hashFile(path: string): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(path)) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

/** Write the sidecar atomically (0600). */
export async function writeSummary(dir: string, summary: RecordingSummary): Promise<void> {
  const final = summaryPath(dir, summary.id);
  const tmp = `${final}.tmp-${process.pid}`;
  await writeFile(tmp, JSON.stringify(summary, null, 2) + '\n', { mode: FILE_MODE, flag: 'w' });
  await rename(tmp, final);
}

/** An open `<id>.cast`, appended in order. */
export class CastFileWriter {
  readonly dir: string;
  readonly id: string;
  readonly #fd: FileHandle;
  /** Incremental hash; undefined when the file was resumed (hashed from disk at the end). */
  readonly #hash: Hash | undefined;
  #queue: Buffer[] = [];
  #queued = 0;
  #size: number;
  #writing = false;
  #dirty = false;
  #syncTimer: NodeJS.Timeout | undefined;
  #failure: Error | undefined;
  #errorListeners: Array<(e: Error) => void> = [];
  #drainListeners: Array<() => void> = [];
  #idleWaiters: Array<() => void> = [];
  #closed = false;

  private constructor(dir: string, id: string, fd: FileHandle, size: number, fresh: boolean) {
    this.dir = dir;
    this.id = id;
    this.#fd = fd;
    this.#size = size;
    this.#hash = fresh ? createHash('sha256') : undefined;
  }

  /** Create `<id>.cast` (it must not exist). */
  static async create(dir: string, id: string): Promise<CastFileWriter> {
    const fd = await open(castPath(dir, id), 'wx', FILE_MODE);
    return new CastFileWriter(dir, id, fd, 0, true);
  }

  /**
   * Open an existing `<id>.cast` to append at `offset`, which must be its current size (a replica
   * resuming an upload). Throws a {@link CastOffsetError} carrying the size when it is not.
   */
  static async resume(dir: string, id: string, offset: number): Promise<CastFileWriter> {
    const path = castPath(dir, id);
    const size = (await stat(path)).size;
    if (size !== offset) throw new CastOffsetError(size);
    const fd = await open(path, 'a', FILE_MODE);
    return new CastFileWriter(dir, id, fd, size, false);
  }

  /** Bytes accepted so far (written or queued). */
  get size(): number {
    return this.#size + this.#queued;
  }

  /** Bytes queued, not yet handed to the kernel. */
  get pendingBytes(): number {
    return this.#queued;
  }

  /** The write failure, once one happened. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  onError(listener: (e: Error) => void): void {
    if (this.#failure) listener(this.#failure);
    else this.#errorListeners.push(listener);
  }

  onDrain(listener: () => void): void {
    this.#drainListeners.push(listener);
  }

  /** Queue bytes (never blocks). Dropped after a failure or close. */
  write(data: string | Buffer): void {
    if (this.#failure || this.#closed) return;
    const b = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (b.length === 0) return;
    this.#queue.push(b);
    this.#queued += b.length;
    if (!this.#writing) void this.#pump();
  }

  /** Wait for the queue to be written, fdatasync, close. Rejects with the write failure, if any. */
  async close(): Promise<{ sha256: string; bytes: number }> {
    await new Promise<void>((resolve) => (this.#writing || this.#queued > 0 ? this.#idleWaiters.push(resolve) : resolve()));
    this.#closed = true;
    if (this.#syncTimer) clearTimeout(this.#syncTimer);
    try {
      if (!this.#failure) await this.#fd.datasync();
    } catch (e) {
      this.#fail(e as Error);
    }
    await this.#fd.close().catch(() => undefined);
    if (this.#failure) throw this.#failure;
    if (this.#hash) return { sha256: this.#hash.digest('hex'), bytes: this.#size };
    return hashFile(castPath(this.dir, this.id));
  }

  async #pump(): Promise<void> {
    this.#writing = true;
    while (this.#queue.length > 0 && !this.#failure) {
      const batch = this.#queue;
      this.#queue = [];
      const n = batch.reduce((s, b) => s + b.length, 0);
      try {
        await this.#fd.writev(batch);
        for (const b of batch) this.#hash?.update(b);
        this.#size += n;
        this.#queued -= n;
        this.#dirty = true;
        this.#scheduleSync();
      } catch (e) {
        this.#queued = 0;
        this.#fail(e as Error);
      }
      for (const l of this.#drainListeners) l();
    }
    this.#writing = false;
    for (const w of this.#idleWaiters.splice(0)) w();
  }

  #scheduleSync(): void {
    if (this.#syncTimer || this.#closed) return;
    this.#syncTimer = setTimeout(() => {
      this.#syncTimer = undefined;
      if (!this.#dirty || this.#failure || this.#closed) return;
      this.#dirty = false;
      this.#fd.datasync().catch((e: Error) => this.#fail(e));
    }, SYNC_INTERVAL_MS);
    this.#syncTimer.unref();
  }

  #fail(e: Error): void {
    if (this.#failure) return;
    this.#failure = e;
    this.#queue = [];
    for (const l of this.#errorListeners.splice(0)) l(e);
  }
}

/** A resumed upload's offset is not the stored size. */
export class CastOffsetError extends Error {
  override readonly name = 'CastOffsetError';
  constructor(readonly size: number) {
    super(`the stored recording has ${size} bytes`);
  }
}
