/**
 * The directory sink (`--session-recording-dir DIR`): the proxy writes each recording itself, as
 * `DIR/<id>.cast` while the session runs and `DIR/<id>.json` (the index entry with the cast's sha256)
 * when it ends. The directory is created 0700 (and narrowed to 0700 if it exists wider); files are
 * 0600 (`cast-file.ts`).
 */
import { constants } from 'node:fs';
import { access, chmod, mkdir, stat, statfs } from 'node:fs/promises';
import { CastFileWriter, writeSummary } from './cast-file.js';
import type { RecordingSink, RecordingSummary, RecordingUpload } from './sink.js';

/** Mode of a recordings directory. */
export const DIR_MODE = 0o700;

/**
 * Free space below which the directory counts as full before an upgrade: room for a recording's
 * first lines and its index entry. Below it a session would fail at its first write, so an enforced
 * one is refused before the upgrade instead of being started and ended.
 */
export const MIN_FREE_BYTES = 64 * 1024;

/** Create `dir` 0700, or narrow an existing one to 0700. */
export async function prepareRecordingDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  const s = await stat(dir);
  if (!s.isDirectory()) throw new Error(`${dir} is not a directory`);
  if ((s.mode & 0o777) !== DIR_MODE) await chmod(dir, DIR_MODE);
}

/** A {@link RecordingUpload} over a {@link CastFileWriter}. */
class FileUpload implements RecordingUpload {
  readonly #file: CastFileWriter;
  constructor(file: CastFileWriter) {
    this.#file = file;
  }
  write(text: string | Buffer): void {
    this.#file.write(text);
  }
  get pendingBytes(): number {
    return this.#file.pendingBytes;
  }
  onError(listener: (err: Error) => void): void {
    this.#file.onError(listener);
  }
  onDrain(listener: () => void): void {
    this.#file.onDrain(listener);
  }
  async finish(summary: RecordingSummary): Promise<void> {
    const { sha256, bytes } = await this.#file.close();
    await writeSummary(this.#file.dir, { ...summary, sha256, castBytes: bytes });
  }
  async abort(summary: RecordingSummary): Promise<void> {
    let stored: { sha256?: string; castBytes?: number } = {};
    try {
      const { sha256, bytes } = await this.#file.close();
      stored = { sha256, castBytes: bytes };
    } catch {
      // The file failed; the summary still says what happened (when the disk lets it be written).
    }
    await writeSummary(this.#file.dir, { ...summary, ...stored }).catch(() => undefined);
  }
}

/** Recordings written to a local directory. */
export class DirectorySink implements RecordingSink {
  readonly kind = 'directory' as const;
  readonly dir: string;
  #prepared: Promise<void> | undefined;

  constructor(dir: string) {
    this.dir = dir;
  }

  /** Create or narrow the directory now (start-up), so a bad directory fails early. */
  prepare(): Promise<void> {
    // A failure is not cached: the next session tries again (the volume may have been mounted since).
    return (this.#prepared ??= prepareRecordingDir(this.dir).catch((e: unknown) => {
      this.#prepared = undefined;
      throw e;
    }));
  }

  /** Healthy: the directory exists (created 0700 if need be), is writable, and has room (space and inodes). */
  async check(): Promise<void> {
    await this.prepare();
    await access(this.dir, constants.W_OK | constants.X_OK);
    const fs = await statfs(this.dir);
    const free = fs.bavail * fs.bsize;
    if (free < MIN_FREE_BYTES) throw new Error(`${this.dir}: no space left for recordings (${free} bytes free)`);
    // Some filesystems report no inode counts at all (files 0): only a known zero is full.
    if (fs.files > 0 && fs.ffree === 0) throw new Error(`${this.dir}: no inodes left for recordings`);
  }

  async open(id: string): Promise<RecordingUpload> {
    await this.prepare();
    return new FileUpload(await CastFileWriter.create(this.dir, id));
  }

  async writeRecord(summary: RecordingSummary): Promise<void> {
    await this.prepare();
    await writeSummary(this.dir, summary);
  }

  async close(): Promise<void> {}
}
