/**
 * The one optional observer the relays gain for session recording. A relay is handed an observer
 * when the recording policy asks for one and calls it with what it already has; it never branches
 * on the sink or the policy.
 *
 * - Passthrough relays (`proxy/splice.ts`, SPDY or WebSocket v1–v5 exec/attach, and port-forward)
 *   get a {@link RelayObserver}: they call `fromClient`/`fromUpstream` with each chunk they read,
 *   before writing it on, and `close` at the end. The observer never modifies or keeps the chunk
 *   beyond the call (it copies what it records, once, into the cast text).
 * - The translator (`translator/translator-session.ts`) has the streams demultiplexed already: it
 *   gets a {@link RemoteCommandObserver} and calls it per stream.
 *
 * Both carry `fatal`: an AbortSignal that aborts (reason: a `RecordingUnavailableError`) when an
 * enforced recording fails mid-session; the relay then ends the session with
 * `reason.toStatus()` — a passthrough relay through {@link RelayObserver.terminate}, the translator
 * through its own `finish(status)`. A tap that cannot read the relayed stream past some point says
 * so ({@link RemoteCommandObserver.unreadable}): that is such a failure too.
 */
import type { V1Status } from '../status.js';
import type { CastExit } from './asciicast.js';

/** Bytes relayed each way, as the relays count them. */
export interface RelayedBytes {
  readonly toUpstream: number;
  readonly toClient: number;
}

/** The wire protocol a tap reads (the `protocol` label of the unreadable-stream metric). */
export type TapProtocol = 'spdy' | 'websocket';

/** What the translator (or a tap) reports about one exec/attach session, stream by stream. */
export interface RemoteCommandObserver {
  /** Aborted (reason `RecordingUnavailableError`) when the enforced recording failed: end the session. */
  readonly fatal: AbortSignal;
  /** Data the client sent on stdin. */
  stdin(data: Buffer): void;
  /** Data the command wrote on stdout or stderr. */
  output(stream: 'stdout' | 'stderr', data: Buffer): void;
  /** A terminal size the client sent. */
  resize(cols: number, rows: number): void;
  /** The outcome read off the error stream / channel (exit code or error). */
  exit(exit: CastExit): void;
  /** The session is over (idempotent). `bytes`: the relay's own totals, for the index. */
  close(bytes?: RelayedBytes): void;
  /**
   * A tap cannot read the relayed `protocol` stream past this point (framing that the peer reading
   * it would not accept either; `cause` names it, never with content): no later event can be
   * trusted, so none follows. Enforce: `fatal` aborts (the session ends with the Status); fail open:
   * a marker, `result: incomplete`, a metric. The translator never calls it (it parses what it relays).
   */
  unreadable(protocol: TapProtocol, cause: Error): void;
}

/** How a passthrough relay ends a session with a Status once `fatal` aborted. */
export interface TerminationPlan {
  /**
   * Feed the next upstream chunk(s) through here instead of writing them directly: `forward` is the
   * part to write to the client (the rest of the frame or message in progress, which the tap also
   * records); once `done`, write {@link bytes} and close both sides. Call it once with an empty
   * buffer first: it may be done at once.
   */
  cut(chunk: Buffer): { forward: Buffer; done: boolean };
  /** The protocol's own end: the Status on the error stream/channel, then the end of the stream. */
  readonly bytes: Buffer;
}

/** What a passthrough relay calls with the raw bytes of each direction. */
export interface RelayObserver {
  /** See {@link RemoteCommandObserver.fatal}. */
  readonly fatal: AbortSignal;
  /** A chunk read from the client (after the request head), before it is written upstream. */
  fromClient(chunk: Buffer): void;
  /** A chunk read from the upstream (after the 101 response head), before it is written to the client. */
  fromUpstream(chunk: Buffer): void;
  /** The relay ended (both sides closed). `bytes`: the relay's totals. */
  close(bytes?: RelayedBytes): void;
  /**
   * After `fatal`: how to end the session with `status` in the client's protocol. Undefined when the
   * protocol carries no Status (the relay then closes both sides).
   */
  terminate(status: V1Status): TerminationPlan | undefined;
}

/** A signal that never aborts (observers of sessions whose recording is not enforced). */
export const NEVER_ABORTED: AbortSignal = new AbortController().signal;
