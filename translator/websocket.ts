/**
 * The client side of a translated session: one `v5.channel.k8s.io` WebSocket carrying channels 0–4.
 * It owns sending (with write backpressure), receiving (decoded, pausable), the idle timeout, and
 * `finish()`: exactly one Status on channel 3, then close code 1000, then a bounded wait for the
 * client's close so that no output is cut off (kube-apiserver `pkg/util/proxy/websocket.go`; the
 * truncation bugs of ANCHORS §2/§3 are what an immediate close causes).
 */
import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { WebSocket, type RawData } from 'ws';
import { encodeStatus, type V1Status } from '../src/status.js';
import { Channel, ChannelFrameError, decodeChannelMessage, encodeChannelMessage, type ChannelId, type ChannelMessage } from './channel-frame.js';
import { PauseGate } from './pause-gate.js';
import { FastFrameReceiver } from './ws-fast-receiver.js';

/** Largest inbound message, as x/net/websocket's `DefaultMaxPayloadBytes`; larger ones end the session (1009). */
export const WS_MAX_PAYLOAD_BYTES = 32 * 1024 * 1024;

/**
 * Idle limit of a session, re-armed by every data message in either direction (not by pings): the
 * apiserver's 4 h WebSocket deadline (`wsstream` `DefaultTimeout`-style 4 h in streamtranslator).
 */
export const STREAM_IDLE_TIMEOUT_MS = 4 * 60 * 60 * 1000;

/**
 * After the Status has been queued, how long we wait for everything to be written and for the
 * client's close before the socket is destroyed: kube-apiserver's 15 minutes (its comment sizes the
 * backlog at "tens of megabytes" read at 100 KB/s). A client that closes promptly never waits.
 */
export const FINISH_CLOSE_DEADLINE_MS = 15 * 60 * 1000;

/** Output queued on the WebSocket above which producers are asked to pause. */
export const WS_WRITE_HIGH_WATER_BYTES = 1024 * 1024;
/** Output queued on the WebSocket below which paused producers resume. */
export const WS_WRITE_LOW_WATER_BYTES = 256 * 1024;

/** One channel message whose payload is `parts` joined: the channel byte and every part, copied once. */
function encodeJoined(channel: ChannelId, parts: readonly Buffer[]): Buffer {
  let size = 1;
  for (const p of parts) size += p.length;
  const out = Buffer.allocUnsafe(size);
  out[0] = channel;
  let at = 1;
  for (const p of parts) at += p.copy(out, at);
  return out;
}

/**
 * The head of one unmasked, final, binary WebSocket frame (RFC 6455 §5.2) carrying `payloadLength`
 * bytes after the channel byte, with the channel byte appended: 3, 5 or 11 bytes.
 */
export function channelFrameHead(channel: ChannelId, payloadLength: number): Buffer {
  const length = payloadLength + 1;
  // The same length encoding as ws's Sender.frame: 7 bits up to 125, 16 bits below 65,536, else 64.
  const extended = length >= 65536 ? 8 : length > 125 ? 2 : 0;
  const head = Buffer.allocUnsafe(3 + extended);
  head[0] = 0x82; // FIN, opcode 2 (binary)
  if (extended === 0) {
    head[1] = length;
  } else if (extended === 2) {
    head[1] = 126;
    head.writeUInt16BE(length, 2);
  } else {
    head[1] = 127;
    head.writeUInt32BE(Math.floor(length / 0x100000000), 2);
    head.writeUInt32BE(length >>> 0, 6);
  }
  head[2 + extended] = channel;
  return head;
}

/**
 * The parts of `ws` (8.x) the zero-copy send relies on. A server-side `WebSocket` without
 * permessage-deflate writes each frame straight to `_socket` as `[head, payload]` in one corked write
 * (ws's `Sender.sendFrame`); its `Sender` queues frames only while compressing or reading a Blob.
 */
interface WsInternals {
  _isServer?: unknown;
  _socket?: unknown;
  _extensions?: unknown;
  _sender?: { _queue?: unknown; _firstFragment?: unknown };
}

