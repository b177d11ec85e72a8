/**
 * A SPDY/3.1 connection over an already-upgraded socket, speaking the subset Kubernetes uses
 * (moby/spdystream semantics): no flow control, TCP backpressure, frames written in production order.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { GoAwayStatus, RstStatus } from './codes.js';
import { SpdyProtocolError } from './errors.js';
import type { SpdyFrame } from './frame.js';
import { FrameIntake, type FrameSink } from './frame-intake.js';
import { FrameWriter } from './frame-writer.js';
import {
  HeaderCompressor,
  HeaderDecompressor,
  isEmptyHeaders,
  NO_HEADERS,
  type SpdyHeaders,
  type SpdyHeadersInit,
} from './header-block.js';
import { PingTracker } from './ping-tracker.js';
import { SpdyStream, type SpdyStreamOwner } from './stream.js';

/** Logger accepted by {@link SpdyConnection}. */
export interface SpdyLogger {
  warn(msg: string, ...a: unknown[]): void;
  debug?(msg: string, ...a: unknown[]): void;
}

/** Options of {@link SpdyConnection}. */
export interface SpdyConnectionOptions {
  /** Server role opens even stream ids and pings; client role odd ones. */
  isServer: boolean;
  /** Bytes read past the HTTP 101 head; parsed before anything read from the socket. */
  head?: Buffer;
  /** Send a PING every this many ms (kubectl uses 5,000). */
  pingIntervalMs?: number;
  /** Stream write callbacks wait while the socket queues this many bytes or more. Default 1 MiB. */
  maxQueuedBytes?: number;
  /** One `warn` line per protocol error; `debug` for routine events. */
  logger?: SpdyLogger;
}

/** Options of {@link SpdyConnection.openStream}. */
export interface OpenStreamOptions {
  /** Send SYN_STREAM with FLAG_FIN (we will send no data). */
  fin?: boolean;
  /** Reject (and reset the stream) when no SYN_REPLY arrives in time. Default 30,000 ms. */
  timeoutMs?: number;
}

/** Default {@link SpdyConnectionOptions.maxQueuedBytes}. */
export const DEFAULT_MAX_QUEUED_BYTES = 1024 * 1024;
/** Default {@link OpenStreamOptions.timeoutMs}: what kubectl waits for each SYN_REPLY. */
export const DEFAULT_OPEN_TIMEOUT_MS = 30_000;
/** After close(), destroy the socket if the peer has not closed it within this time. */
const CLOSE_GRACE_MS = 30_000;
/** How many forgotten stream ids we remember, to tell late frames from bogus ones. */
const RECENT_LIMIT = 1024;

interface PendingOpen {
  resolve(s: SpdyStream): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * SPDY/3.1 connection. Events: `'stream'` (SpdyStream) for each accepted peer SYN_STREAM, whose
 * listener must call `stream.reply()` or `stream.reset()` (with no listener streams are refused);
 * `'goaway'` (lastGoodStreamId, status); `'close'` once the socket is closed.
 */
export class SpdyConnection extends EventEmitter implements SpdyStreamOwner, FrameSink {
  private readonly isServer: boolean;
  private readonly log: SpdyLogger;
  private readonly writer: FrameWriter;
  private readonly pings: PingTracker;
  private readonly compressor = new HeaderCompressor();
  private readonly decompressor = new HeaderDecompressor();
  private readonly intake: FrameIntake;
  private readonly streams = new Map<number, SpdyStream>();
  private readonly pendingOpens = new Map<number, PendingOpen>();
  /** Streams closed lately (created with the first close: an idle connection has none). */
  private recent: Map<number, 'reset' | 'done'> | undefined;
  private nextStreamId: number;
  private lastPeerStreamId = 0;
  private goAwaySent = false;
  private goAwayReceived = false;
  private closing = false;
  private isClosed = false;
  private pingTimer: NodeJS.Timeout | undefined;
  private closeError: Error | undefined;

