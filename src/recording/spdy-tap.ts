/**
 * The SPDY/3.1 tap of a passthrough exec/attach session: the bytes the splice relay already reads,
 * both ways, parsed with the project's own codec (`src/spdy/frame.ts` in `streamData` mode, so DATA
 * payloads come out as slices of the relay's chunks, never copied) and turned into the session's
 * stream events for a {@link RemoteCommandObserver}.
 *
 * - It reads what the kubelet reads as the kubelet's SPDY (moby/spdystream) reads it, so a client
 *   cannot open a stream the recording does not see: control frames of any version; the
 *   `streamtype` of a client SYN_STREAM is the first value of that name (a repeated name's values are
 *   appended, `http.Header.Get` reads the first); a SYN_STREAM whose id is below the next expected
 *   one is refused by the kubelet (`validateStreamId`), so it maps nothing.
 * - Streams are mapped by that `streamtype` (stdin, stdout, stderr, resize, error). Header blocks
 *   are zlib-compressed per direction with one continuous context, so the tap keeps its own
 *   {@link HeaderDecompressor} for the client→server direction and feeds it every block of that
 *   direction in order — SYN_STREAM, SYN_REPLY and HEADERS, as the kubelet's framer does, or a later
 *   block could back-reference bytes the tap never saw. It never reads the server's header blocks
 *   (Kubernetes' SYN_REPLYs are empty), so it needs no context for that direction. Inflating is
 *   asynchronous: while a block is being inflated, later events of both directions wait in order
 *   behind it.
 * - stdin DATA (client→server) → `stdin`; stdout/stderr DATA (server→client) → `output`; the resize
 *   stream's JSON → `resize`; the error stream's content, at its FIN, decoded as client-go does
 *   (`src/wire/error-stream.ts`) → `exit` (no FIN, e.g. a lost upstream: no exit status).
 * - Bytes it still cannot read (framing the kubelet or kubectl would fail on too, or would read
 *   out of step) end its events at that point in wire order and are reported to the recording
 *   ({@link RemoteCommandObserver.unreadable}): enforce ends the session with the Status, fail open
 *   marks the recording incomplete. The upstream direction is still followed frame by frame after a
 *   client-side failure, so the enforce end can cut at a frame boundary.
 *
 * {@link SpdyTap.terminate} ends the session with a Status in SPDY's own terms: the rest of the
 * frame in progress is relayed, then a DATA frame with the Status on the error stream (FIN), FINs on
 * stdout and stderr, and GOAWAY — what a kubelet writes when a command fails.
 */
import { GoAwayStatus } from '../spdy/codes.js';
import { encodeFrame, FrameParser, type SpdyFrame } from '../spdy/frame.js';
import { HeaderDecompressor, headerValue, type SpdyHeaders } from '../spdy/header-block.js';
import { encodeStatus, type V1Status } from '../status.js';
import { TerminalSizeDecoder } from '../terminal-size.js';
import { decodeErrorStream } from '../wire/error-stream.js';
import type { RelayedBytes, RelayObserver, RemoteCommandObserver, TerminationPlan } from './observer.js';

/** Most error-stream bytes kept (a Status is a few hundred bytes). */
export const MAX_ERROR_BYTES = 64 * 1024;

type StreamType = 'stdin' | 'stdout' | 'stderr' | 'resize' | 'error' | 'other';

/** Options of {@link SpdyTap}. */
export interface SpdyTapOptions {
  /** The negotiated `X-Stream-Protocol-Version` (decides how the error stream is decoded). */
  protocol: string;
  /** Every client stream's headers as they are decoded (port-forward reads `port` here). */
  onStreamHeaders?: (headers: SpdyHeaders) => void;
  /** The stream cannot be read past this point (for a tap with no target: port-forward's record). */
  onUnreadable?: (cause: Error) => void;
  /** The tap closed, after every header block it was given was read (for a tap with no target). */
  onClose?: () => void;
}

function streamTypeOf(h: SpdyHeaders): StreamType {
  const t = headerValue(h, 'streamtype');
  return t === 'stdin' || t === 'stdout' || t === 'stderr' || t === 'resize' || t === 'error' ? t : 'other';
}

