/**
 * The client side of a translated session: one `v5.channel.k8s.io` WebSocket carrying channels 0–4.
 * It owns sending (with write backpressure), receiving (decoded, pausable), the idle timeout, and
 * `finish()`: exactly one Status on channel 3, then close code 1000, then a wait for the client's
 * close so that no output is cut off (kube-apiserver `pkg/util/proxy/websocket.go`; the truncation
 * bugs of ANCHORS §2/§3 are what an immediate close causes), cut short only when the client takes
 * nothing for the finish deadline (a no-progress deadline: proxy/drain-close.ts).
 */
import { EventEmitter } from 'node:events';
import { ProgressDeadline, RELAY_NO_PROGRESS_MS, peerProgress } from '../proxy/drain-close.js';
import { PassThrough, type Duplex } from 'node:stream';
import { WebSocket, type RawData } from 'ws';
import { encodeStatus, type V1Status } from '../src/status.js';
import { Channel, ChannelFrameError, decodeChannelMessage, encodeChannelMessage, type ChannelId, type ChannelMessage } from './channel-frame.js';
import { PieceBatch } from '../src/piece-batch.js';
import { channelFrameHead, encodeJoined } from './ws-frame-head.js';
import { PauseGate } from './pause-gate.js';
import { abandonAfterReceiveError } from './ws-abort.js';
import { clearCloseTimer, installFastReceiver, rawSocketOf, type InstalledFastReceiver, type WsInternals } from './ws-internals.js';

/** Largest inbound message, as x/net/websocket's `DefaultMaxPayloadBytes`; larger ones end the session (1009). */
export const WS_MAX_PAYLOAD_BYTES = 32 * 1024 * 1024;

/**
 * Idle limit of a session, re-armed by every data message in either direction (not by pings): the
 * apiserver's 4 h WebSocket deadline (`wsstream` `DefaultTimeout`-style 4 h in streamtranslator).
 */
export const STREAM_IDLE_TIMEOUT_MS = 4 * 60 * 60 * 1000;

/**
 * After the Status has been queued, how long the client may take nothing (no bytes of the output,
 * the Status or the close frame leave, and its kernel reads nothing) before the socket is destroyed:
 * kube-apiserver's 15 minutes, as a deadline without progress (issue 32: a fixed one cuts off a
 * reader slower than it). A client that reads, however slowly, gets everything and closes; one that
 * closes promptly never waits.
 */
export const FINISH_CLOSE_DEADLINE_MS = RELAY_NO_PROGRESS_MS;

/** Output queued on the WebSocket above which producers are asked to pause. */
export const WS_WRITE_HIGH_WATER_BYTES = 1024 * 1024;
/** Output queued on the WebSocket below which paused producers resume. */
export const WS_WRITE_LOW_WATER_BYTES = 256 * 1024;
/**
 * Output frames queued on the WebSocket above which producers are asked to pause, whatever their
 * bytes: a trickle of tiny messages toward a client that does not read costs a write request each.
 */
export const WS_WRITE_HIGH_WATER_FRAMES = 1024;
/** Output frames queued below which paused producers resume (with the bytes below their low mark). */
export const WS_WRITE_LOW_WATER_FRAMES = 256;
/**
 * A socket read that carried more client messages than this is followed by a pause of the socket
 * until the event loop's next turn. libuv reads a busy socket up to 32 times (2 MiB) per turn; of
 * tiny frames that is ~300k messages, tens of milliseconds in which no other connection is served.
 * kubectl's reads carry one or two messages each and never pause here.
 */
export const MAX_MESSAGES_PER_READ = 1024;

/**
 * Stdin data: every stdin message of one socket read (in order), as few pieces (large messages as
 * the views they arrived in, small ones copied together, src/piece-batch.ts): `parts` joined is the
 * data, without channel bytes; `length` is their total. The session writes it as one SPDY write.
 */
export interface StdinParts {
  kind: 'data-parts';
  channel: typeof Channel.Stdin;
  parts: readonly Buffer[];
  length: number;
}

/** What {@link ChannelWebSocket} emits as `'message'`. */
export type InboundMessage = ChannelMessage | StdinParts;

/** The end of a turn a busy socket yielded (see MAX_MESSAGES_PER_READ); a plain function, no closure per session. */
function endTurn(ws: ChannelWebSocket): void {
  ws.resumeInbound('turn');
}

/** Options of {@link ChannelWebSocket}. */
export interface ChannelWebSocketOptions {
  idleTimeoutMs?: number;
  finishDeadlineMs?: number;
}