/** Where frames can be written directly, or undefined when `ws` does not look as expected. */
function rawSocketOf(ws: WebSocket): Duplex | undefined {
  const w = ws as unknown as WsInternals;
  const socket = w._socket as Partial<Duplex> | undefined;
  const extensions = w._extensions;
  if (w._isServer !== true || typeof extensions !== 'object' || extensions === null) return undefined;
  if (Object.keys(extensions).length > 0) return undefined; // permessage-deflate: frames may be queued
  if (!Array.isArray(w._sender?._queue) || w._sender._firstFragment !== true) return undefined;
  if (typeof socket?.write !== 'function' || typeof socket.cork !== 'function' || typeof socket.uncork !== 'function') return undefined;
  return socket as Duplex;
}

/**
 * A stdin message as the pieces it arrived in (the fast receiver's multi-read frames): `parts`
 * joined is the payload, without the channel byte; `length` is their total.
 */
export interface StdinParts {
  kind: 'data-parts';
  channel: typeof Channel.Stdin;
  parts: readonly Buffer[];
  length: number;
}

/** What {@link ChannelWebSocket} emits as `'message'`. */
export type InboundMessage = ChannelMessage | StdinParts;

/** The parts of `ws` (8.x) the fast receive path relies on (see translator/ws-fast-receiver.ts). */
interface WsReceiverInternals {
  _receiver?: { _state?: unknown; _bufferedBytes?: unknown; _maxPayload?: unknown; _fragmented?: unknown; _errored?: unknown; writableEnded?: boolean; destroyed?: boolean };
}

/**
 * Put a {@link FastFrameReceiver} in front of `ws`'s Receiver on the client socket: `ws`'s own
 * `'data'` listener is replaced by one that parses frames and passes to `ws` only what the fast
 * path does not take. Only where `ws` looks as expected (a server socket without extensions, see
 * {@link rawSocketOf}, its Receiver at a frame boundary with nothing buffered); else returns
 * undefined and `ws` reads the socket alone.
 */
function installFastReceiver(ws: WebSocket, socket: Duplex | undefined, onMessage: (parts: Buffer[], length: number) => void): FastFrameReceiver | undefined {
  if (socket === undefined || process.env.KSP_WS_FAST_RECEIVE === '0') return undefined;
  const receiver = (ws as unknown as WsReceiverInternals)._receiver;
  if (receiver?._state !== 0 || receiver._bufferedBytes !== 0 || receiver._fragmented !== 0 || typeof receiver._maxPayload !== 'number') return undefined;
  const wsOnData = socket.listeners('data').filter((l) => l.name === 'socketOnData');
  if (wsOnData.length !== 1) return undefined;
  const wsListener = wsOnData[0] as (this: Duplex, chunk: Buffer) => void;
  const maxPayload = receiver._maxPayload > 0 ? receiver._maxPayload : Number.MAX_SAFE_INTEGER;
  const fast = new FastFrameReceiver(maxPayload, {
    message: onMessage,
    // What ws's listener does, except once its Receiver failed or ended: ws removes its listener
    // then (the socket is drained and dropped), so nothing more may reach the Receiver.
    passThrough: (raw) => {
      if (receiver._errored === true || receiver.writableEnded === true || receiver.destroyed === true) return;
      wsListener.call(socket, raw);
    },
  });
  socket.off('data', wsListener);
  socket.on('data', (chunk: Buffer) => fast.push(chunk));
  return fast;
}

/** The WebSocket's 'error' listener: its 'close' follows and ends the session. */
function ignoreError(): void {}

/** Options of {@link ChannelWebSocket}. */
export interface ChannelWebSocketOptions {
  idleTimeoutMs?: number;
  finishDeadlineMs?: number;
}

/**
 * A v5 channel WebSocket. Events:
 * - `'message'` (ChannelMessage): each decoded client message (also while paused, for messages the
 *   socket had already read);
 * - `'drain'`: queued output fell below the low-water mark after {@link send} returned false;
 * - `'protocol-error'` (ChannelFrameError): a malformed CLOSE; the connection is already being dropped;
 * - `'idle'`: no data message for the idle timeout;
 * - `'close'` (code, wasClean): the socket is closed; emitted once.
 */
export class ChannelWebSocket extends EventEmitter {
  readonly #ws: WebSocket;
  /** The socket output frames are written to directly (no copy), when ws allows it. */
  readonly #raw: Duplex | undefined;
  readonly #inbound: PauseGate;
  /** The zero-copy frame parser in front of ws's Receiver, when installed. */
  readonly #fast: FastFrameReceiver | undefined;
  readonly #idleTimeoutMs: number;
  readonly #finishDeadlineMs: number;
  #queued = 0;
  #wantDrain = false;
  #lastActivity = Date.now();
  #idleTimer: NodeJS.Timeout | undefined;
  #finishing = false;
  #closed = false;
  #closedPromise: Promise<void> | undefined;
  #resolveClosed: (() => void) | undefined;

