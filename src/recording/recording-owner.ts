/**
 * Which replica created a recording on the recorder, kept on disk next to it (`<id>.owner`, 0600)
 * from the moment the recording is created until its index entry is stored, so that only that
 * replica may resume the upload or write the summary — also after the recorder restarted.
 *
 * The owner file is created exclusively (`wx`) and synced before the cast exists: whoever creates
 * it owns the id; a recording whose cast has no owner file (a crash in between is the only way) can
 * be neither resumed nor summarised by anyone, which fails closed.
 */
import { open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { FILE_MODE } from './cast-file.js';

/** `<dir>/<id>.owner`. */
export function ownerPath(dir: string, id: string): string {
  return join(dir, `${id}.owner`);
}

/** What the owner file holds. */
export interface RecordingOwner {
  /** The authenticated replica that created the recording. */
  replica: string;
  /** When the recorder created it (its own clock, ISO 8601). */
  created: string;
}

/**
 * Claim `id` for `replica`: resolves with the owner now on disk — `replica` itself when the claim
 * succeeded or it already held the id (a retried create), another replica when it did not.
 */
export async function claimRecording(dir: string, id: string, replica: string, nowMs = Date.now()): Promise<RecordingOwner> {
  const owner: RecordingOwner = { replica, created: new Date(nowMs).toISOString() };
  let fd;
  try {
    fd = await open(ownerPath(dir, id), 'wx', FILE_MODE);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    const existing = await readOwner(dir, id);
    if (existing === undefined) throw new Error(`the owner file of recording ${id} is unreadable`);
    return existing;
  }
  try {
    await fd.writeFile(JSON.stringify(owner) + '\n');
    await fd.datasync();
  } finally {
    await fd.close();
  }
  return owner;
}

/** The owner of `id`, or undefined when none is recorded (or the file is not an owner record). */
export async function readOwner(dir: string, id: string): Promise<RecordingOwner | undefined> {
  let text: string;
  try {
    text = await readFile(ownerPath(dir, id), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  try {
    const v = JSON.parse(text) as Partial<RecordingOwner>;
    return typeof v.replica === 'string' && typeof v.created === 'string' ? { replica: v.replica, created: v.created } : undefined;
  } catch {
    return undefined;
  }
}

/** Forget the owner (the recording is finished, or deleted). */
export async function releaseRecording(dir: string, id: string): Promise<void> {
  await unlink(ownerPath(dir, id)).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ENOENT') throw e;
  });
}