/** A passthrough SPDY session's tap: a {@link RelayObserver} over a {@link RemoteCommandObserver}. */
export class SpdyTap implements RelayObserver {
  readonly #target: RemoteCommandObserver | undefined;
  readonly #o: SpdyTapOptions;
  readonly #fromClient = new FrameParser({ streamData: true, anyVersion: true });
  readonly #fromUpstream = new FrameParser({ streamData: true, anyVersion: true });
  readonly #headers = new HeaderDecompressor();
  readonly #streams = new Map<number, StreamType>();
  /** The lowest id the kubelet accepts for the next client SYN_STREAM (spdystream `receivedStreamId`). */
  #nextStreamId = 1;
  /**
   * Work waiting behind a header block being inflated, in wire order: events, and each block's own
   * step (what its headers or its failure mean), filled in once it is inflated.
   */
  readonly #steps: Array<{ fn: (() => void) | undefined }> = [];
  #pendingBlocks = 0;
  #sizes: TerminalSizeDecoder | undefined;
  #error: Buffer[] = [];
  #errorBytes = 0;
  #exited = false;
  /** Set (in wire order, behind blocks being inflated) once the stream cannot be read: no more events. */
  #failure: Error | undefined;
  /** A direction's parser failed: nothing more is read from it. */
  #clientBroken = false;
  #upstreamBroken = false;
  #closed = false;

  constructor(target: RemoteCommandObserver | undefined, options: SpdyTapOptions) {
    this.#target = target;
    this.#o = options;
  }

  get fatal(): AbortSignal {
    return this.#target?.fatal ?? new AbortController().signal;
  }

  /** True while client header blocks are being inflated (later events wait behind them, in order). */
  get inflating(): boolean {
    return this.#pendingBlocks > 0;
  }

  /** Why the tap stopped reading (a protocol error in the relayed bytes), if it did. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  fromClient(chunk: Buffer): void {
    if (this.#clientBroken || this.#failure) return;
    const { frames, error } = parse(this.#fromClient, chunk);
    for (const f of frames) this.#clientFrame(f);
    if (error === undefined) return;
    this.#clientBroken = true;
    this.#run(() => this.#fail(error));
  }

  fromUpstream(chunk: Buffer): void {
    if (this.#upstreamBroken) return;
    const { frames, error } = parse(this.#fromUpstream, chunk);
    // After a failure it is followed for its frame boundaries only (the enforce end).
    if (!this.#failure) for (const f of frames) this.#upstreamFrame(f);
    if (error === undefined) return;
    this.#upstreamBroken = true;
    this.#run(() => this.#fail(error));
  }

  close(bytes?: RelayedBytes): void {
    if (this.#closed) return;
    this.#closed = true;
    const finish = (): void => {
      this.#headers.close();
      this.#target?.close(bytes);
      this.#o.onClose?.();
    };
    this.#run(finish);
  }

  terminate(status: V1Status): TerminationPlan {
    const parser = this.#fromUpstream;
    const ids = (t: StreamType): number[] => [...this.#streams].filter(([, v]) => v === t).map(([k]) => k);
    const frames: Buffer[] = [];
    for (const id of ids('error')) frames.push(...encodeFrame({ type: 'data', streamId: id, fin: true, data: encodeStatus(status) }));
    for (const id of [...ids('stdout'), ...ids('stderr')]) frames.push(...encodeFrame({ type: 'data', streamId: id, fin: true, data: Buffer.alloc(0) }));
    const last = Math.max(0, ...this.#streams.keys());
    frames.push(...encodeFrame({ type: 'goaway', lastGoodStreamId: last, status: GoAwayStatus.OK }));
    return {
      bytes: Buffer.concat(frames),
      cut: (chunk) => {
        let at = 0;
        for (;;) {
          // Unreadable upstream bytes: no boundary will come; they are not passed on.
          if (this.#upstreamBroken) return { forward: chunk.subarray(0, at), done: true };
          const n = parser.bytesToFrameEnd;
          if (n === 0) return { forward: chunk.subarray(0, at), done: true };
          if (at >= chunk.length) return { forward: chunk.subarray(0, at), done: false };
          const take = Math.min(n ?? 8 - parser.bufferedBytes, chunk.length - at);
          const piece = chunk.subarray(at, at + take);
          this.fromUpstream(piece);
          if (this.#upstreamBroken) return { forward: chunk.subarray(0, at), done: true };
          at += take;
        }
      },
    };
  }

  /** Run `fn` now, or after the header blocks being inflated (order kept). */
  #run(fn: () => void): void {
    if (this.#steps.length > 0) this.#steps.push({ fn });
    else fn();
  }

