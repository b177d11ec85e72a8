/**
 * Writes frames to the socket in production order and tells writers when the socket queue has room.
 */
import type { Duplex } from 'node:stream';
import { encodeFrame, type SpdyFrame } from './frame.js';

/**
 * All outgoing frames of a connection go through one FrameWriter, synchronously, so the order on
 * the wire is the order frames were produced (DATA can never overtake a SYN_STREAM). Backpressure:
 * {@link whenWritable} holds a callback while `socket.writableLength` is at or above the limit.
 */
export class FrameWriter {
  private readonly waiters: ((err?: Error | null) => void)[] = [];
  private failure: Error | undefined;

  /**
   * @param socket the connection socket.
   * @param maxQueued queued-byte limit for {@link whenWritable}.
   * @param onDrop called (for debug logging) when a frame is dropped because the socket is done.
   */
  constructor(
    private readonly socket: Duplex,
    private readonly maxQueued: number,
    private readonly onDrop: (frame: SpdyFrame) => void,
  ) {}

  /** Encodes and writes one frame now (DATA as header + payload in one corked write). */
  write(frame: SpdyFrame): void {
    if (this.socket.writableEnded || this.socket.destroyed) return this.onDrop(frame);
    const bufs = encodeFrame(frame);
    if (bufs.length === 1) {
      this.socket.write(bufs[0], this.release);
      return;
    }
    this.socket.cork();
    for (let i = 0; i < bufs.length; i++) {
      this.socket.write(bufs[i], i === bufs.length - 1 ? this.release : undefined);
    }
    this.socket.uncork();
  }

  /** Calls `cb` now if the socket queue is below the limit, else once it is (or with an error). */
  whenWritable(cb: (err?: Error | null) => void): void {
    if (this.failure) return cb(this.failure);
    if (this.socket.writableEnded || this.socket.destroyed) return cb(new Error('SPDY connection is closed for writing'));
    if (this.socket.writableLength < this.maxQueued) return cb();
    this.waiters.push(cb);
  }

  /** The socket is gone: fail waiting and future callbacks with `err`. */
  fail(err: Error): void {
    this.failure ??= err;
    for (const cb of this.waiters.splice(0)) cb(err);
  }

  private readonly release = (): void => {
    while (this.waiters.length > 0 && this.socket.writableLength < this.maxQueued) this.waiters.shift()!();
  };
}
