/**
 * The data phase of the port-forward tunnel: WebSocket binary messages ⇄ the upstream SPDY byte
 * stream, never parsing SPDY (apiserver `TunnelingConnection` under `UpgradeAwareHandler`'s two
 * `io.Copy`s). Message boundaries are independent of SPDY frames: each upstream read becomes one
 * message, each client message is written as it comes.
 *
 * Endings follow client-go's tunneling connection: close 1000 from the client is EOF (the upstream is
 * ended after what was already written), upstream EOF becomes close 1000 after every message
 * already queued. Neither end is cut off while its peer still takes bytes: only a peer that took
 * nothing for the no-progress deadline is (proxy/drain-close.ts; issue 32). A text message is a
 * protocol error: the apiserver fails the read and tears both sides down (its `Close()` then sends
 * 1000); we close with 1003 Unsupported Data so the client sees why. A frame `ws` cannot read (over
 * the payload limit, too many fragments, a bad opcode: its close 1002/1008/1009) ends both sides at
 * once, reads nothing more from the client and drops its socket within a second
 * (translator/ws-abort.ts). Everything else ends both sides.
 *
 * Counts as well as bytes (issue 26): the client messages of one socket read are written upstream
 * as one write (small ones copied together, src/piece-batch.ts), and each direction also pauses its
 * source while more than {@link TUNNEL_HIGH_WATER_WRITES} writes are queued, whatever their bytes.
 */
import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import { ReadThrottle } from '../proxy/bandwidth-limiter.js';
import { ProgressDeadline, RELAY_NO_PROGRESS_MS, drainAndClose, peerProgress } from '../proxy/drain-close.js';
import { PieceBatch } from '../src/piece-batch.js';
import { TurnCork } from '../src/turn-cork.js';
import type { RelayObserver } from '../src/recording/observer.js';
import { abandonAfterReceiveError } from './ws-abort.js';
import { clearCloseTimer } from './ws-internals.js';
import { MAX_MESSAGES_PER_READ } from './websocket.js';

/**
 * Pause the upstream once this many bytes wait in the WebSocket's send buffer. 1 MiB: a few dozen
 * upstream reads, enough to keep a loopback link busy, small enough to bound memory per tunnel
 * (remotedialer pauses at 2 MiB for the same job).
 */
export const TUNNEL_HIGH_WATER_BYTES = 1024 * 1024;
/** Resume the upstream once the WebSocket's send buffer is down to this. */
export const TUNNEL_LOW_WATER_BYTES = 256 * 1024;
/** Writes (WebSocket messages to the client, writes to the upstream) queued at which the source pauses. */
export const TUNNEL_HIGH_WATER_WRITES = 1024;
/** Queued writes at which a source paused for their count resumes. */
export const TUNNEL_LOW_WATER_WRITES = 256;

/** WebSocket close codes the tunnel sends. */
export const CloseCode = {
  /** EOF either way. */
  NORMAL: 1000,
  /** The client sent a text message; only binary carries tunnel bytes. */
  UNSUPPORTED_DATA: 1003,
  /** The upstream connection failed (reset or socket error), not a clean EOF. */
  INTERNAL_ERROR: 1011,
} as const;

/** Options of {@link relayTunnel}. */
export interface TunnelRelayOptions {
  /** Per-direction limit in bytes per second; 0 = unlimited. */
  maxBytesPerSec: number;
  /** WebSocket ping period in milliseconds; 0 = none (the apiserver's tunnel sends none). */
  pingPeriodMs?: number;
  /** Send-buffer level that pauses the upstream (default TUNNEL_HIGH_WATER_BYTES). */
  highWaterBytes?: number;
  /** Send-buffer level that resumes it (default TUNNEL_LOW_WATER_BYTES). */
  lowWaterBytes?: number;
  /**
   * The client's socket under `ws`: the first message of an event-loop turn leaves at once, the
   * messages of the upstream reads after it in that turn leave in one writev (src/turn-cork.ts, as
   * the splice and the SPDY writer do).
   */
  clientSocket?: Duplex;
  /** Session recording (a port-forward's metadata record): told the tunnel's bytes each way, closed at the end. */
  observer?: RelayObserver;
  /**
   * Once the tunnel ended, how long a side may take nothing of what is still owed to it (the
   * messages before the close frame, the client's last bytes) before it is cut off (default
   * {@link RELAY_NO_PROGRESS_MS}).
   */
  noProgressMs?: number;
}

