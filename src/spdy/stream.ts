/**
 * One SPDY stream as a Node Duplex: writes become DATA frames, peer DATA is readable.
 */
import assert from 'node:assert/strict';
import { Duplex } from 'node:stream';
import { RstStatus } from './codes.js';
import { SpdyStreamResetError } from './errors.js';
import { normalizeHeaders, type SpdyHeaders, type SpdyHeadersInit } from './header-block.js';
import { MAX_COPY_BUFFER_BYTES, PieceBatch, SMALL_PIECE_BYTES } from '../piece-batch.js';

/** Largest DATA payload we send per frame; bigger writes are split (never into small frames). */
export const MAX_DATA_FRAME_BYTES = 1024 * 1024;

/**
 * What a stream needs from its connection. Implemented by `SpdyConnection`; not for other callers.
 * @internal
 */
export interface SpdyStreamOwner {
  /**
   * Queues a DATA frame on the socket, in order with all other frames; several buffers make one
   * frame whose payload is their concatenation (sent without copying).
   */
  sendData(streamId: number, data: Buffer | readonly Buffer[], fin: boolean): void;
  /** Queues a SYN_REPLY frame. */
  sendReply(streamId: number, headers: SpdyHeadersInit): void;
  /** Queues a RST_STREAM frame. */
  sendReset(streamId: number, status: number): void;
  /** Calls `cb` once the socket's queued bytes are below the connection limit (or with an error). */
  whenWritable(cb: (err?: Error | null) => void): void;
  /** True while the socket's queued bytes are below the connection limit. */
  hasRoom(): boolean;
  /** The stream's consumer wants more data (its `_read` was called). */
  streamWantsData(stream: SpdyStream): void;
  /** The stream closed (both sides done, reset or destroyed); forget it. */
  streamClosed(stream: SpdyStream, wasReset: boolean): void;
}

/**
 * A SPDY stream.
 *
 * - `write()` sends DATA frames (split above {@link MAX_DATA_FRAME_BYTES}); the write callback fires
 *   once the connection's socket queue is below its limit, so writers feel TCP backpressure.
 * - `end()` sends an empty DATA frame with FLAG_FIN (half-close).
 * - Peer DATA is pushed to the readable side; peer FIN ends it.
 * - Peer RST_STREAM emits `'reset'` (status) and destroys the stream: without an error for CANCEL
 *   (the normal way Kubernetes tears streams down), with a {@link SpdyStreamResetError} otherwise.
 *   Losing the connection destroys streams whose readable side is unfinished with an Error.
 *   Such peer-caused errors are only passed to `destroy` when an 'error' listener exists, so an
 *   unattended stream can never crash the process (it closes without 'end' instead).
 * - Event `'reply'` (headers) fires on streams we opened when their SYN_REPLY arrives, `'headers'`
 *   (headers) on HEADERS frames.
 * - `destroy()` on a stream that is not finished sends RST_STREAM(CANCEL).
 */
export class SpdyStream extends Duplex {
  /**
   * The SYN_STREAM headers (ours for outgoing streams, the peer's for incoming), normalized. Ours are
   * kept as given and normalized on first read: an idle session's streams never read them, and the
   * callers pass shared constants (see remote-command-streams.ts).
   */
  get headers(): SpdyHeaders {
    if (this.outgoing && !this.headersNormalized) {
      this.headerSource = normalizeHeaders(this.headerSource);
      this.headersNormalized = true;
    }
    return this.headerSource as SpdyHeaders;
  }

  private headerSource: SpdyHeaders | SpdyHeadersInit;
  private headersNormalized = false;
  /**
   * Headers of the peer's SYN_REPLY (streams we opened), once it arrived; an empty block (what
   * Kubernetes sends) is the shared frozen `NO_HEADERS` (header-block.ts).
   */
  replyHeaders?: SpdyHeaders;
  /** @internal whether the peer has half-closed (FIN seen). */
  remoteFinished = false;
  private replied: boolean;
  private resetSent = false;
  private resetReceived = false;
  private localFinSent = false;
  private connectionError: Error | undefined;
  /**
   * Small DATA payloads that arrived while the readable side was not being drained (paused, or
   * chunks already waiting), copied together and pushed as one chunk (see {@link pushData}).
   */
  private held: PieceBatch | undefined;
  /** `_read` was called and nothing was pushed since: the next DATA is pushed at once. */
  private readPending = false;

  /**
   * @internal Created by `SpdyConnection` only.
   * @param id the stream id.
   * @param headers the SYN_STREAM headers: ours as given for outgoing streams (not to be changed
   *   afterwards), the peer's (normalized) for incoming.
   * @param outgoing true for streams we opened.
   */
  constructor(
    private readonly owner: SpdyStreamOwner,
    readonly id: number,
    headers: SpdyHeaders | SpdyHeadersInit,
    readonly outgoing: boolean,
  ) {
    super({ allowHalfOpen: true, emitClose: true, autoDestroy: true, highWaterMark: 1024 * 1024 });
    this.replied = outgoing;
    this.headerSource = headers;
    // One shared listener (called with the stream as `this`) instead of two closures and two `once`
    // wrappers per stream: an idle translated session holds four streams. Each event fires once.
    this.on('end', SpdyStream.onSideDone);
    this.on('finish', SpdyStream.onSideDone);
  }