/**
 * A v5 channel WebSocket. Events:
 * - `'message'` (InboundMessage): each decoded client message (also while paused, for messages the
 *   socket had already read); stdin comes as one `data-parts` message per socket read;
 * - `'drain'`: queued output fell below the low-water mark after {@link send} returned false;
 * - `'protocol-error'` (ChannelFrameError): a malformed CLOSE; the connection is already being dropped;
 * - `'receive-error'` (Error): `ws` could not read the client (1002, 1007, 1008, 1009 sent); nothing
 *   more is read and the socket is destroyed within a second (translator/ws-abort.ts);
 * - `'idle'`: no data message for the idle timeout;
 * - `'close'` (code, wasClean): the socket is closed; emitted once.
 */
export class ChannelWebSocket extends EventEmitter {
  readonly #ws: WebSocket;
  /** The socket output frames are written to directly (no copy), when ws allows it. */
  readonly #raw: Duplex | undefined;
  readonly #inbound: PauseGate;
  /** The zero-copy frame parser in front of ws's Receiver, when installed. */
  readonly #fast: InstalledFastReceiver | undefined;
  readonly #idleTimeoutMs: number;
  readonly #finishDeadlineMs: number;
  #queued = 0;
  #queuedFrames = 0;
  #wantDrain = false;
  #lastActivity = Date.now();
  #idleTimer: NodeJS.Timeout | undefined;
  #finishing = false;
  /** Set by a receiver error: nothing more is read, sent or handled. */
  #aborted = false;
  #closed = false;
  #closedPromise: Promise<void> | undefined;
  #resolveClosed: (() => void) | undefined;
  /** The stdin data of the socket read being parsed (created with the first stdin message). */
  #stdin: PieceBatch | undefined;
  #flushQueued = false;
  /** Client messages of the socket read being parsed (fast receiver only). */
  #readMessages = 0;