/** Why the tunnel ended: which side first, and how. */
export interface TunnelEnd {
  side: 'client' | 'upstream';
  /**
   * `eof` (close 1000 / FIN), `text-message`, `protocol-error` (a frame ws could not read: it sent
   * 1002/1007/1008/1009), or `error` (anything else: other close codes, resets).
   */
  reason: 'eof' | 'text-message' | 'protocol-error' | 'error';
  /** The client's close code when the client ended it. */
  closeCode?: number;
}

/** A running relay. */
export interface TunnelRelay {
  /** Resolves once both the WebSocket and the upstream socket are closed. */
  readonly done: Promise<TunnelEnd>;
  /** Bytes relayed so far, per direction (payload only, no WebSocket framing). */
  readonly bytes: { readonly toUpstream: number; readonly toClient: number };
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/**
 * Start relaying between an open server-side WebSocket and the upstream socket. `early` holds bytes
 * the upstream sent after its 101 head; they go to the client first. Both sides may be paused; they
 * are resumed here.
 */
export function relayTunnel(ws: WebSocket, upstream: Duplex, early: Buffer, options: TunnelRelayOptions): TunnelRelay {
  const high = options.highWaterBytes ?? TUNNEL_HIGH_WATER_BYTES;
  const noProgressMs = options.noProgressMs ?? RELAY_NO_PROGRESS_MS;
  const low = options.lowWaterBytes ?? TUNNEL_LOW_WATER_BYTES;
  const bytes = { toUpstream: 0, toClient: 0 };
  let ended: TunnelEnd | undefined;

  // upstream → client
  let wsFull = false;
  /** Messages handed to ws and not yet written to the client socket. */
  let sending = 0;
  const upThrottle = options.maxBytesPerSec > 0 ? new ReadThrottle(upstream, options.maxBytesPerSec, () => !wsFull) : undefined;
  const onSent = (err?: Error): void => {
    sending--;
    if (err || !wsFull || ws.bufferedAmount > low || sending > TUNNEL_LOW_WATER_WRITES) return;
    wsFull = false;
    if (!upThrottle?.throttled && ended === undefined) upstream.resume();
  };
  const clientSocket = options.clientSocket;
  const turn = clientSocket ? new TurnCork(clientSocket) : undefined;
  const observer = options.observer;
  const toClient = (chunk: Buffer): void => {
    bytes.toClient += chunk.length;
    if (observer) observer.fromUpstream(chunk);
    turn?.beforeWrite();
    sending++;
    ws.send(chunk, { binary: true }, onSent);
    if (ws.bufferedAmount >= high || sending >= TUNNEL_HIGH_WATER_WRITES) {
      wsFull = true;
      upstream.pause();
    }
    upThrottle?.account(chunk.length);
  };

  // client → upstream: the messages of one socket read (ws emits them in one go) are collected and
  // written once they are all in (a microtask), as one write.
  let upstreamFull = false;
  /** Writes handed to the upstream socket and not yet done. */
  let writing = 0;
  const downThrottle = options.maxBytesPerSec > 0 ? new ReadThrottle(ws, options.maxBytesPerSec, () => !upstreamFull) : undefined;
  const batch = new PieceBatch();
  let flushQueued = false;
  const onWritten = (): void => {
    writing--;
    if (upstreamFull && writing <= TUNNEL_LOW_WATER_WRITES && !upstream.writableNeedDrain) onUpstreamDrain();
  };
  let yielding = false;
  const endYield = (): void => {
    yielding = false;
    if (!upstreamFull && !downThrottle?.throttled && ended === undefined) ws.resume();
  };
  const flushToUpstream = (): void => {
    flushQueued = false;
    if (batch.bytes === 0) return;
    // A read of many messages yields the turn (see MAX_MESSAGES_PER_READ).
    if (batch.count > MAX_MESSAGES_PER_READ && !yielding && ended === undefined) {
      yielding = true;
      ws.pause();
      setImmediate(endYield);
    }
    const parts = batch.take();
    // Also after the client's close 1000 (finish flushes what came before it, then ends the upstream).
    if (upstream.destroyed || upstream.writableEnded) return;
    let ok = true;
    if (parts.length > 1) upstream.cork();
    for (const part of parts) {
      writing++;
      ok = upstream.write(part, onWritten) && ok;
    }
    if (parts.length > 1) upstream.uncork();
    if (!ok || writing >= TUNNEL_HIGH_WATER_WRITES) {
      upstreamFull = true;
      ws.pause();
    }
  };
  const onMessage = (data: RawData, isBinary: boolean): void => {
    if (ended !== undefined) return;
    if (!isBinary) {
      flushToUpstream();
      finish({ side: 'client', reason: 'text-message' });
      return;
    }
    const chunk = toBuffer(data);
    bytes.toUpstream += chunk.length;
    if (observer) observer.fromClient(chunk);
    batch.add(chunk);
    if (!flushQueued) {
      flushQueued = true;
      queueMicrotask(flushToUpstream);
    }
    downThrottle?.account(chunk.length);
  };
  const onUpstreamDrain = (): void => {
    if (!upstreamFull || writing > TUNNEL_LOW_WATER_WRITES) return;
    upstreamFull = false;
    if (!downThrottle?.throttled && !yielding && ended === undefined) ws.resume();
  };

  let resolveDone!: (end: TunnelEnd) => void;
  const done = new Promise<TunnelEnd>((resolve) => (resolveDone = resolve));
  if (observer) void done.then(() => observer.close(bytes));
  let wsClosed = ws.readyState === ws.CLOSED;
  let upstreamClosed = upstream.destroyed;
  const settle = (): void => {
    if (ended !== undefined && wsClosed && upstreamClosed) resolveDone(ended);
  };

  const pingTimer =
    options.pingPeriodMs !== undefined && options.pingPeriodMs > 0
      ? setInterval(() => {
          if (ws.readyState === ws.OPEN) ws.ping();
        }, options.pingPeriodMs)
      : undefined;

  /** End the tunnel once; `end` says who ended it and how. */
  const finish = (end: TunnelEnd): void => {
    if (ended !== undefined) return;
    ended = end;
    clearInterval(pingTimer);
    upThrottle?.dispose();
    downThrottle?.dispose();
    upstream.off('data', toClient);
    upstream.pause();
    // Keep reading the WebSocket: the peer's close frame must get through (messages are ignored
    // now); after a protocol error nothing more is read (abandonAfterReceiveError).
    if (end.reason !== 'protocol-error') ws.resume();
    if (end.side === 'upstream') {
      // Close after the messages already queued (ws sends the close frame behind them); the
      // no-progress deadline below, not ws's fixed close timeout, bounds their delivery.
      ws.close(end.reason === 'eof' ? CloseCode.NORMAL : CloseCode.INTERNAL_ERROR);
      clearCloseTimer(ws);
      upstream.destroy();
    } else if (end.reason === 'text-message') {
      ws.close(CloseCode.UNSUPPORTED_DATA, 'tunnel: text messages are not supported, only binary');
      upstream.destroy();
    } else if (end.reason === 'eof' && !upstream.destroyed) {
      flushToUpstream();
      // EOF: what the client sent reaches the upstream, then FIN, then its close (proxy/drain-close.ts).
      void drainAndClose(upstream, { noProgressMs });
    } else {
      upstream.destroy();
    }
    if (!wsClosed) {
      // The messages before the close frame, then the client's close: waited for while the client
      // takes bytes, cut off once it took nothing for the no-progress deadline.
      const socket = clientSocket ?? ((ws as unknown as { _socket?: Duplex })._socket);
      if (socket !== undefined) {
        const deadline = new ProgressDeadline(noProgressMs, peerProgress(socket, () => ws.bufferedAmount), () => ws.terminate());
        ws.once('close', () => deadline.stop());
      }
    }
    settle();
  };

  ws.on('message', onMessage);
  // A frame ws could not read (it has queued its close frame): both sides end now; the client's
  // socket is read no more and dropped within a second. Other errors are followed by 'close'.
  ws.on('error', () => {
    if (ended !== undefined || wsClosed) return;
    const socket = clientSocket ?? ((ws as unknown as { _socket?: Duplex })._socket);
    if (socket !== undefined) abandonAfterReceiveError(socket);
    else ws.terminate();
    finish({ side: 'client', reason: 'protocol-error' });
  });
  ws.on('close', (code: number) => {
    wsClosed = true;
    finish({ side: 'client', reason: code === CloseCode.NORMAL ? 'eof' : 'error', closeCode: code });
    settle();
  });
  upstream.on('drain', onUpstreamDrain);
  upstream.on('error', () => finish({ side: 'upstream', reason: 'error' }));
  upstream.on('end', () => finish({ side: 'upstream', reason: 'eof' }));
  upstream.on('close', () => {
    upstreamClosed = true;
    finish({ side: 'upstream', reason: 'error' });
    settle();
  });

  if (early.length > 0) toClient(early);
  upstream.on('data', toClient);
  if (!wsFull && !upThrottle?.throttled) upstream.resume();
  ws.resume();
  if (wsClosed || upstreamClosed) finish({ side: wsClosed ? 'client' : 'upstream', reason: 'error' });
  return { done, bytes };
}
