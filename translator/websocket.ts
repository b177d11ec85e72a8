/**
 * The client side of a translated session: one `v5.channel.k8s.io` WebSocket carrying channels 0–4.
 * It owns sending (with write backpressure), receiving (decoded, pausable), the idle timeout, and
 * `finish()`: exactly one Status on channel 3, then close code 1000, then a bounded wait for the
 * client's close so that no output is cut off (kube-apiserver `pkg/util/proxy/websocket.go`; the
 * truncation bugs of ANCHORS §2/§3 are what an immediate close causes).
 */
import { EventEmitter } from 'node:events';
import { WebSocket, type RawData } from 'ws';
import { encodeStatus, type V1Status } from '../src/status.js';
import { Channel, ChannelFrameError, decodeChannelMessage, encodeChannelMessage, type ChannelId, type ChannelMessage } from './channel-frame.js';
import { PauseGate } from './pause-gate.js';

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
  readonly #inbound: PauseGate;
  readonly #idleTimeoutMs: number;
  readonly #finishDeadlineMs: number;
  #queued = 0;
  #wantDrain = false;
  #lastActivity = Date.now();
  #idleTimer: NodeJS.Timeout | undefined;
  #finishing = false;
  #closed = false;
  readonly #closedPromise: Promise<void>;

  constructor(ws: WebSocket, options: ChannelWebSocketOptions = {}) {
    super();
    this.#ws = ws;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? STREAM_IDLE_TIMEOUT_MS;
    this.#finishDeadlineMs = options.finishDeadlineMs ?? FINISH_CLOSE_DEADLINE_MS;
    this.#inbound = new PauseGate([ws]);
    ws.on('error', () => {
      // 'close' follows; a too-large message or a bad frame ends the session there.
    });
    ws.on('message', (data: RawData) => this.#onMessage(data));
    this.#closedPromise = new Promise<void>((resolve) => {
      ws.once('close', (code: number) => {
        this.#closed = true;
        this.#stopIdle();
        resolve();
        this.emit('close', code, this.#finishing);
      });
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

  /**
   * Send `payload` on `channel` (several buffers: one message of their concatenation, copied once
   * into it). Returns false when the queued output is above the high-water
   * mark: the caller should pause its producer until `'drain'`. Ignored after finish/close.
   */
  send(channel: ChannelId, payload: Buffer | readonly Buffer[]): boolean {
    if (this.#finishing || this.#closed || this.#ws.readyState !== WebSocket.OPEN) return true;
    this.#touch();
    this.#write(Buffer.isBuffer(payload) ? encodeChannelMessage(channel, payload) : encodeJoined(channel, payload));
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
    if (this.#finishing) return this.#closedPromise;
    this.#finishing = true;
    this.#stopIdle();
    // Read again (and drop) whatever the client sends, so its close frame is seen.
    this.#inbound.open();
    if (this.#closed) return this.#closedPromise;
    const deadline = setTimeout(() => this.#ws.terminate(), this.#finishDeadlineMs);
    deadline.unref();
    void this.#closedPromise.then(() => clearTimeout(deadline));
    if (this.#ws.readyState !== WebSocket.OPEN) return this.#closedPromise;
    this.#ws.send(encodeChannelMessage(Channel.Error, encodeStatus(status)), { binary: true }, (err) => {
      // The callback runs once this frame, and so every frame before it, reached the socket.
      if (!err && this.#ws.readyState === WebSocket.OPEN) this.#ws.close(1000);
    });
    return this.#closedPromise;
  }

  /** Drop the connection at once (protocol error, upstream gone before any status could be sent). */
  terminate(): void {
    this.#finishing = true;
    this.#stopIdle();
    this.#ws.terminate();
  }

  #write(frame: Buffer): void {
    this.#queued += frame.length;
    this.#ws.send(frame, { binary: true }, () => {
      this.#queued -= frame.length;
      if (this.#wantDrain && this.#queued <= WS_WRITE_LOW_WATER_BYTES) {
        this.#wantDrain = false;
        this.emit('drain');
      }
    });
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
