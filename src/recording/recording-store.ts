/**
 * Reading a recordings directory (the directory sink's, or the recorder's: the same layout): the
 * index entries (`<id>.json` sidecars), recordings still open (a `.cast` without its sidecar: its
 * header says who and what), the tamper check (the sidecar's sha256 against the file), and the
 * recorder's retention sweep.
 *
 * Nothing read here is trusted by shape (`summary-validation.ts`): a sidecar that is not JSON, or
 * whose fields are badly typed, is listed as `invalid` (with the reason, and who and what from its
 * cast header when there is one) and fails `verify`; it never breaks a listing for everyone.
 */
import { createReadStream } from 'node:fs';
import { readdir, readFile, stat, unlink } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { aggregateMessage } from '../auth/field-errors.js';
import type { CastHeader } from './asciicast.js';
import { castPath, hashFile, summaryPath } from './cast-file.js';
import { ownerPath } from './recording-owner.js';
import { isRecordingId, type RecordingSummary } from './sink.js';
import { headerFacts, validateRecordingSummary, type HeaderFacts } from './summary-validation.js';

/** One listed recording: its index entry, or what the header of a still-open cast says. */
export type RecordingEntry = RecordingSummary & {
  /**
   * `finished`: the sidecar exists; `open`: the cast is being written (or its writer died);
   * `invalid`: the sidecar is not a valid index entry (see {@link RecordingEntry.invalid}).
   */
  state: 'finished' | 'open' | 'invalid';
  /** `invalid`: why the index entry was not used. */
  invalid?: string;
};

/** The outcome of a tamper check. */
export interface VerifyResult {
  id: string;
  ok: boolean;
  /** The sha256 the index recorded (undefined: no index entry, or no cast for a metadata record). */
  expected?: string;
  actual?: string;
  message: string;
}

/** The first line of a cast file, parsed (undefined when absent or not asciicast v2; fields unchecked). */
export async function readCastHeader(path: string): Promise<CastHeader | undefined> {
  const lines = createInterface({ input: createReadStream(path, { end: 1024 * 1024 }), crlfDelay: Infinity });
  try {
    for await (const line of lines) {
      const h = JSON.parse(line) as CastHeader;
      return h && h.version === 2 ? h : undefined;
    }
  } catch {
    return undefined;
  } finally {
    lines.close();
  }
  return undefined;
}

/** An entry from a cast header's well-typed facts (an open recording, or one whose sidecar is invalid). */
function entryFromHeader(id: string, facts: HeaderFacts, mtimeMs: number, state: 'open' | 'invalid'): RecordingEntry {
  const k = facts.identity;
  const start = facts.timestamp !== undefined ? facts.timestamp * 1000 : mtimeMs;
  return {
    id,
    subresource: k.subresource ?? 'exec',
    ...(k.user !== undefined ? { user: k.user } : {}),
    ...(k.groups !== undefined ? { groups: [...k.groups] } : {}),
    ...(k.cluster !== undefined ? { cluster: k.cluster } : {}),
    namespace: k.namespace ?? '',
    pod: k.pod ?? '',
    ...(k.container !== undefined ? { container: k.container } : {}),
    command: k.command ? [...k.command] : [],
    tty: k.tty ?? false,
    record: k.record ?? 'output',
    enforce: false,
    start: new Date(start).toISOString(),
    durationSeconds: Math.max(0, Math.round(mtimeMs - start) / 1000),
    exitCode: null,
    result: 'incomplete',
    state,
  };
}

/** Why a sidecar's text is not a valid index entry of `id`, or its summary. */
function parseSidecar(id: string, text: string): { summary: RecordingSummary } | { invalid: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { invalid: 'not JSON' };
  }
  const checked = validateRecordingSummary(value);
  if (!checked.ok) return { invalid: aggregateMessage(checked.errors) };
  if (checked.summary.id !== id) return { invalid: `id: Invalid value: ${JSON.stringify(checked.summary.id)}: not the id of its file name` };
  return { summary: checked.summary };
}

/** A recordings directory. */
export class RecordingStore {
  readonly dir: string;
  constructor(dir: string) {
    this.dir = dir;
  }