  /** A header block is inflated: its step is `fn`; run every step that is ready, in order. */
  #settle(step: { fn: (() => void) | undefined }, fn: () => void): void {
    this.#pendingBlocks--;
    step.fn = fn;
    while (this.#steps.length > 0 && this.#steps[0]!.fn !== undefined) this.#steps.shift()!.fn!();
  }

  #clientFrame(f: SpdyFrame): void {
    if (f.type === 'syn_stream' || f.type === 'syn_reply' || f.type === 'headers') {
      const id = f.streamId;
      // spdystream's Connection.checkStreamFrame: an id below the next expected one is refused (RST).
      const opens = f.type === 'syn_stream' && id >= this.#nextStreamId;
      if (opens) this.#nextStreamId = id + 2;
      const step: { fn: (() => void) | undefined } = { fn: undefined };
      this.#steps.push(step);
      this.#pendingBlocks++;
      this.#headers.decompress(f.headerBlock, id, 'spdystream').then(
        (h) =>
          this.#settle(step, () => {
            if (!opens || this.#failure) return;
            this.#streams.set(id, streamTypeOf(h));
            this.#o.onStreamHeaders?.(h);
          }),
        (e: unknown) => this.#settle(step, () => this.#fail(e)),
      );
      return;
    }
    if (f.type !== 'data') return;
    this.#run(() => this.#clientData(f.streamId, f.data));
  }

  #clientData(id: number, data: Buffer): void {
    if (this.#failure || data.length === 0) return;
    const t = this.#streams.get(id);
    if (t === 'stdin') this.#target?.stdin(data);
    else if (t === 'resize') this.#resize(data);
  }

  #upstreamFrame(f: SpdyFrame): void {
    if (f.type !== 'data') return;
    const { streamId, data, fin } = f;
    if (this.#steps.length > 0) this.#steps.push({ fn: () => this.#upstreamData(streamId, data, fin) });
    else this.#upstreamData(streamId, data, fin);
  }

  #upstreamData(id: number, data: Buffer, fin: boolean): void {
    if (this.#failure) return;
    const t = this.#streams.get(id);
    if (t === 'stdout' || t === 'stderr') {
      if (data.length > 0) this.#target?.output(t, data);
    } else if (t === 'error') {
      if (this.#errorBytes < MAX_ERROR_BYTES) this.#error.push(Buffer.from(data.subarray(0, MAX_ERROR_BYTES - this.#errorBytes)));
      this.#errorBytes += data.length;
      if (fin) this.#finishError();
    }
  }

  #resize(data: Buffer): void {
    try {
      for (const s of (this.#sizes ??= new TerminalSizeDecoder()).push(data)) this.#target?.resize(s.width, s.height);
    } catch {
      // Bad resize input: the kubelet stops reading it too; the session goes on.
      this.#sizes = undefined;
    }
  }

  #finishError(): void {
    if (this.#exited) return;
    this.#exited = true;
    const outcome = decodeErrorStream(this.#o.protocol, Buffer.concat(this.#error));
    this.#error = [];
    if (outcome.kind === 'success') this.#target?.exit({ exitCode: 0 });
    else if (outcome.kind === 'exit') this.#target?.exit({ exitCode: outcome.exitCode });
    else this.#target?.exit({ error: outcome.message });
  }

  #fail(e: unknown): void {
    if (this.#failure) return;
    this.#failure = e instanceof Error ? e : new Error(String(e));
    this.#target?.unreadable('spdy', this.#failure);
    this.#o.onUnreadable?.(this.#failure);
  }
}

const EMPTY = Buffer.alloc(0);

/**
 * The frames `chunk` completes, and the parse error after them if any (the parser defers an error
 * that follows frames to its next push: fetched at once here, so the frames before it still count).
 */
function parse(parser: FrameParser, chunk: Buffer): { frames: SpdyFrame[]; error?: unknown } {
  let frames: SpdyFrame[] = [];
  try {
    frames = parser.push(chunk);
    if (parser.hasPendingError) parser.push(EMPTY);
    return { frames };
  } catch (error) {
    return { frames, error };
  }
}