  /**
   * @param socket the upgraded socket (net.Socket, tls.TLSSocket or any Duplex).
   * @param options role, leftover head bytes, ping interval, write queue limit, logger.
   */
  constructor(
    private readonly socket: Duplex,
    options: SpdyConnectionOptions,
  ) {
    super();
    this.isServer = options.isServer;
    this.log = options.logger ?? { warn: () => {} };
    this.nextStreamId = this.isServer ? 2 : 1;
    this.pings = new PingTracker(this.isServer);
    this.intake = new FrameIntake(socket, this.decompressor, this);
    this.writer = new FrameWriter(socket, options.maxQueuedBytes ?? DEFAULT_MAX_QUEUED_BYTES, (f) =>
      this.log.debug?.(`spdy: dropping ${f.type} frame, socket no longer writable`),
    );
    socket.on('error', (err: NodeJS.ErrnoException) => {
      const routine = err.code === 'ECONNRESET' || err.code === 'EPIPE';
      if (routine) this.log.debug?.(`spdy: socket ${err.code}`);
      else this.log.warn(`spdy: socket error: ${err.message}`);
      this.closeError ??= new Error(`SPDY connection lost: ${err.message}`);
    });
    let peerEnded = false;
    socket.on('end', () => {
      peerEnded = true;
      // The peer sent its last frame. Deliver what is still queued behind a full stream, then fail
      // the streams it left unfinished, flush ours and finish (http server sockets are half-open).
      this.intake.whenDispatched(() => {
        if (this.intake.midFrame && !this.intake.isStopped) {
          this.log.warn(`spdy: peer closed the connection mid-frame (${this.intake.bufferedBytes} bytes pending)`);
        }
        this.intake.stop();
        this.failStreams(new Error('SPDY connection closed by peer'));
        if (!socket.writableEnded) socket.end();
      });
    });
    socket.on('close', () => {
      const err = this.closeError ?? new Error('SPDY connection closed');
      // After a clean FIN, frames already read still go to their streams first (see 'end').
      if (peerEnded && this.closeError === undefined) this.intake.whenDispatched(() => this.teardown(err));
      else this.teardown(err);
    });
    if (options.pingIntervalMs !== undefined && options.pingIntervalMs > 0) {
      this.pingTimer = setInterval(() => this.ping().catch(() => {}), options.pingIntervalMs).unref();
    }
    let head = options.head;
    // Defer so the caller can attach 'stream' listeners before frames in `head` are dispatched.
    process.nextTick(() => {
      // The closures above share this scope: drop `head` (a slice of a socket read) once pushed.
      const first = head;
      head = undefined;
      if (first !== undefined && first.length > 0) this.intake.push(first);
      if (!this.isClosed) socket.on('data', (c: Buffer) => this.intake.push(c));
    });
  }

  /** True once the socket has closed or the connection was destroyed. */
  get closed(): boolean {
    return this.isClosed;
  }