  private static onSideDone(this: SpdyStream): void {
    this.checkDone();
  }

  /** Sends SYN_REPLY on a stream the peer opened; an empty header block is what Kubernetes sends. */
  reply(headers: SpdyHeadersInit = {}): void {
    assert.ok(!this.outgoing, 'reply() is only for streams opened by the peer');
    assert.ok(!this.replied, `stream ${this.id} already replied`);
    this.replied = true;
    if (this.destroyed) return;
    this.owner.sendReply(this.id, headers);
  }

  /** Sends RST_STREAM(status) and destroys the stream without an error. */
  reset(status: number = RstStatus.CANCEL): void {
    if (this.destroyed || this.resetSent || this.resetReceived) return;
    this.resetSent = true;
    this.owner.sendReset(this.id, status);
    this.destroy();
  }

  /** @internal True once the peer sent RST_STREAM for this stream (its later frames are stale). */
  get resetByPeer(): boolean {
    return this.resetReceived && this.connectionError === undefined;
  }

  /**
   * @internal Peer DATA; returns false when the consumer is full (pause the socket). While chunks
   * already wait in the readable buffer (the consumer is paused or slower) and no read is pending,
   * payloads under SMALL_PIECE_BYTES are copied together and pushed as one chunk once 16 KiB are
   * held or the consumer reads again (`_read`): the buffer's highWaterMark counts bytes, and a peer
   * sending tiny DATA frames to a paused stream would otherwise queue a million chunks under it
   * (issue 26). A consumer that keeps up gets every chunk as it comes.
   */
  pushData(data: Buffer): boolean {
    if (this.destroyed) return true;
    const held = this.held;
    if (!this.readPending && data.length < SMALL_PIECE_BYTES && ((held !== undefined && held.bytes > 0) || this.readableLength > 0)) {
      const batch = held ?? (this.held = new PieceBatch());
      batch.add(data);
      return batch.bytes < MAX_COPY_BUFFER_BYTES || this.pushHeld();
    }
    if (held !== undefined && held.bytes > 0) this.pushHeld();
    this.readPending = false;
    return this.push(data);
  }

  /** Push what {@link held} holds (before anything later); false when the consumer is full. */
  private pushHeld(): boolean {
    const held = this.held;
    if (held === undefined || held.bytes === 0 || this.destroyed) return true;
    this.readPending = false;
    let ok = true;
    for (const part of held.take()) ok = this.push(part);
    return ok;
  }

  /** @internal Peer FIN. */
  remoteFin(): void {
    if (this.remoteFinished) return;
    this.remoteFinished = true;
    this.pushHeld();
    if (!this.destroyed) this.push(null);
  }

  /**
   * @internal Peer RST_STREAM. CANCEL is how Kubernetes ends streams (the kubelet resets every stream
   * right after writing the exit status, without FIN): DATA that arrived before it stays readable and
   * the readable side then ends, as reads do in spdystream/client-go. Later writes are dropped.
   * Any other status is an abort: the stream is destroyed (with an error when someone listens).
   */
  remoteReset(status: number): void {
    // A repeated reset changes nothing (and must not add an 'end' listener per frame: an RST storm on
    // a stream whose readable side nobody reads would pile them up without bound).
    if (this.destroyed || this.resetReceived) return;
    this.resetReceived = true;
    this.emit('reset', status);
    if (status !== RstStatus.CANCEL) return this.destroyQuietly(new SpdyStreamResetError(this.id, status));
    if (!this.remoteFinished) {
      this.remoteFinished = true;
      this.pushHeld();
      this.push(null);
    }
    if (this.readableEnded) this.destroy();
    else this.once('end', () => this.destroy());
  }

  /** @internal We answered a peer protocol error with RST_STREAM: destroy quietly, send nothing more. */
  resetByUs(): void {
    this.resetSent = true;
    this.destroy();
  }

  /** @internal Mark the local side as already finished (SYN_STREAM carried FLAG_FIN). */
  markLocalFinSent(): void {
    this.localFinSent = true;
  }

  /**
   * @internal The connection is gone. A readable side that the peer had not finished is destroyed
   * with `err` so consumers notice; one the peer finished keeps its buffered data until read, and
   * only later writes fail with `err`.
   */
  connectionClosed(err: Error): void {
    if (this.destroyed) return;
    this.resetReceived = true; // nothing can be sent any more
    this.connectionError = err;
    if (!this.remoteFinished && !this.readableEnded) this.destroyQuietly(err);
    else if (this.writableFinished) this.destroy();
  }

