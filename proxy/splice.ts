/**
 * Copying bytes both ways between the client socket and the upstream socket of an upgraded
 * connection, with backpressure, optional per-direction bandwidth limits, and kube-apiserver's
 * teardown rule: when either direction ends (FIN, reset or error), both connections close.
 * There is no TCP half-close; SPDY and WebSocket carry their own (see docs/half-close.md).
 */
import type { Duplex } from 'node:stream';
import { ReadThrottle } from './bandwidth-limiter.js';

/**
 * How long a closing socket may take to flush what was already read from its peer before it is
 * destroyed. Same as the apiserver's deadline for writing an upstream error response (10 s).
 */
export const FLUSH_DEADLINE_MS = 10_000;

/**
 * Bytes a destination may have queued before its source is paused. Larger than a socket's 16 KiB
 * highWaterMark so that everything read in one event-loop turn can be batched into one writev.
 */
export const MAX_QUEUED_BYTES = 1024 * 1024;

/** Options for {@link spliceSockets}. */
export interface SpliceOptions {
  /** Per-direction limit in bytes per second; 0 = unlimited. */
  maxBytesPerSec: number;
}

/** Which side ended the connection first. */
export type SpliceEnd = 'client' | 'upstream';

/** A running splice. */
export interface Splice {
  /** Resolves when both sockets are closed, with the side that ended first. */
  readonly done: Promise<SpliceEnd>;
  /** Bytes copied so far, per direction. */
  readonly bytes: { readonly toUpstream: number; readonly toClient: number };
}

/**
 * Start copying. Both sockets must already be connected; anything already read (the 101 head and
 * early frames) must have been written by the caller. Paused sockets are resumed.
 */
export function spliceSockets(client: Duplex, upstream: Duplex, options: SpliceOptions): Splice {
  const bytes = { toUpstream: 0, toClient: 0 };
  let firstEnd: SpliceEnd | undefined;
  const stops: Array<() => void> = [];

  const direction = (src: Duplex, dst: Duplex, count: (n: number) => void, side: SpliceEnd): void => {
    let dstFull = false;
    const throttle = options.maxBytesPerSec > 0 ? new ReadThrottle(src, options.maxBytesPerSec, () => !dstFull) : undefined;
    // The chunks of all reads in one event-loop turn are corked and leave in one writev once the
    // turn's I/O callbacks are done (one syscall and one wake-up of the peer instead of one per read).
    let corked = false;
    const flush = (): void => {
      corked = false;
      dst.uncork();
    };
    const onData = (chunk: Buffer): void => {
      count(chunk.length);
      if (!corked && !dst.writableEnded) {
        corked = true;
        dst.cork();
        setImmediate(flush);
      }
      dst.write(chunk);
      // Past MAX_QUEUED_BYTES the write above returned false (it is > highWaterMark), so 'drain' follows.
      if (dst.writableLength >= MAX_QUEUED_BYTES) {
        dstFull = true;
        src.pause();
      }
      throttle?.account(chunk.length);
    };
    const onDrain = (): void => {
      if (!dstFull) return;
      dstFull = false;
      if (!throttle?.throttled) src.resume();
    };
    const onEnd = (): void => finish(side);
    src.on('data', onData);
    dst.on('drain', onDrain);
    src.on('end', onEnd);
    src.on('close', onEnd);
    src.on('error', onEnd);
    stops.push(() => {
      throttle?.dispose();
      src.off('data', onData);
      dst.off('drain', onDrain);
      src.off('end', onEnd);
      src.off('close', onEnd);
      src.pause();
    });
    src.resume();
  };

  let resolveDone!: (end: SpliceEnd) => void;
  const done = new Promise<SpliceEnd>((resolve) => (resolveDone = resolve));

  const close = (socket: Duplex): Promise<void> =>
    new Promise<void>((resolve) => {
      if (socket.destroyed) return resolve();
      socket.once('close', () => resolve());
      // Keep a listener so a late reset does not become an uncaught 'error'.
      socket.on('error', () => {});
      const deadline = setTimeout(() => socket.destroy(), FLUSH_DEADLINE_MS);
      deadline.unref();
      // Flush what was already written to this socket, send FIN, then drop it: we no longer read
      // from it, so we would never see its peer's FIN.
      socket.end(() => {
        clearTimeout(deadline);
        socket.destroy();
      });
    });

  const finish = (side: SpliceEnd): void => {
    if (firstEnd !== undefined) return;
    firstEnd = side;
    for (const stop of stops) stop();
    void Promise.all([close(client), close(upstream)]).then(() => resolveDone(side));
  };

  direction(client, upstream, (n) => (bytes.toUpstream += n), 'client');
  direction(upstream, client, (n) => (bytes.toClient += n), 'upstream');
  return { done, bytes };
}