  /** Every recording, oldest first (ids are time-ordered). */
  async list(): Promise<RecordingEntry[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    const ids = new Set<string>();
    for (const n of names) {
      const m = /^(.*)\.(cast|json)$/.exec(n);
      if (m && isRecordingId(m[1]!)) ids.add(m[1]!);
    }
    const entries = await Promise.all([...ids].sort().map((id) => this.get(id)));
    return entries.filter((e): e is RecordingEntry => e !== undefined);
  }

  /** One recording, or undefined. Never throws for what the directory holds. */
  async get(id: string): Promise<RecordingEntry | undefined> {
    if (!isRecordingId(id)) return undefined;
    let invalid: { reason: string; mtimeMs: number } | undefined;
    try {
      const text = await readFile(summaryPath(this.dir, id), 'utf8');
      const parsed = parseSidecar(id, text);
      if ('summary' in parsed) return { ...parsed.summary, state: 'finished' };
      invalid = { reason: parsed.invalid, mtimeMs: (await stat(summaryPath(this.dir, id))).mtimeMs };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') invalid = { reason: `unreadable: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, mtimeMs: Date.now() };
    }
    let cast: { facts: HeaderFacts; mtimeMs: number } | undefined;
    try {
      const st = await stat(castPath(this.dir, id));
      const h = await readCastHeader(castPath(this.dir, id));
      cast = { facts: headerFacts(h), mtimeMs: st.mtimeMs };
      if (h === undefined && invalid === undefined) return undefined;
    } catch {
      cast = undefined;
    }
    if (invalid !== undefined) return { ...entryFromHeader(id, cast?.facts ?? { identity: {} }, cast?.mtimeMs ?? invalid.mtimeMs, 'invalid'), invalid: invalid.reason };
    return cast ? entryFromHeader(id, cast.facts, cast.mtimeMs, 'open') : undefined;
  }

  /** The cast file of `id` (checked id). */
  castPath(id: string): string {
    if (!isRecordingId(id)) throw new Error(`not a recording id: ${JSON.stringify(id)}`);
    return castPath(this.dir, id);
  }

  /** Compare the cast's sha256 with the index entry's. */
  async verify(id: string): Promise<VerifyResult> {
    const e = await this.get(id);
    if (e === undefined) return { id, ok: false, message: 'no such recording' };
    if (e.state === 'open') return { id, ok: false, message: 'not finished: no index entry (still being written, or its writer stopped)' };
    if (e.state === 'invalid') return { id, ok: false, message: `the index entry is invalid: ${e.invalid ?? ''}` };
    if (e.record === 'metadata') return { id, ok: true, message: 'metadata record (no cast)' };
    if (e.sha256 === undefined) return { id, ok: false, message: 'the index entry has no sha256 (the recording failed before it was stored)' };
    let actual: string;
    let bytes: number;
    try {
      ({ sha256: actual, bytes } = await hashFile(castPath(this.dir, id)));
    } catch (err) {
      return { id, ok: false, expected: e.sha256, message: `cannot read the cast: ${(err as Error).message}` };
    }
    const ok = actual === e.sha256 && (e.castBytes === undefined || bytes === e.castBytes);
    return { id, ok, expected: e.sha256, actual, message: ok ? 'sha256 matches' : `MODIFIED: sha256 ${actual} (${bytes} bytes), the index says ${e.sha256} (${e.castBytes ?? '?'} bytes)` };
  }

  /**
   * Delete finished recordings that ended more than `maxAgeMs` before `nowMs` (and open ones not
   * written for that long, unless `isActive` says they are). Returns the ids removed.
   */
  async removeOlderThan(maxAgeMs: number, nowMs: number, isActive: (id: string) => boolean = () => false): Promise<string[]> {
    const removed: string[] = [];
    for (const e of await this.list()) {
      if (isActive(e.id)) continue;
      const end = Date.parse(e.start) + e.durationSeconds * 1000;
      if (nowMs - end <= maxAgeMs) continue;
      await unlink(castPath(this.dir, e.id)).catch(() => undefined);
      await unlink(summaryPath(this.dir, e.id)).catch(() => undefined);
      await unlink(ownerPath(this.dir, e.id)).catch(() => undefined);
      removed.push(e.id);
    }
    return removed;
  }
}
