/**
 * Writes frames to the socket in production order and tells writers when the socket queue has room.
 */
import type { Duplex } from 'node:stream';
import { TurnCork } from '../turn-cork.js';
import { encodeDataHeader, encodeFrame, type SpdyFrame } from './frame.js';

function totalLength(bufs: readonly Buffer[]): number {
  let n = 0;
  for (const b of bufs) n += b.length;
  return n;
}

/**
 * Frames queued on the socket (handed to it, not yet written) at which writers wait, whatever their
 * bytes: each frame is a write request or two in the socket's queue, so a flood of tiny DATA frames
 * would otherwise hold ~100k of them under the byte limit (issue 26).
 */
export const DEFAULT_MAX_QUEUED_FRAMES = 1024;

/**
 * All outgoing frames of a connection go through one FrameWriter, synchronously, so the order on
 * the wire is the order frames were produced (DATA can never overtake a SYN_STREAM). Backpressure:
 * {@link whenWritable} holds a callback while `socket.writableLength` is at or above the byte limit,
 * or the frames not yet written are at or above the frame limit.
 */
export class FrameWriter {
  private readonly waiters: ((err?: Error | null) => void)[] = [];
  private failure: Error | undefined;
  private readonly turn: TurnCork;
  /** Frames handed to the socket whose write has not completed. */
  private queuedFrames = 0;

  /**
   * @param socket the connection socket.
   * @param maxQueued queued-byte limit for {@link whenWritable}.
   * @param onDrop called (for debug logging) when a frame is dropped because the socket is done.
   * @param maxQueuedFrames queued-frame limit for {@link whenWritable}.
   */
  constructor(
    private readonly socket: Duplex,
    private readonly maxQueued: number,
    private readonly onDrop: (frame: SpdyFrame) => void,
    private readonly maxQueuedFrames = DEFAULT_MAX_QUEUED_FRAMES,
  ) {
    this.turn = new TurnCork(socket);
  }

  /** Encodes and writes one frame now (DATA as header + payload in one corked write). */
  write(frame: SpdyFrame): void {
    if (this.socket.writableEnded || this.socket.destroyed) return this.onDrop(frame);
    this.batch();
    this.queuedFrames++;
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

  /**
   * Writes one DATA frame whose payload is `payload` (one buffer, or several sent back to back
   * without copying them into one), as header + payload in one corked write.
   */
  writeData(streamId: number, fin: boolean, payload: Buffer | readonly Buffer[]): void {
    if (this.socket.writableEnded || this.socket.destroyed) {
      const data = Buffer.isBuffer(payload) ? payload : Buffer.concat(payload);
      return this.onDrop({ type: 'data', streamId, fin, data });
    }
    this.batch();
    this.queuedFrames++;
    const header = encodeDataHeader(streamId, fin, Buffer.isBuffer(payload) ? payload.length : totalLength(payload));
    if (Buffer.isBuffer(payload) && payload.length === 0) {
      this.socket.write(header, this.release);
      return;
    }
    this.socket.cork();
    this.socket.write(header);
    if (Buffer.isBuffer(payload)) {
      this.socket.write(payload, this.release);
    } else {
      const last = payload.length - 1;
      for (let i = 0; i <= last; i++) this.socket.write(payload[i], i === last ? this.release : undefined);
    }
    this.socket.uncork();
  }

  /** Calls `cb` now if the socket queue is below the limit, else once it is (or with an error). */
  whenWritable(cb: (err?: Error | null) => void): void {
    if (this.failure) return cb(this.failure);
    if (this.socket.writableEnded || this.socket.destroyed) return cb(new Error('SPDY connection is closed for writing'));
    if (this.belowLimits()) return cb();
    this.waiters.push(cb);
  }

  /** True while the socket can take frames and its queue is below the limits. */
  hasRoom(): boolean {
    return this.failure === undefined && !this.socket.writableEnded && !this.socket.destroyed && this.belowLimits();
  }

  private belowLimits(): boolean {
    return this.socket.writableLength < this.maxQueued && this.queuedFrames < this.maxQueuedFrames;
  }

  /** The socket is gone: fail waiting and future callbacks with `err`. */
  fail(err: Error): void {
    this.failure ??= err;
    for (const cb of this.waiters.splice(0)) cb(err);
  }

  /**
   * The first frame of an event-loop turn leaves at once; the frames produced after it in the same
   * turn (say, the chunks of all the reads a poll phase delivered) leave in one writev once the
   * turn's I/O callbacks are done, not one syscall per frame (src/turn-cork.ts). The order is
   * unchanged: the socket's own queue keeps every write in sequence.
   */
  private batch(): void {
    this.turn.beforeWrite();
  }

  /** The write callback of each frame's last buffer: one frame less queued. */
  private readonly release = (): void => {
    this.queuedFrames--;
    while (this.waiters.length > 0 && this.belowLimits()) this.waiters.shift()!();
  };
}
