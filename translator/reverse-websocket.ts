/**
 * The upstream end of a reverse-translated session or tunnel: a `ws` WebSocket in the CLIENT role
 * over a connection whose opening handshake the proxy wrote itself (translator/reverse-upstream-websocket.ts,
 * through the one request-head serializer; `ws` never writes a request head). `ws` reads the
 * upstream's (unmasked) frames, answers pings and runs the closing handshake; data is sent as masked
 * frames written straight to the socket, masked in place (translator/reverse-masked-frame.ts), so a
 * relayed chunk is neither joined nor copied. `send()` of a Buffer does the same, so the port-forward
 * tunnel's relay (translator/stream-tunnel-relay.ts) runs on it unchanged: the Buffer handed over is
 * the frame's from then on (its bytes are masked).
 */
import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import { maskedBinaryFrame } from './reverse-masked-frame.js';
import { attachClientRole, senderIdle } from './ws-internals.js';

/** `ws`'s constructor as it is called without an address (a WebSocket the caller attaches to a socket). */
type DetachedWebSocketConstructor = new (address: null, protocols: undefined, options: { autoPong: boolean; closeTimeout: number }) => WebSocket;

/** How a {@link UpstreamWebSocket} is set up. */
export interface UpstreamWebSocketOptions {
  /** Largest message accepted from the upstream (larger: close 1009). */
  maxPayload: number;
  /** How long `ws` waits for the upstream's close after sending its own before destroying the socket. */
  closeTimeoutMs: number;
}

type SendCallback = (err?: Error) => void;
/** What `socket.write` calls back with (`null` for success, which callers of `send` treat as no error). */
type WriteCallback = (err?: Error | null) => void;
type SendOptions = { mask?: boolean; binary?: boolean; compress?: boolean; fin?: boolean };

/** See the file comment. */
export class UpstreamWebSocket extends (WebSocket as unknown as DetachedWebSocketConstructor) {
  #socket: Duplex | undefined;

  /** The client end of `socket` (upgraded; `head`: the bytes read past the upstream's 101 head). */
  static over(socket: Duplex, head: Buffer, options: UpstreamWebSocketOptions): UpstreamWebSocket {
    const ws = new UpstreamWebSocket(null, undefined, { autoPong: true, closeTimeout: options.closeTimeoutMs });
    attachClientRole(ws, socket, head, { maxPayload: options.maxPayload });
    ws.#socket = socket;
    return ws;
  }

  /**
   * Send one binary message: `prefix` (a channel byte) when given, then `parts` joined. The parts are
   * masked in place (they belong to the frame now). `cb` runs once the frame is handed to the socket
   * and written (with an error when it could not be). Ignored, with `cb` told, once not open.
   */
  sendParts(prefix: number | undefined, parts: readonly Buffer[], cb?: SendCallback): void {
    const socket = this.#socket;
    if (socket === undefined || this.readyState !== WebSocket.OPEN) {
      if (cb) process.nextTick(cb, new Error('WebSocket is not open'));
      return;
    }
    if (!senderIdle(this)) {
      // ws is mid-way through something of its own (never, without compression): let it queue a copy.
      const joined = Buffer.concat(prefix === undefined ? parts : [Buffer.from([prefix]), ...parts]);
      super.send(joined, { binary: true }, cb);
      return;
    }
    const frame = maskedBinaryFrame(prefix, parts);
    const done = cb as WriteCallback | undefined;
    if (frame.length === 1) {
      socket.write(frame[0], done);
      return;
    }
    socket.cork();
    for (let i = 0; i < frame.length; i++) socket.write(frame[i], i === frame.length - 1 ? done : undefined);
    socket.uncork();
  }

  /** A whole binary Buffer goes out as {@link sendParts} does (masked in place); anything else as `ws` sends it. */
  override send(data: Parameters<WebSocket['send']>[0], options?: SendOptions | SendCallback, cb?: SendCallback): void {
    if (typeof options === 'function') {
      cb = options;
      options = undefined;
    }
    if (Buffer.isBuffer(data) && options?.binary !== false && options?.fin !== false && this.readyState === WebSocket.OPEN) {
      this.sendParts(undefined, [data], cb);
      return;
    }
    super.send(data, options ?? {}, cb);
  }
}
