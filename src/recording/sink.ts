/**
 * Where recordings go: one interface for every sink (the local directory, the remote recorder).
 *
 * A sink is checked before a recorded session's upgrade ({@link RecordingSink.check}) and opens one
 * {@link RecordingUpload} per session only once the session got the upstream's 101 (the session
 * recorder's `deferred-upload.ts`): a refused session stores nothing. The upload takes the cast text as it is
 * produced and must never block the session: writes are queued (the bounded buffer lives in
 * `session-recording.ts`, which watches {@link RecordingUpload.pendingBytes}), and a failure is
 * reported once through `onError`, so the session's recording can end it (enforce) or go on
 * without a recording (fail open).
 */
import { randomBytes } from 'node:crypto';

/** The facts of a recording that its index entry (the `<id>.json` sidecar) keeps. */
export interface RecordingSummary {
  /** The recording's id: its file name without `.cast`, and the id the audit line carries. */
  id: string;
  /** `exec`/`attach` sessions are casts; `portforward` sessions are a metadata record only. */
  subresource: 'exec' | 'attach' | 'portforward';
  user?: string;
  groups?: string[];
  /** Why `user` is absent (passthrough: the upstream could not be asked who the caller is). */
  userUnknown?: string;
  cluster?: string;
  namespace: string;
  pod: string;
  container?: string;
  command?: string[];
  /** portforward: the ports asked for. */
  ports?: string[];
  tty?: boolean;
  record: 'output' | 'full' | 'metadata';
  enforce: boolean;
  /** ISO 8601 start. */
  start: string;
  durationSeconds: number;
  /** The command's exit code when known; null otherwise. */
  exitCode: number | null;
  /** The error the session ended with, when there was no exit code. */
  error?: string;
  /** exec/attach: `o`+`i` payload bytes recorded. */
  recordedBytes?: number;
  /** Bytes relayed each way (portforward: the whole record; exec/attach: for reference). */
  bytesToUpstream?: number;
  bytesToClient?: number;
  /**
   * How the recording ended: `complete`; `truncated` (the byte limit was reached); `gap` (events
   * were dropped while the sink was too slow, marked in the cast); `incomplete` (the sink failed;
   * whatever reached it is kept); `terminated` (enforce: the session was ended because the recording failed).
   */
  result: RecordingResult;
  /** Size and sha256 (hex) of the `.cast` file as stored; filled in by the store. */
  castBytes?: number;
  sha256?: string;
  /** Which proxy replica uploaded it (remote recorder: the authenticated replica). */
  recordedBy?: string;
}

/** How a recording ended (see {@link RecordingSummary.result}). */
export type RecordingResult = 'complete' | 'truncated' | 'gap' | 'incomplete' | 'terminated';

/** One session's recording, open on a sink. */
export interface RecordingUpload {
  /** Append cast text (complete lines, a string or its UTF-8 bytes). Never blocks; a failure is reported through `onError`. */
  write(text: string | Buffer): void;
  /** Bytes written but not yet accepted by the storage (the bounded buffer's fill). */
  readonly pendingBytes: number;
  /** Called once when the upload failed (the storage is gone or full); later writes are dropped. */
  onError(listener: (err: Error) => void): void;
  /** Called whenever `pendingBytes` went down (to resume after a gap). */
  onDrain(listener: () => void): void;
  /** Flush what is queued, then store the summary (the index entry). Resolves when both are durable. */
  finish(summary: RecordingSummary): Promise<void>;
  /** Stop now, keeping what was stored (the summary is written if possible). */
  abort(summary: RecordingSummary): Promise<void>;
}

/** A place recordings are written to. */
export interface RecordingSink {
  /** `directory` or `recorder` (metric label). */
  readonly kind: 'directory' | 'recorder';
  /**
   * Can recordings be made now (the directory is writable and has room; the recorder answers)?
   * Asked before a recorded session's upgrade, creating nothing; rejects with the reason. With
   * enforce the session is then refused with 503 before the upgrade. Absent: always healthy.
   */
  check?(): Promise<void>;
  /**
   * Open (create) the recording `id`, once the session is upgraded. Rejects when the recording cannot
   * be created (directory not writable or full, recorder unreachable or refusing): with enforce the
   * session is then ended with the Status.
   * `enforce`: the recording is enforced, so a lost connection fails it at once instead of being
   * retried (the session must end within a second).
   */
  open(id: string, options?: { enforce?: boolean }): Promise<RecordingUpload>;
  /** Store a metadata-only record (port-forward). */
  writeRecord(summary: RecordingSummary): Promise<void>;
  /** Release timers and connections. */
  close(): Promise<void>;
}

/** A recording id: a UUIDv7 (time-ordered), so ids sort by start time and never collide across replicas. */
export function newRecordingId(nowMs = Date.now(), random: Buffer = randomBytes16()): string {
  const b = Buffer.from(random);
  b.writeUIntBE(nowMs, 0, 6);
  b[6] = 0x70 | (b[6]! & 0x0f);
  b[8] = 0x80 | (b[8]! & 0x3f);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** What a recording id looks like (checked before it is ever used as a file name). */
export const RECORDING_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** True when `id` is a well-formed recording id. */
export function isRecordingId(id: string): boolean {
  return RECORDING_ID_PATTERN.test(id);
}

function randomBytes16(): Buffer {
  return randomBytes(16);
}