  constructor(ws: WebSocket, options: ChannelWebSocketOptions = {}) {
    super();
    this.#ws = ws;
    this.#raw = rawSocketOf(ws);
    this.#idleTimeoutMs = options.idleTimeoutMs ?? STREAM_IDLE_TIMEOUT_MS;
    this.#finishDeadlineMs = options.finishDeadlineMs ?? FINISH_CLOSE_DEADLINE_MS;
    this.#inbound = new PauseGate([ws]);
    // A too-large message or a bad frame: ws has queued its close frame; the session ends now.
    ws.on('error', (err: Error) => this.#onReceiveError(err));
    this.#fast = installFastReceiver(
      ws,
      this.#raw,
      {
        message: (parts, length) => this.#onFastMessage(parts, length),
        small: (chunk, start, length) => this.#onSmallMessage(chunk, start, length),
      },
      () => this.#afterRead(),
    );
    ws.on('message', (data: RawData) => {
      // While the fast receiver parses, ws sees control frames only; a data message from ws then
      // can only come from bytes ws read past it (its close handler drains the socket itself).
      if (this.#fast !== undefined && !this.#fast.fast.fallenBack) return;
      this.#readMessages++;
      this.#onMessage(data);
    });
    // ws emits 'close' once: a plain listener; the promise of whenClosed() only once someone asks.
    ws.on('close', (code: number) => {
      this.#closed = true;
      this.#stopIdle();
      this.#resolveClosed?.();
      this.#resolveClosed = undefined;
      this.emit('close', code, this.#finishing && !this.#aborted);
    });
    if (this.#idleTimeoutMs > 0) this.#armIdle(this.#idleTimeoutMs);
  }

  /** True once the socket is closed. */
  get closed(): boolean {
    return this.#closed;
  }

  /** True once {@link finish} was called. */
  get finishing(): boolean {
    return this.#finishing;
  }

  /** True once a receiver error ended the session (see `'receive-error'`). */
  get aborted(): boolean {
    return this.#aborted;
  }

  /** Resolves when the socket has closed. */
  whenClosed(): Promise<void> {
    if (this.#closedPromise === undefined) {
      this.#closedPromise = this.#closed ? Promise.resolve() : new Promise<void>((resolve) => (this.#resolveClosed = resolve));
    }
    return this.#closedPromise;
  }

  /** Bytes handed to the socket and not yet written. */
  get queuedBytes(): number {
    return this.#queued;
  }

  /** Stop reading client messages for `reason` (see PauseGate). */
  pauseInbound(reason: string): void {
    this.#inbound.hold(reason);
  }

  /** Release `reason`; reading resumes when no reason is left. */
  resumeInbound(reason: string): void {
    this.#inbound.release(reason);
  }

  /** True when {@link send} writes frames without copying the payload (see `#writeDirect`). */
  get zeroCopy(): boolean {
    return this.#raw !== undefined;
  }

  /**
   * Send `payload` on `channel` (several buffers: one message of their concatenation). The payload
   * is not copied: the buffers are written to the socket as they are, so they must not be modified
   * until written (as with `ws.send`). Returns false when the queued output is above the high-water
   * mark: the caller should pause its producer until `'drain'`. Ignored after finish/close.
   */
  send(channel: ChannelId, payload: Buffer | readonly Buffer[]): boolean {
    if (this.#finishing || this.#closed || this.#ws.readyState !== WebSocket.OPEN) return true;
    this.#touch();
    const parts: readonly Buffer[] = Buffer.isBuffer(payload) ? [payload] : payload;
    if (!this.#writeDirect(channel, parts)) {
      this.#write(Buffer.isBuffer(payload) ? encodeChannelMessage(channel, payload) : encodeJoined(channel, parts));
    }
    if (this.#queued > WS_WRITE_HIGH_WATER_BYTES || this.#queuedFrames > WS_WRITE_HIGH_WATER_FRAMES) this.#wantDrain = true;
    return !this.#wantDrain;
  }

  /** The one empty frame that tells the client the streams are ready: stdout, else stderr, else channel 3. */
  sendInitialFrame(stdout: boolean, stderr: boolean): void {
    this.#write(encodeChannelMessage(stdout ? Channel.Stdout : stderr ? Channel.Stderr : Channel.Error));
  }

  /**
   * End the session: `status` on channel 3 (exactly once; later calls only wait), then close code
   * 1000 once everything before it is written, then wait for the client's close. The socket is
   * destroyed if the client took nothing for the finish deadline (no progress: proxy/drain-close.ts).
   * Resolves when the socket closed.
   */
  finish(status: V1Status): Promise<void> {
    // After a receiver error the socket is already on its way out (within a second): nothing is sent.
    if (this.#finishing || this.#aborted) return this.whenClosed();
    this.#finishing = true;
    this.#stopIdle();
    // Read again (and drop) whatever the client sends, so its close frame is seen.
    this.#inbound.open();
    if (this.#closed) return this.whenClosed();
    // The client's socket (an open ws always has one; without it only ws's queue counts as progress).
    const socket = ((this.#ws as unknown as WsInternals)._socket as Duplex | undefined) ?? new PassThrough();
    const deadline = new ProgressDeadline(this.#finishDeadlineMs, peerProgress(socket, () => this.#ws.bufferedAmount), () => this.#ws.terminate());
    void this.whenClosed().then(() => deadline.stop());
    if (this.#ws.readyState !== WebSocket.OPEN) return this.whenClosed();
    this.#ws.send(encodeChannelMessage(Channel.Error, encodeStatus(status)), { binary: true }, (err) => {
      // The callback runs once this frame, and so every frame before it, reached the socket.
      if (!err && this.#ws.readyState === WebSocket.OPEN) {
        this.#ws.close(1000);
        // The deadline below, not ws's fixed close timeout, decides when a slow client is cut off.
        clearCloseTimer(this.#ws);
      }
    });
    return this.whenClosed();
  }

  /** Drop the connection at once (protocol error, upstream gone before any status could be sent). */
  terminate(): void {
    this.#finishing = true;
    this.#stopIdle();
    this.#ws.terminate();
  }

  #write(frame: Buffer): void {
    this.#queued += frame.length;
    this.#queuedFrames++;
    this.#ws.send(frame, { binary: true }, () => this.#written(frame.length));
  }

  /**
   * Zero-copy send: the frame head with the channel byte appended, then the payload buffers, in one
   * corked write to the socket (one writev), exactly what ws would write for the joined message but
   * without joining it (a server's frames are unmasked, so the payload goes out untouched). Only
   * while ws has nothing queued of its own, so the frame order on the wire is the call order.
   * Returns false when the caller must fall back to `ws.send`.
   */
  #writeDirect(channel: ChannelId, parts: readonly Buffer[]): boolean {
    const socket = this.#raw;
    const sender = (this.#ws as unknown as WsInternals)._sender;
    const queue = sender?._queue;
    if (socket === undefined || !Array.isArray(queue) || queue.length !== 0 || sender?._firstFragment !== true) return false;
    let size = 0;
    let last = -1;
    for (let i = 0; i < parts.length; i++) {
      size += parts[i]!.length;
      if (parts[i]!.length > 0) last = i;
    }
    const head = channelFrameHead(channel, size);
    const frameBytes = head.length + size;
    this.#queued += frameBytes;
    this.#queuedFrames++;
    const done = (): void => this.#written(frameBytes);
    if (last < 0) {
      socket.write(head, done);
      return true;
    }
    socket.cork();
    socket.write(head);
    for (let i = 0; i <= last; i++) {
      if (parts[i]!.length > 0) socket.write(parts[i], i === last ? done : undefined);
    }
    socket.uncork();
    return true;
  }

  #written(bytes: number): void {
    this.#queued -= bytes;
    this.#queuedFrames--;
    if (this.#wantDrain && this.#queued <= WS_WRITE_LOW_WATER_BYTES && this.#queuedFrames <= WS_WRITE_LOW_WATER_FRAMES) {
      this.#wantDrain = false;
      this.emit('drain');
    }
  }

  /** True when client frames are parsed without ws's copy (see translator/ws-fast-receiver.ts). */
  get fastReceive(): boolean {
    return this.#fast !== undefined && !this.#fast.fast.fallenBack;
  }

  /** The end of a socket read the fast receiver parsed: its stdin goes on; a read of many messages yields the turn. */
  #afterRead(): void {
    this.#flushStdin();
    if (this.#readMessages > MAX_MESSAGES_PER_READ && !this.#finishing) {
      this.pauseInbound('turn');
      setImmediate(endTurn, this);
    }
    this.#readMessages = 0;
  }


  /** A message from the fast receiver: stdin joins the read's batch; anything else decodes as usual. */
  #onFastMessage(parts: Buffer[], length: number): void {
    this.#readMessages++;
    if (this.#finishing) return;
    const first = parts[0];
    if (first === undefined) return; // an empty message: ignored
    if (first[0] !== Channel.Stdin) return this.#onMessage(parts.length === 1 ? first : Buffer.concat(parts, length));
    const batch = (this.#stdin ??= new PieceBatch());
    batch.add(first.subarray(1));
    for (let i = 1; i < parts.length; i++) batch.add(parts[i]!);
  }

  /** A whole tiny message from the fast receiver (`chunk[start, start + length)`, no Buffer made for it). */
  #onSmallMessage(chunk: Buffer, start: number, length: number): void {
    this.#readMessages++;
    if (this.#finishing || length === 0) return;
    if (chunk[start] === Channel.Stdin) return (this.#stdin ??= new PieceBatch()).addCopy(chunk, start + 1, start + length);
    this.#onMessage(chunk.subarray(start, start + length));
  }

  /**
   * The stdin data of the read just parsed, as one message: the messages of one socket read become
   * one SPDY write (a few DATA frames) instead of one each, so a flood of tiny frames costs what its
   * bytes cost (issue 26). Runs after each read the fast receiver parsed, else from a microtask.
   */
  #flushStdin(): void {
    const batch = this.#stdin;
    if (batch === undefined || batch.bytes === 0) return;
    const length = batch.bytes;
    const parts = batch.take();
    if (this.#finishing) return;
    this.#touch();
    const message: StdinParts = { kind: 'data-parts', channel: Channel.Stdin, parts, length };
    this.emit('message', message);
  }

  /** Created with the first use (an idle session holds no closure for it). */
  #flushTask: (() => void) | undefined;

  #onMessage(data: RawData): void {
    if (this.#finishing) return;
    const buf = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
    let message: ChannelMessage;
    try {
      message = decodeChannelMessage(buf);
    } catch (e) {
      if (!(e instanceof ChannelFrameError)) throw e;
      this.terminate();
      this.emit('protocol-error', e);
      return;
    }
    if (message.kind === 'empty' || message.kind === 'unknown') return;
    if (message.kind === 'data' && message.channel === Channel.Stdin) {
      (this.#stdin ??= new PieceBatch()).add(message.payload);
      // From ws's own Receiver outside a parsed read (no fast receiver): flushed once this turn's
      // messages are in.
      if (this.#fast?.fast.parsing !== true && !this.#flushQueued) {
        this.#flushQueued = true;
        queueMicrotask(
          (this.#flushTask ??= (): void => {
            this.#flushQueued = false;
            this.#flushStdin();
          }),
        );
      }
      return;
    }
    // Stdin read before this message goes first (a CLOSE of stdin must follow its data).
    this.#flushStdin();
    this.#touch();
    this.emit('message', message);
  }

  /** A receiver error (see translator/ws-abort.ts): stop reading, drop the socket within a second, tell the session. */
  #onReceiveError(err: Error): void {
    if (this.#aborted || this.#closed) return;
    this.#aborted = true;
    this.#finishing = true;
    this.#stdin = undefined;
    this.#stopIdle();
    this.#inbound.dispose();
    this.#fast?.detach();
    const socket = (this.#ws as unknown as WsInternals)._socket as Duplex | undefined;
    if (socket !== undefined) abandonAfterReceiveError(socket);
    else this.#ws.terminate();
    this.emit('receive-error', err);
  }

  #touch(): void {
    this.#lastActivity = Date.now();
  }

  /** One timer, re-checked on expiry, instead of a timer reset per message. */
  #armIdle(ms: number): void {
    this.#idleTimer = setTimeout(() => {
      const idleFor = Date.now() - this.#lastActivity;
      if (idleFor >= this.#idleTimeoutMs) {
        this.#idleTimer = undefined;
        this.emit('idle');
      } else {
        this.#armIdle(this.#idleTimeoutMs - idleFor);
      }
    }, ms);
    this.#idleTimer.unref();
  }

  #stopIdle(): void {
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }
}
