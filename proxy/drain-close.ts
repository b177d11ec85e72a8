/**
 * How every relay closes a connection without cutting off what it still owes the peer (issue 32,
 * "never truncate"; docs/half-close.md). The session's end is decided, but what was already read
 * for this peer is still delivered, and the connection stays until the peer has read it and closed
 * its side. It is torn down earlier only when the peer has gone (a reset, an error) or made no
 * progress for {@link RELAY_NO_PROGRESS_MS}, never after a fixed time: a reader slower than any
 * fixed deadline (kubectl piped into `less`, a slow link) would lose the end of the output, which is
 * how Kubernetes 1.37's passthrough truncates exec output.
 *
 * Progress ({@link peerProgress}) is the peer taking bytes: Node's write queue going down, then,
 * where the kernel can be asked (the splice addon: proxy/splice-native.ts), its unacknowledged send
 * queue going down and the receive window the peer advertises growing (its application reads what
 * its kernel holds). Without the addon only Node's queue is seen.
 *
 * Why wait for the peer's close rather than for an empty send queue: a peer whose kernel holds the
 * last bytes unread may still write (kubectl's pings); writing to a closed socket earns it a reset,
 * and a client that treats the failed write as the end (Node does) throws away what it had not read.
 * Meanwhile whatever the peer sends is read and dropped, so that our own close is a FIN: closing a
 * socket with unread bytes makes the kernel answer with a reset and drop what it has not sent.
 */
import type { Duplex } from 'node:stream';
import { socketFd, socketPeerState } from './splice-native.js';

/**
 * How long a peer may take no bytes at all before a closing connection is torn down: kube-apiserver's
 * wait for a WebSocket client after the last Status (`pkg/util/proxy/websocket.go`, 15 minutes, sized
 * for "tens of megabytes" read at 100 KB/s). As a deadline without progress it never cuts a reader
 * that reads, however slowly, and gives a person paging through output with `less` minutes per page.
 * A stalled connection costs its sockets and at most the relay's bounded queue.
 */
export const RELAY_NO_PROGRESS_MS = 15 * 60 * 1000;

/** How often a closing connection's progress is looked at (only during a teardown). */
const CHECK_INTERVAL_MS = 100;

/** True when the peer took something since the last call. */
export type Progress = () => boolean;

/**
 * The progress of `socket`'s peer: `queued()` (default: the socket's write queue) going down, and
 * where the kernel can be asked, its unacknowledged bytes going down or the peer's receive window
 * growing.
 */
export function peerProgress(socket: Duplex, queued: () => number = () => socket.writableLength): Progress {
  let lastQueued = queued();
  let lastState = socketPeerState(socket);
  return () => {
    const q = queued();
    const state = socketPeerState(socket);
    const moved = q < lastQueued || (state !== undefined && lastState !== undefined && (state.unsent < lastState.unsent || state.window > lastState.window));
    lastQueued = q;
    if (state !== undefined) lastState = state;
    return moved;
  };
}

/**
 * A no-progress deadline: `onStall` runs once when `progress()` has said false for `ms`. It never
 * fires while the peer takes bytes, however slowly. One timer per teardown, checked every 100 ms (or
 * every `ms`, when shorter).
 */
export class ProgressDeadline {
  #lastProgress = performance.now();
  #timer: NodeJS.Timeout | undefined;

  constructor(ms: number, progress: Progress, onStall: () => void) {
    this.#timer = setInterval(() => {
      const now = performance.now();
      if (progress()) this.#lastProgress = now;
      else if (now - this.#lastProgress >= ms) {
        this.stop();
        onStall();
      }
    }, Math.max(1, Math.min(CHECK_INTERVAL_MS, ms)));
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

/** Options of {@link drainAndClose}. */
export interface DrainCloseOptions {
  /** Default {@link RELAY_NO_PROGRESS_MS}. */
  noProgressMs?: number;
}

/**
 * Close `socket` without cutting off what was written to it: FIN after Node's queue, then destroy
 * once the peer closed its side too (a stream that is no kernel socket: once all was handed on), or
 * at once when it has gone (error, reset), or when it made no progress for the no-progress deadline.
 * What the peer sends meanwhile is read and dropped. Resolves when the socket is closed.
 */
export function drainAndClose(socket: Duplex, options: DrainCloseOptions = {}): Promise<void> {
  return new Promise<void>((resolve) => {
    if (socket.destroyed) return resolve();
    // A reset or error: the peer has gone, nothing more can reach it.
    socket.on('error', () => socket.destroy());
    // A kernel socket is done when the peer closed its side too; any other stream (an HTTP/2 stream,
    // an in-memory pair) once everything was handed to what carries it.
    const kernel = socketFd(socket) !== undefined;
    const closeIfDone = (): void => {
      if (socket.writableFinished && (socket.readableEnded || !kernel)) socket.destroy();
    };
    const deadline = new ProgressDeadline(options.noProgressMs ?? RELAY_NO_PROGRESS_MS, peerProgress(socket), () => socket.destroy());
    socket.once('close', () => {
      deadline.stop();
      resolve();
    });
    socket.on('end', closeIfDone);
    socket.on('finish', closeIfDone);
    socket.on('data', drop);
    socket.resume();
    if (!socket.writableEnded) socket.end();
    closeIfDone();
  });
}

/** The 'data' listener of a closing connection: what the peer still sends is dropped. */
function drop(): void {}
