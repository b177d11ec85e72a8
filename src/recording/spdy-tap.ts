/**
 * The SPDY/3.1 tap of a passthrough exec/attach session: the bytes the splice relay already reads,
 * both ways, parsed with the project's own codec (`src/spdy/frame.ts` in `streamData` mode, so DATA
 * payloads come out as slices of the relay's chunks, never copied) and turned into the session's
 * stream events for a {@link RemoteCommandObserver}.
 *
 * - Streams are mapped by the `streamtype` header of the client's SYN_STREAMs (stdin, stdout, stderr,
 *   resize, error). Header blocks are zlib-compressed per direction with one continuous context, so
 *   the tap keeps its own {@link HeaderDecompressor} for the client→server direction and feeds it
 *   every block of that direction in order. It never reads the server's header blocks (Kubernetes'
 *   SYN_REPLYs are empty), so it needs no context for that direction. Inflating is asynchronous:
 *   while a block is being inflated, later events of both directions wait in order behind it.
 * - stdin DATA (client→server) → `stdin`; stdout/stderr DATA (server→client) → `output`; the resize
 *   stream's JSON → `resize`; the error stream's content, at its FIN, decoded as client-go does
 *   (`src/wire/error-stream.ts`) → `exit` (no FIN, e.g. a lost upstream: no exit status).
 * - A stream the tap cannot parse stops the recording's events (a marker is not possible mid-frame);
 *   with enforce the recording's `fatal` is aborted by the owner (see {@link SpdyTap.failure}).
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
}

function streamTypeOf(h: SpdyHeaders): StreamType {
  const t = headerValue(h, 'streamtype');
  return t === 'stdin' || t === 'stdout' || t === 'stderr' || t === 'resize' || t === 'error' ? t : 'other';
}

/** A passthrough SPDY session's tap: a {@link RelayObserver} over a {@link RemoteCommandObserver}. */
export class SpdyTap implements RelayObserver {
  readonly #target: RemoteCommandObserver | undefined;
  readonly #o: SpdyTapOptions;
  readonly #fromClient = new FrameParser({ streamData: true });
  readonly #fromUpstream = new FrameParser({ streamData: true });
  readonly #headers = new HeaderDecompressor();
  readonly #streams = new Map<number, StreamType>();
  /** Events waiting behind a header block being inflated (in arrival order). */
  #queue: Array<() => void> | undefined;
  #pendingBlocks = 0;
  #sizes: TerminalSizeDecoder | undefined;
  #error: Buffer[] = [];
  #errorBytes = 0;
  #exited = false;
  #failure: Error | undefined;
  #closed = false;

  constructor(target: RemoteCommandObserver | undefined, options: SpdyTapOptions) {
    this.#target = target;
    this.#o = options;
  }

  get fatal(): AbortSignal {
    return this.#target?.fatal ?? new AbortController().signal;
  }

  /** Why the tap stopped parsing (a protocol error in the relayed bytes), if it did. */
  /** True while client header blocks are being inflated (later events wait behind them, in order). */
  get inflating(): boolean {
    return this.#pendingBlocks > 0;
  }

  get failure(): Error | undefined {
    return this.#failure;
  }

  fromClient(chunk: Buffer): void {
    if (this.#failure) return;
    let frames: SpdyFrame[];
    try {
      frames = this.#fromClient.push(chunk);
    } catch (e) {
      return this.#fail(e);
    }
    for (const f of frames) this.#clientFrame(f);
  }

  fromUpstream(chunk: Buffer): void {
    if (this.#failure) return;
    let frames: SpdyFrame[];
    try {
      frames = this.#fromUpstream.push(chunk);
    } catch (e) {
      return this.#fail(e);
    }
    for (const f of frames) this.#upstreamFrame(f);
  }

  close(bytes?: RelayedBytes): void {
    if (this.#closed) return;
    this.#closed = true;
    const finish = (): void => {
      this.#headers.close();
      this.#target?.close(bytes);
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
          const n = parser.bytesToFrameEnd;
          if (n === 0) return { forward: chunk.subarray(0, at), done: true };
          if (at >= chunk.length || this.#failure) return { forward: chunk.subarray(0, at), done: this.#failure !== undefined };
          const take = Math.min(n ?? 8 - parser.bufferedBytes, chunk.length - at);
          this.fromUpstream(chunk.subarray(at, at + take));
          at += take;
        }
      },
    };
  }

  /** Run `fn` now, or after the header blocks being inflated (order kept). */
  #run(fn: () => void): void {
    if (this.#queue) this.#queue.push(fn);
    else fn();
  }

  #clientFrame(f: SpdyFrame): void {
    if (f.type === 'syn_stream' || f.type === 'headers') {
      const id = f.streamId;
      const isSyn = f.type === 'syn_stream';
      this.#queue ??= [];
      this.#pendingBlocks++;
      this.#headers.decompress(f.headerBlock, id).then(
        (h) => {
          if (isSyn) {
            this.#streams.set(id, streamTypeOf(h));
            this.#o.onStreamHeaders?.(h);
          }
          this.#blockDone();
        },
        (e: unknown) => {
          this.#fail(e);
          this.#blockDone();
        },
      );
      return;
    }
    if (f.type !== 'data') return;
    this.#run(() => this.#clientData(f.streamId, f.data));
  }

  #blockDone(): void {
    if (--this.#pendingBlocks > 0) return;
    const q = this.#queue ?? [];
    this.#queue = undefined;
    for (let i = 0; i < q.length; i++) {
      q[i]!();
      // A callback started another inflate: the rest waits behind it.
      if (this.#queue) {
        (this.#queue as Array<() => void>).unshift(...q.slice(i + 1));
        return;
      }
    }
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
    if (this.#queue) this.#queue.push(() => this.#upstreamData(streamId, data, fin));
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
    this.#failure ??= e instanceof Error ? e : new Error(String(e));
  }
}