  constructor(ws: WebSocket, options: ChannelWebSocketOptions = {}) {
    super();
    this.#ws = ws;
    this.#raw = rawSocketOf(ws);
    this.#idleTimeoutMs = options.idleTimeoutMs ?? STREAM_IDLE_TIMEOUT_MS;
    this.#finishDeadlineMs = options.finishDeadlineMs ?? FINISH_CLOSE_DEADLINE_MS;
    this.#inbound = new PauseGate([ws]);
    // 'close' follows; a too-large message or a bad frame ends the session there.
    ws.on('error', ignoreError);
    this.#fast = installFastReceiver(ws, this.#raw, (parts, length) => this.#onFastMessage(parts, length));
    ws.on('message', (data: RawData) => {
      // While the fast receiver parses, ws sees control frames only; a data message from ws then
      // can only come from bytes ws read past it (its close handler drains the socket itself).
      if (this.#fast !== undefined && !this.#fast.fallenBack) return;
      this.#onMessage(data);
    });
    // ws emits 'close' once: a plain listener; the promise of whenClosed() only once someone asks.
    ws.on('close', (code: number) => {
      this.#closed = true;
      this.#stopIdle();
      this.#resolveClosed?.();
      this.#resolveClosed = undefined;
      this.emit('close', code, this.#finishing);
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
    if (this.#queued > WS_WRITE_HIGH_WATER_BYTES) this.#wantDrain = true;
    return !this.#wantDrain;
  }

  /** The one empty frame that tells the client the streams are ready: stdout, else stderr, else channel 3. */
  sendInitialFrame(stdout: boolean, stderr: boolean): void {
    this.#write(encodeChannelMessage(stdout ? Channel.Stdout : stderr ? Channel.Stderr : Channel.Error));
  }

  /**
   * End the session: `status` on channel 3 (exactly once; later calls only wait), then close code
   * 1000 once everything before it is written, then wait for the client's close. The socket is
   * destroyed if that has not happened within the finish deadline. Resolves when the socket closed.
   */
  finish(status: V1Status): Promise<void> {
    if (this.#finishing) return this.whenClosed();
    this.#finishing = true;
    this.#stopIdle();
    // Read again (and drop) whatever the client sends, so its close frame is seen.
    this.#inbound.open();
    if (this.#closed) return this.whenClosed();
    const deadline = setTimeout(() => this.#ws.terminate(), this.#finishDeadlineMs);
    deadline.unref();
    void this.whenClosed().then(() => clearTimeout(deadline));
    if (this.#ws.readyState !== WebSocket.OPEN) return this.whenClosed();
    this.#ws.send(encodeChannelMessage(Channel.Error, encodeStatus(status)), { binary: true }, (err) => {
      // The callback runs once this frame, and so every frame before it, reached the socket.
      if (!err && this.#ws.readyState === WebSocket.OPEN) this.#ws.close(1000);
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
    if (this.#wantDrain && this.#queued <= WS_WRITE_LOW_WATER_BYTES) {
      this.#wantDrain = false;
      this.emit('drain');
    }
  }

  /** True when client frames are parsed without ws's copy (see translator/ws-fast-receiver.ts). */
  get fastReceive(): boolean {
    return this.#fast !== undefined && !this.#fast.fallenBack;
  }

  /** A message from the fast receiver: one piece decodes as usual; a stdin message in pieces stays in pieces. */
  #onFastMessage(parts: Buffer[], length: number): void {
    if (this.#finishing) return;
    if (parts.length <= 1) return this.#onMessage(parts[0] ?? Buffer.alloc(0));
    if (parts[0]![0] !== Channel.Stdin) return this.#onMessage(Buffer.concat(parts, length));
    parts[0] = parts[0]!.subarray(1);
    this.#touch();
    const message: StdinParts = { kind: 'data-parts', channel: Channel.Stdin, parts, length: length - 1 };
    this.emit('message', message);
  }

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
    this.#touch();
    this.emit('message', message);
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