  /**
   * Relay fast path: send `data` (one buffer, or several making one payload) as DATA frames now,
   * without a Writable write request (no per-write callback, tick or buffered entry). It applies
   * only while the Writable side holds nothing queued, is not corked and has not ended, so the order
   * on the wire stays the call order; otherwise `data` goes through `write()`. Returns false when
   * the caller should stop until {@link whenWritable} calls back (the connection's socket queue, or
   * the Writable buffer, is full), as `write()` returning false means.
   */
  writeDirect(data: Buffer | readonly Buffer[]): boolean {
    const direct =
      !this.destroyed &&
      !this.writableEnded &&
      this.writableLength === 0 &&
      this.writableCorked === 0 &&
      !this.connectionError &&
      !this.resetReceived &&
      !this.localFinSent;
    if (!direct) {
      if (Buffer.isBuffer(data)) return this.write(data);
      let ok = true;
      for (const b of data) ok = this.write(b) && ok;
      return ok;
    }
    this.ensureReplied();
    if (Buffer.isBuffer(data)) this.sendBuffer(data);
    else this.sendChunks(data);
    return this.owner.hasRoom();
  }

  /**
   * Calls `cb` once writing may go on after {@link writeDirect} (or `write()`) returned false: on
   * 'drain' while the Writable side holds queued writes, else once the connection's socket queue
   * is below its limit (with an error when the connection failed).
   */
  whenWritable(cb: () => void): void {
    if (this.writableNeedDrain) this.once('drain', cb);
    else this.owner.whenWritable(() => cb());
  }

  override _read(): void {
    // The consumer wants data: what was held for it goes first (the buffer is below its mark).
    this.readPending = true;
    this.pushHeld();
    this.owner.streamWantsData(this);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.connectionError) return cb(this.connectionError);
    if (this.resetReceived) return cb(); // the peer reset the stream: it takes nothing more
    this.ensureReplied();
    assert.ok(!this.localFinSent, `write on stream ${this.id} after FIN`);
    this.sendBuffer(chunk);
    this.owner.whenWritable(cb);
  }

  override _writev(chunks: { chunk: Buffer }[], cb: (err?: Error | null) => void): void {
    if (this.connectionError) return cb(this.connectionError);
    if (this.resetReceived) return cb();
    this.sendChunks(chunks.map((c) => c.chunk));
    this.owner.whenWritable(cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.connectionError) return cb(this.connectionError);
    if (this.resetReceived) return cb();
    if (!this.localFinSent) {
      this.ensureReplied();
      this.localFinSent = true;
      this.owner.sendData(this.id, Buffer.alloc(0), true);
    }
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    const done = (this.remoteFinished || this.readableEnded) && this.writableFinished;
    if (!done && !this.resetSent && !this.resetReceived) {
      this.resetSent = true;
      this.owner.sendReset(this.id, RstStatus.CANCEL);
    }
    this.owner.streamClosed(this, this.resetSent || this.resetReceived);
    cb(err);
  }

  private sendChunks(chunks: readonly Buffer[]): void {
    this.ensureReplied();
    assert.ok(!this.localFinSent, `write on stream ${this.id} after FIN`);
    // A writev batch becomes as few frames as the frame limit allows, each sent as its header plus
    // the chunks themselves (no copy into one buffer); a chunk above the limit is split.
    let batch: Buffer[] = [];
    let size = 0;
    for (const chunk of chunks) {
      if (chunk.length === 0) continue;
      if (size + chunk.length > MAX_DATA_FRAME_BYTES && batch.length > 0) {
        this.owner.sendData(this.id, batch.length === 1 ? batch[0]! : batch, false);
        batch = [];
        size = 0;
      }
      if (chunk.length > MAX_DATA_FRAME_BYTES) {
        this.sendBuffer(chunk);
        continue;
      }
      batch.push(chunk);
      size += chunk.length;
    }
    if (batch.length > 0) this.owner.sendData(this.id, batch.length === 1 ? batch[0]! : batch, false);
  }

  /** One buffer as DATA frames of at most {@link MAX_DATA_FRAME_BYTES}. */
  private sendBuffer(chunk: Buffer): void {
    if (chunk.length <= MAX_DATA_FRAME_BYTES) {
      if (chunk.length > 0) this.owner.sendData(this.id, chunk, false);
      return;
    }
    for (let at = 0; at < chunk.length; at += MAX_DATA_FRAME_BYTES) {
      this.owner.sendData(this.id, chunk.subarray(at, at + MAX_DATA_FRAME_BYTES), false);
    }
  }

  /** The peer (spdystream) drops DATA sent before SYN_REPLY, so reply implicitly on first write. */
  private ensureReplied(): void {
    if (!this.replied) this.reply();
  }

  /**
   * Peer-caused failures must never crash the process: the error is delivered only when someone
   * listens for it ('error' listener, `pipeline`, `finished`); otherwise the stream just closes
   * without 'end', which consumers see as a premature close.
   */
  private destroyQuietly(err: Error | undefined): void {
    this.destroy(err !== undefined && this.listenerCount('error') > 0 ? err : undefined);
  }

  private checkDone(): void {
    if (this.readableEnded && this.writableFinished && !this.destroyed) {
      this.destroy();
    }
  }
}
