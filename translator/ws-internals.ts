/**
 * The parts of `ws` (8.x) the translated session's WebSocket relies on beyond its public API, in one
 * place: the raw socket a server-side WebSocket writes its frames to (for the zero-copy send), and
 * the socket's `'data'` listener that feeds `ws`'s Receiver (replaced by the fast frame parser of
 * translator/ws-fast-receiver.ts). Each is used only where `ws` looks exactly as expected; otherwise
 * the caller falls back to `ws`'s own API.
 */
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import { FastFrameReceiver, type FastFrameSink } from './ws-fast-receiver.js';

/**
 * The parts of `ws` the zero-copy send relies on. A server-side `WebSocket` without
 * permessage-deflate writes each frame straight to `_socket` as `[head, payload]` in one corked write
 * (ws's `Sender.sendFrame`); its `Sender` queues frames only while compressing or reading a Blob.
 */
export interface WsInternals {
  _isServer?: unknown;
  _socket?: unknown;
  _extensions?: unknown;
  _sender?: { _queue?: unknown; _firstFragment?: unknown };
}

/** Where frames can be written directly, or undefined when `ws` does not look as expected. */
export function rawSocketOf(ws: WebSocket): Duplex | undefined {
  const w = ws as unknown as WsInternals;
  const socket = w._socket as Partial<Duplex> | undefined;
  const extensions = w._extensions;
  if (w._isServer !== true || typeof extensions !== 'object' || extensions === null) return undefined;
  if (Object.keys(extensions).length > 0) return undefined; // permessage-deflate: frames may be queued
  if (!Array.isArray(w._sender?._queue) || w._sender._firstFragment !== true) return undefined;
  if (typeof socket?.write !== 'function' || typeof socket.cork !== 'function' || typeof socket.uncork !== 'function') return undefined;
  return socket as Duplex;
}

/** The parts of `ws` the fast receive path relies on (see translator/ws-fast-receiver.ts). */
interface WsReceiverInternals {
  _receiver?: { _state?: unknown; _bufferedBytes?: unknown; _maxPayload?: unknown; _fragmented?: unknown; _errored?: unknown; writableEnded?: boolean; destroyed?: boolean };
}

/** An installed fast receiver and the socket listener that feeds it. */
export interface InstalledFastReceiver {
  fast: FastFrameReceiver;
  /** Stop feeding it (nothing more is read for it; ws's own listener is gone already or stays off). */
  detach(): void;
}

/**
 * Put a {@link FastFrameReceiver} in front of `ws`'s Receiver on the client socket: `ws`'s own
 * `'data'` listener is replaced by one that parses frames and passes to `ws` only what the fast
 * path does not take; `afterRead` runs after each socket read was parsed. Only where `ws` looks as
 * expected (a server socket without extensions, see {@link rawSocketOf}, its Receiver at a frame
 * boundary with nothing buffered); else returns undefined and `ws` reads the socket alone.
 */
export function installFastReceiver(
  ws: WebSocket,
  socket: Duplex | undefined,
  sink: Pick<FastFrameSink, 'message' | 'small'>,
  afterRead: () => void,
  /** False for a client-role `ws` reading its server's unmasked frames (see FastFrameReceiver). */
  masked = true,
): InstalledFastReceiver | undefined {
  if (socket === undefined || process.env.KSP_WS_FAST_RECEIVE === '0') return undefined;
  const receiver = (ws as unknown as WsReceiverInternals)._receiver;
  if (receiver?._state !== 0 || receiver._bufferedBytes !== 0 || receiver._fragmented !== 0 || typeof receiver._maxPayload !== 'number') return undefined;
  const wsOnData = socket.listeners('data').filter((l) => l.name === 'socketOnData');
  if (wsOnData.length !== 1) return undefined;
  const wsListener = wsOnData[0] as (this: Duplex, chunk: Buffer) => void;
  const maxPayload = receiver._maxPayload > 0 ? receiver._maxPayload : Number.MAX_SAFE_INTEGER;
  const fast = new FastFrameReceiver(maxPayload, {
    ...sink,
    // What ws's listener does, except once its Receiver failed or ended: ws removes its listener
    // then (the socket is drained and dropped), so nothing more may reach the Receiver.
    passThrough: (raw) => {
      if (receiver._errored === true || receiver.writableEnded === true || receiver.destroyed === true) return;
      wsListener.call(socket, raw);
    },
  }, masked);
  const onData = (chunk: Buffer): void => {
    fast.push(chunk);
    afterRead();
  };
  socket.off('data', wsListener);
  socket.on('data', onData);
  return { fast, detach: () => void socket.off('data', onData) };
}

/** The parts of `ws`'s Sender a direct frame write relies on (see {@link senderIdle}). */
interface WsSenderState {
  _sender?: { _queue?: unknown; _firstFragment?: unknown; _state?: unknown };
}

/**
 * True when `ws`'s Sender holds nothing of its own (no queued frame, no message half sent, not
 * compressing or reading a Blob): a frame written to the socket now lands after every frame `ws`
 * wrote and before any it writes later, so direct writes keep the call order on the wire.
 */
export function senderIdle(ws: WebSocket): boolean {
  const sender = (ws as unknown as WsSenderState)._sender;
  return Array.isArray(sender?._queue) && sender._queue.length === 0 && sender._firstFragment === true && sender._state === 0;
}

/** What {@link attachClientRole} passes to `ws`'s `setSocket` (what ws's own client passes after its handshake). */
export interface ClientRoleSocketOptions {
  /** The largest message accepted (ws closes with 1009 above it). */
  maxPayload: number;
}

/**
 * Make `ws` (constructed without an address, which `ws` takes for a server-side WebSocket) the CLIENT
 * end of `socket`, whose opening handshake the caller did itself: marked a client before `setSocket`,
 * its Sender masks every frame and its Receiver refuses masked ones, exactly as `ws`'s own client is
 * set up once its handshake is done (`initAsClient` → `setSocket`). `head` holds the bytes read past
 * the 101 head (frames); `ws` reads them first.
 */
export function attachClientRole(ws: WebSocket, socket: Duplex, head: Buffer, options: ClientRoleSocketOptions): void {
  const w = ws as unknown as { _isServer: boolean; setSocket(socket: Duplex, head: Buffer, o: object): void };
  w._isServer = false;
  // The limits ws's server applies by default (its client has none): a peer's frames are bounded both ways.
  w.setSocket(socket, head, { allowSynchronousEvents: true, maxBufferedChunks: 256 * 1024, maxFragments: 16 * 1024, maxPayload: options.maxPayload, skipUTF8Validation: false });
}

/**
 * Take back the fixed deadline `ws` starts with `close()`: it destroys the socket `closeTimeout`
 * after the call (30 s by default) whatever is still queued before its close frame, which cuts off
 * a reader slower than that (issue 32). The caller's no-progress deadline (proxy/drain-close.ts)
 * bounds the wait instead. Call it right after `close()`.
 */
export function clearCloseTimer(ws: WebSocket): void {
  const w = ws as unknown as { _closeTimer?: NodeJS.Timeout | null };
  if (w._closeTimer) clearTimeout(w._closeTimer);
  w._closeTimer = null;
}