  /** Opens a stream; resolves once the peer's SYN_REPLY arrives. */
  openStream(headers: SpdyHeadersInit, options: OpenStreamOptions = {}): Promise<SpdyStream> {
    if (this.closing || this.isClosed) return Promise.reject(new Error('SPDY connection is closed'));
    if (this.goAwayReceived) return Promise.reject(new Error('SPDY peer sent GOAWAY; no new streams'));
    if (this.decompressor.isReleased) {
      return Promise.reject(new Error('SPDY header decompressor released; no new streams (their SYN_REPLY could not be read)'));
    }
    const id = this.nextStreamId;
    if (id > 0x7fffffff) return Promise.reject(new Error('SPDY stream ids exhausted'));
    this.nextStreamId += 2;
    const headerBlock = this.compressor.compress(headers);
    const stream = new SpdyStream(this, id, headers, true);
    this.streams.set(id, stream);
    const fin = options.fin ?? false;
    if (fin) stream.markLocalFinSent();
    const timeoutMs = options.timeoutMs ?? DEFAULT_OPEN_TIMEOUT_MS;
    const promise = new Promise<SpdyStream>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.settleOpen(id, new Error(`SPDY stream ${id}: no SYN_REPLY within ${timeoutMs} ms`));
        stream.reset(RstStatus.CANCEL);
      }, timeoutMs).unref();
      this.pendingOpens.set(id, { resolve, reject, timer });
    });
    this.writeFrame({ type: 'syn_stream', streamId: id, associatedStreamId: 0, priority: 0, fin, unidirectional: false, headerBlock });
    if (fin) stream.end();
    return promise;
  }

  /**
   * The owner expects no more header blocks from the peer (SYN_STREAM, SYN_REPLY or HEADERS): for
   * example a remote-command client once every stream it opened has its SYN_REPLY, since a kubelet
   * sends header blocks only in those replies. Frees the inbound zlib context (about 40 KiB per
   * connection: the 32 KiB window the peer's deflate back-references, the inflate state and its
   * output buffer) once any block already being decoded is done. From then on header blocks are not
   * read: a header-carrying frame whose answer does not depend on its headers gets that answer as
   * before (RST_STREAM for a SYN_REPLY/HEADERS on an unknown stream, STREAM_IN_USE for a duplicate
   * SYN_REPLY, PROTOCOL_ERROR/REFUSED_STREAM for a SYN_STREAM we would refuse anyway); one whose
   * headers would be used (HEADERS on a live stream, a SYN_STREAM we would accept) is a connection
   * error, answered like a block that fails to inflate: GOAWAY PROTOCOL_ERROR and close (code
   * SPDY_UNEXPECTED_HEADERS). Opening streams is no longer possible (their SYN_REPLY could not be
   * read): {@link openStream} rejects. Idempotent, irreversible.
   */
  releaseHeaderDecompressor(): void {
    this.decompressor.release();
  }

  /** True once {@link releaseHeaderDecompressor} was called (or the connection closed). */
  get headerDecompressorReleased(): boolean {
    return this.decompressor.isReleased;
  }

  /** Sends a PING with our id parity; resolves with the round-trip time in ms. */
  ping(): Promise<number> {
    if (this.closing || this.isClosed) return Promise.reject(new Error('SPDY connection is closed'));
    const { id, rtt } = this.pings.start();
    this.writeFrame({ type: 'ping', id });
    return rtt;
  }

  /** Sends GOAWAY once (no new peer streams accepted after it). */
  goAway(status: number = GoAwayStatus.OK): void {
    if (this.goAwaySent) return;
    this.goAwaySent = true;
    this.writeFrame({ type: 'goaway', lastGoodStreamId: this.lastPeerStreamId, status });
  }

  /**
   * Graceful close: waits until every stream whose writable side was ended has handed all its DATA
   * (and FIN) to the socket, then sends GOAWAY and ends the socket once everything queued is written
   * (never destroys it: the peer closes). Without the wait, GOAWAY and the socket's FIN would overtake
   * DATA still buffered in a stream (up to its highWaterMark) and the peer would lose the tail of
   * stdout. Resolves when our side is flushed and ended, or the socket is closed.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.stopPinging(new Error('SPDY connection closing'));
    const flushing = [...this.streams.values()].filter((s) => s.writableEnded && !s.writableFinished && !s.destroyed);
    await Promise.all(
      flushing.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.once('finish', resolve);
            s.once('close', resolve);
          }),
      ),
    );
    this.goAway(GoAwayStatus.OK);
    if (this.isClosed || this.socket.destroyed) return;
    return new Promise<void>((resolve) => {
      if (this.socket.writableFinished) return resolve();
      this.socket.once('finish', () => resolve());
      this.socket.once('close', () => resolve());
      if (!this.socket.writableEnded) this.socket.end();
      const grace = setTimeout(() => this.socket.destroy(), CLOSE_GRACE_MS).unref();
      // Left armed after the socket closed, the timer would keep this connection (streams, buffers,
      // zlib contexts) reachable for CLOSE_GRACE_MS after every session.
      this.socket.once('close', () => clearTimeout(grace));
    });
  }

  /** Destroys the socket at once; streams fail with `err` (or a generic error). */
  destroy(err?: Error): void {
    this.closing = true;
    this.closeError ??= err;
    this.socket.destroy();
    this.teardown(err ?? new Error('SPDY connection destroyed'));
  }

  // ---- SpdyStreamOwner ----

  /** @internal */
  sendData(streamId: number, data: Buffer | readonly Buffer[], fin: boolean): void {
    this.writer.writeData(streamId, fin, data);
  }

  /** @internal */
  sendReply(streamId: number, headers: SpdyHeadersInit): void {
    this.writeFrame({ type: 'syn_reply', streamId, fin: false, headerBlock: this.compressor.compress(headers) });
  }

  /** @internal */
  sendReset(streamId: number, status: number): void {
    this.writeFrame({ type: 'rst_stream', streamId, status });
  }

  /** @internal */
  whenWritable(cb: (err?: Error | null) => void): void {
    this.writer.whenWritable(cb);
  }

  /** @internal */
  hasRoom(): boolean {
    return this.writer.hasRoom();
  }

  /** @internal */
  streamWantsData(stream: SpdyStream): void {
    this.intake.unblock(stream);
  }

  /** @internal */
  streamClosed(stream: SpdyStream, wasReset: boolean): void {
    if (this.streams.get(stream.id) === stream) this.streams.delete(stream.id);
    this.remember(stream.id, wasReset ? 'reset' : 'done');
    this.settleOpen(stream.id, new Error(`SPDY stream ${stream.id} closed before SYN_REPLY`));
    this.intake.unblock(stream);
  }

  /** Writes one frame now; all frames go through here, so the wire order is production order. */
  private writeFrame(frame: SpdyFrame): void {
    this.writer.write(frame);
  }

  // ---- input (FrameSink) ----

  /** @internal */
  onFrame(f: SpdyFrame, headers: SpdyHeaders | undefined): void {
    switch (f.type) {
      case 'data':
        return this.onDataFrame(f.streamId, f.data, f.fin, f.continued === true);
      case 'syn_stream':
      case 'syn_reply':
      case 'headers':
        // No headers only once the decompressor is released (see FrameIntake.dispatch).
        assert.ok(headers !== undefined || this.decompressor.isReleased);
        return this.onHeaderFrame(f, headers);
      case 'rst_stream':
        this.settleOpen(f.streamId, new Error(`SPDY stream ${f.streamId} refused: RST_STREAM status ${f.status}`));
        this.streams.get(f.streamId)?.remoteReset(f.status);
        return;
      case 'ping':
        if (this.pings.isOurs(f.id)) {
          this.pings.echoed(f.id);
        } else {
          this.writeFrame({ type: 'ping', id: f.id });
        }
        return;
      case 'goaway':
        this.goAwayReceived = true;
        for (const id of [...this.pendingOpens.keys()]) {
          if (id > f.lastGoodStreamId) {
            this.settleOpen(id, new Error(`SPDY peer sent GOAWAY (status ${f.status}) before replying to stream ${id}`));
            this.streams.get(id)?.resetByUs();
          }
        }
        this.emit('goaway', f.lastGoodStreamId, f.status);
        return;
      case 'settings':
      case 'window_update':
      case 'unknown':
        // No flow control, like spdystream: accept and ignore.
        this.log.debug?.(`spdy: ignoring ${f.type} frame`);
        return;
    }
  }

  /** One DATA frame, or one piece of it (`continued`: not its first piece) as the bytes arrive. */
  private onDataFrame(id: number, data: Buffer, fin: boolean, continued: boolean): void {
    const stream = this.streams.get(id);
    // A frame's later pieces follow its first, which was already answered (or dropped) if unknown.
    if (stream === undefined) return continued ? undefined : this.unknownStream(id, 'DATA');
    // The peer reset this stream itself: what it still sends is stale. Dropped, exactly as once the
    // stream is forgotten (`recent` 'reset'), so the answer never depends on when the reset stream
    // finished closing.
    if (stream.resetByPeer) return;
    if (stream.remoteFinished) {
      return this.streamError(stream.id, RstStatus.STREAM_ALREADY_CLOSED, `DATA on stream ${id} after FIN`);
    }
    if (data.length > 0 && !stream.pushData(data)) this.intake.block(stream);
    if (fin) stream.remoteFin();
  }

  /**
   * `headers` is undefined when the block arrived after {@link releaseHeaderDecompressor}: the frame
   * still gets the answer it would have had whenever that answer does not depend on its headers
   * (RST_STREAM for an unknown stream, a duplicate SYN_REPLY, a SYN_STREAM we refuse), so a stray
   * frame costs one stream as before; only a frame whose headers would be used is a connection error.
   */
  private onHeaderFrame(f: SpdyFrame & { streamId: number; fin: boolean }, headers: SpdyHeaders | undefined): void {
    if (f.type === 'syn_stream') return this.onSynStream(f.streamId, f.fin, headers);
    const stream = this.streams.get(f.streamId);
    if (stream === undefined) return this.unknownStream(f.streamId, f.type.toUpperCase());
    if (f.type === 'syn_reply') {
      if (!stream.outgoing || stream.replyHeaders !== undefined) {
        return this.streamError(f.streamId, RstStatus.STREAM_IN_USE, `duplicate SYN_REPLY on stream ${f.streamId}`);
      }
      if (headers === undefined) return this.unexpectedHeaders(f.type.toUpperCase(), f.streamId);
      stream.replyHeaders = isEmptyHeaders(headers) ? NO_HEADERS : headers;
      const pending = this.pendingOpens.get(f.streamId);
      this.pendingOpens.delete(f.streamId);
      if (pending) clearTimeout(pending.timer);
      stream.emit('reply', headers);
      pending?.resolve(stream);
    } else {
      if (headers === undefined) return this.unexpectedHeaders(f.type.toUpperCase(), f.streamId);
      stream.emit('headers', headers);
    }
    if (f.fin) stream.remoteFin();
  }

  /** A header block that would be used arrived after the decompressor was released. */
  private unexpectedHeaders(what: string, streamId: number): void {
    this.protocolError(
      new SpdyProtocolError(
        'SPDY_UNEXPECTED_HEADERS',
        `${what} on stream ${streamId} after the header decompressor was released`,
        GoAwayStatus.PROTOCOL_ERROR,
      ),
    );
  }

  private onSynStream(id: number, fin: boolean, headers: SpdyHeaders | undefined): void {
    const peerParity = this.isServer ? 1 : 0;
    if (id % 2 !== peerParity) {
      return this.streamError(id, RstStatus.PROTOCOL_ERROR, `SYN_STREAM with our parity id ${id}`);
    }
    if (id <= this.lastPeerStreamId) {
      return this.streamError(id, RstStatus.PROTOCOL_ERROR, `SYN_STREAM reuses id ${id} (last ${this.lastPeerStreamId})`);
    }
    this.lastPeerStreamId = id;
    if (this.goAwaySent || this.closing || this.listenerCount('stream') === 0) {
      this.log.debug?.(`spdy: refusing stream ${id}`);
      return this.sendReset(id, RstStatus.REFUSED_STREAM);
    }
    if (headers === undefined) return this.unexpectedHeaders('SYN_STREAM', id);
    const stream = new SpdyStream(this, id, headers, false);
    this.streams.set(id, stream);
    if (fin) stream.remoteFin();
    this.emit('stream', stream);
  }

  private unknownStream(id: number, what: string): void {
    const recent = this.recent?.get(id);
    if (recent === 'reset') {
      this.log.debug?.(`spdy: dropping ${what} for reset stream ${id}`);
      return;
    }
    const status = recent === 'done' ? RstStatus.STREAM_ALREADY_CLOSED : RstStatus.INVALID_STREAM;
    this.streamError(id, status, `${what} on unknown stream ${id}`);
  }

  private streamError(id: number, status: number, msg: string): void {
    this.protocolError(new SpdyProtocolError('SPDY_BAD_STREAM', msg, status, id));
  }

  /** @internal */
  onIntakeError(err: unknown, f?: SpdyFrame): void {
    if (err instanceof SpdyProtocolError && err.streamScoped && f?.type === 'syn_stream') {
      this.lastPeerStreamId = Math.max(this.lastPeerStreamId, f.streamId); // the id is used up
    }
    this.protocolError(err);
  }

  /** Answers a peer error: RST_STREAM for stream-scoped ones, GOAWAY + close otherwise. */
  private protocolError(err: unknown): void {
    if (!(err instanceof SpdyProtocolError)) {
      this.log.warn(`spdy: internal error, closing connection: ${String(err)}`);
      this.goAway(GoAwayStatus.INTERNAL_ERROR);
      return this.failConnection(err instanceof Error ? err : new Error(String(err)));
    }
    if (err.streamId !== undefined) {
      this.log.warn(`spdy: ${err.message}; sending RST_STREAM status ${err.status}`);
      this.sendReset(err.streamId, err.status);
      this.remember(err.streamId, 'reset');
      this.streams.get(err.streamId)?.resetByUs();
      return;
    }
    this.log.warn(`spdy: ${err.message}; sending GOAWAY status ${err.status} and closing`);
    this.goAway(err.status);
    this.failConnection(err);
  }

  private failConnection(err: Error): void {
    this.intake.stop();
    this.closeError ??= err;
    this.failStreams(err);
    void this.close();
  }

  private failStreams(err: Error): void {
    for (const [id] of this.pendingOpens) this.settleOpen(id, err);
    for (const s of [...this.streams.values()]) s.connectionClosed(err);
  }

  private settleOpen(id: number, err: Error): void {
    const p = this.pendingOpens.get(id);
    if (p === undefined) return;
    this.pendingOpens.delete(id);
    clearTimeout(p.timer);
    p.reject(err);
  }

  private remember(id: number, how: 'reset' | 'done'): void {
    const recent = (this.recent ??= new Map());
    recent.set(id, how);
    if (recent.size > RECENT_LIMIT) recent.delete(recent.keys().next().value!);
  }

  private stopPinging(err: Error): void {
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = undefined;
    this.pings.rejectAll(err);
  }

  private teardown(err: Error): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.closing = true;
    this.intake.stop();
    this.stopPinging(err);
    this.failStreams(err);
    this.writer.fail(err);
    this.decompressor.close();
    assert.equal(this.pendingOpens.size, 0);
    this.emit('close');
  }
}
