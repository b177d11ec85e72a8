/**
 * Ordered, backpressured intake of frames from the socket: parse, inflate header blocks in order,
 * dispatch, and pause the socket while anything downstream is not ready.
 */
import type { Duplex } from 'node:stream';
import { SpdyProtocolError } from './errors.js';
import { FrameParser, type SpdyFrame } from './frame.js';

const EMPTY = Buffer.alloc(0);
import type { HeaderDecompressor, SpdyHeaders } from './header-block.js';

/** Receives frames from a {@link FrameIntake}, strictly in wire order. */
export interface FrameSink {
  /**
   * One frame; SYN_STREAM, SYN_REPLY and HEADERS come with their decoded headers, except after the
   * decompressor was released (then `headers` is undefined).
   */
  onFrame(f: SpdyFrame, headers: SpdyHeaders | undefined): void;
  /** A parse or header-block error (`f` is the header-carrying frame whose block failed). */
  onIntakeError(err: unknown, f?: SpdyFrame): void;
}

/**
 * Header inflate is asynchronous, so frames behind a header-carrying frame wait until it is
 * decoded; when nothing is pending, DATA is dispatched synchronously. While a header block is
 * inflating or any stream is blocked (its `push` returned false), the socket is paused, so at most
 * one socket read of frames is held in memory: TCP carries the backpressure to the peer.
 */
export class FrameIntake {
  private readonly parser = new FrameParser({ streamData: true });
  private readonly queue: SpdyFrame[] = [];
  private readonly blockedBy = new Set<object>();
  private decoding = false;
  private draining = false;
  private paused = false;
  private stopped = false;
  private readonly onDispatched: (() => void)[] = [];

  /**
   * @param socket paused and resumed by the intake.
   * @param decompressor the connection's inbound header context.
   * @param sink where frames go.
   */
  constructor(
    private readonly socket: Duplex,
    private readonly decompressor: HeaderDecompressor,
    private readonly sink: FrameSink,
  ) {}

  /** Bytes held for an incomplete frame. */
  get bufferedBytes(): number {
    return this.parser.bufferedBytes;
  }

  /** True while a frame is incomplete. */
  get midFrame(): boolean {
    return this.parser.midFrame;
  }

  /** True after {@link stop}. */
  get isStopped(): boolean {
    return this.stopped;
  }

  /** Feeds socket bytes. */
  push(chunk: Buffer): void {
    if (this.stopped) return;
    let input = chunk;
    for (;;) {
      try {
        for (const f of this.parser.push(input)) this.queue.push(f);
        break;
      } catch (e) {
        this.sink.onIntakeError(e);
        // A stream-scoped error (an oversized DATA frame, skipped) costs that stream only: parse on.
        if (this.stopped || !(e instanceof SpdyProtocolError) || !e.streamScoped) break;
        input = EMPTY;
      }
    }
    this.drain();
  }

  /** A consumer is full: hold all dispatch (and the socket) until {@link unblock}. */
  block(consumer: object): void {
    this.blockedBy.add(consumer);
  }

  /** A consumer wants data again (or is gone). */
  unblock(consumer: object): void {
    if (this.blockedBy.delete(consumer) && this.blockedBy.size === 0) this.drain();
  }

  /**
   * Calls `cb` once every frame read so far has been dispatched (at once when nothing is queued or
   * inflating, or after {@link stop}). For the peer's FIN: Node emits the socket's 'end' as soon as
   * its own buffer is empty, even while frames of the last read still wait here behind a full stream,
   * and those frames (the tail of stdout, the exit status) must still reach their streams.
   */
  whenDispatched(cb: () => void): void {
    this.onDispatched.push(cb);
    this.settle();
  }

  /** Drops everything queued and ignores further input. */
  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    this.settle();
  }

  private settle(): void {
    if (!this.stopped && (this.queue.length > 0 || this.decoding)) return;
    for (const cb of this.onDispatched.splice(0)) cb();
  }

  /** Dispatches queued frames in order until a header block is inflating or a consumer is full. */
  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    try {
      while (!this.stopped && !this.decoding && this.blockedBy.size === 0 && this.queue.length > 0) {
        this.dispatch(this.queue.shift()!);
      }
      if (!this.stopped && this.queue.length === 0 && !this.decoding && this.parser.hasPendingError) {
        this.push(Buffer.alloc(0));
      }
    } finally {
      this.draining = false;
    }
    const stalled = !this.stopped && (this.decoding || this.blockedBy.size > 0 || this.queue.length > 0);
    if (stalled !== this.paused) {
      this.paused = stalled;
      if (stalled) this.socket.pause();
      else this.socket.resume();
    }
    if (this.onDispatched.length > 0) this.settle();
  }

  private dispatch(f: SpdyFrame): void {
    if (f.type !== 'syn_stream' && f.type !== 'syn_reply' && f.type !== 'headers') return this.sink.onFrame(f, undefined);
    // Released (no more header blocks expected): the block is not read; the sink answers the frame
    // without its headers, or fails the connection when it would need them.
    if (this.decompressor.isReleased) return this.sink.onFrame(f, undefined);
    this.decoding = true;
    this.decompressor.decompress(f.headerBlock, f.streamId).then(
      (headers) => {
        this.decoding = false;
        if (!this.stopped) this.sink.onFrame(f, headers);
        this.drain();
      },
      (err: unknown) => {
        this.decoding = false;
        if (!this.stopped) this.sink.onIntakeError(err, f);
        this.drain();
      },
    );
  }
}
