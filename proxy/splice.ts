/**
 * Copying bytes both ways between the client socket and the upgraded connection's upstream socket,
 * with backpressure, optional per-direction bandwidth limits, and kube-apiserver's teardown rule:
 * when either direction ends (FIN, reset or error), the session ends. Ending never truncates: what
 * was already read for a side is still delivered to it, for as long as it keeps taking bytes
 * (proxy/drain-close.ts). There is no TCP half-close; SPDY and WebSocket carry their own (see
 * docs/half-close.md).
 */
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { RelayObserver } from '../src/recording/observer.js';
import type { V1Status } from '../src/status.js';
import { TurnCork } from '../src/turn-cork.js';
import { ReadThrottle } from './bandwidth-limiter.js';
import { RELAY_NO_PROGRESS_MS } from './drain-close.js';
import { closeBoth, resumeNodeReading, spliceableFd, stopNodeReading, takeBuffered, type Splice, type SpliceEnd } from './relay-sockets.js';
import { NATIVE_ETIMEDOUT, NativeEnd, loadNativeSplice, type NativeSpliceAddon, type NativeSpliceHandle } from './splice-native.js';

export type { Splice, SpliceEnd } from './relay-sockets.js';

/**
 * How long a peer has to answer a close this side started when nothing is left to deliver to it (a
 * WebSocket close handshake): the apiserver's deadline for writing an upstream error response (10 s).
 * Never a limit on delivering bytes: that is the no-progress deadline ({@link RELAY_NO_PROGRESS_MS}).
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
  /**
   * Use the splice(2) fast path (proxy/splice-native.ts) when it is loaded, there is no bandwidth
   * limit and both ends are plain TCP sockets (default true).
   */
  native?: boolean;
  /**
   * Switch to the fast path once this many bytes (both directions) went through the JavaScript
   * loop (default {@link NATIVE_SPLICE_AFTER_BYTES}; 0 = at once). Quiet sessions never switch, so
   * they hold no thread, pipes or extra descriptors.
   */
  nativeAfterBytes?: number;
  /**
   * Once the session ended, how long a side may take no bytes of what is still owed to it before it
   * is cut off (default {@link RELAY_NO_PROGRESS_MS}; docs/half-close.md).
   */
  noProgressMs?: number;
  /**
   * Session recording (src/recording/observer.ts): a tap handed every chunk of both directions
   * before it is written on, and `close` with the byte counts at the end. Turns the splice(2) fast
   * path off (the kernel copy never shows the bytes). On its `fatal` abort (an enforced recording
   * failed) the session is ended with the recording's Status ({@link RECORDING_END_DEADLINE_MS}).
   */
  observer?: RelayObserver;
}

/** How long an enforced recording's end may wait for the upstream's frame boundary before both sides are cut. */
export const RECORDING_END_DEADLINE_MS = 1_000;

/**
 * Bytes after which an upgraded connection moves to the splice(2) fast path, like HAProxy's
 * splice-auto (splice only where data flows): an idle or interactive session stays in JavaScript.
 */
export const NATIVE_SPLICE_AFTER_BYTES = 1024 * 1024;

/**
 * Start copying. Both sockets must already be connected; anything already read (the 101 head and
 * early frames) must have been written by the caller. Paused sockets are resumed.
 */
export function spliceSockets(client: Duplex, upstream: Duplex, options: SpliceOptions): Splice {
  const observer = options.observer;
  const found = options.maxBytesPerSec === 0 && options.native !== false && observer === undefined ? loadNativeSplice() : undefined;
  const addon = found && spliceableFd(client) !== undefined && spliceableFd(upstream) !== undefined ? found : undefined;
  const nativeAfter = options.nativeAfterBytes ?? NATIVE_SPLICE_AFTER_BYTES;
  const noProgressMs = options.noProgressMs ?? RELAY_NO_PROGRESS_MS;
  if (addon && nativeAfter <= 0) return nativeSplice(addon, client as Socket, upstream as Socket, { toUpstream: 0, toClient: 0 }, noProgressMs);
  const counted = { toUpstream: 0, toClient: 0 };
  let native: Splice | undefined;
  const bytes = {
    get toUpstream(): number {
      return native ? native.bytes.toUpstream : counted.toUpstream;
    },
    get toClient(): number {
      return native ? native.bytes.toClient : counted.toClient;
    },
  };
  let firstEnd: SpliceEnd | undefined;
  let switching = false;
  const stops: Array<() => void> = [];
  // Hand the sockets to the addon once enough bytes flowed, after this turn's writes were queued.
  const maybeSwitch = (): void => {
    if (!addon || switching || counted.toUpstream + counted.toClient < nativeAfter) return;
    switching = true;
    setImmediate(() => {
      if (firstEnd !== undefined || spliceableFd(client) === undefined || spliceableFd(upstream) === undefined) return;
      for (const stop of stops) stop();
      native = nativeSplice(addon, client as Socket, upstream as Socket, counted, noProgressMs);
      void native.done.then(resolveDone);
    });
  };

  const direction = (src: Duplex, dst: Duplex, count: (n: number) => void, side: SpliceEnd, tap: ((chunk: Buffer) => void) | undefined): void => {
    let dstFull = false;
    const throttle = options.maxBytesPerSec > 0 ? new ReadThrottle(src, options.maxBytesPerSec, () => !dstFull) : undefined;
    // The first read of an event-loop turn is written at once; the reads after it in the same turn
    // are corked and leave in one writev once the turn's I/O callbacks are done (src/turn-cork.ts).
    const turn = new TurnCork(dst);
    const onData = (chunk: Buffer): void => {
      count(chunk.length);
      if (tap) tap(chunk);
      turn.beforeWrite();
      dst.write(chunk);
      // Past MAX_QUEUED_BYTES the write above returned false (it is > highWaterMark), so 'drain' follows.
      if (dst.writableLength >= MAX_QUEUED_BYTES) {
        dstFull = true;
        src.pause();
      }
      throttle?.account(chunk.length);
      maybeSwitch();
    };
    const onDrain = (): void => {
      if (!dstFull) return;
      dstFull = false;
      if (!throttle?.throttled) src.resume();
    };
    const onEnd = (): void => {
      // A reset or error destroys `src` with what it read still in its buffer (it was paused for
      // backpressure): that was sent before it went, so it goes on too (docs/half-close.md).
      if (!src.readableEnded && firstEnd === undefined && !native) for (let c = src.read() as Buffer | null; c !== null; c = src.read() as Buffer | null) onData(c);
      finish(side);
    };
    src.on('data', onData);
    dst.on('drain', onDrain);
    src.on('end', onEnd);
    src.on('close', onEnd);
    src.on('error', onEnd);
    if (side === 'upstream') stopUpstreamData = () => src.off('data', onData);
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
  let stopUpstreamData: (() => void) | undefined;

  const finish = (side: SpliceEnd): void => {
    if (firstEnd !== undefined || native) return; // after the switch the native splice owns the end
    firstEnd = side;
    for (const stop of stops) stop();
    void closeBoth(client, upstream, noProgressMs).then(() => resolveDone(side));
  };

  direction(client, upstream, (n) => (counted.toUpstream += n), 'client', observer ? (c) => observer.fromClient(c) : undefined);
  direction(upstream, client, (n) => (counted.toClient += n), 'upstream', observer ? (c) => observer.fromUpstream(c) : undefined);
  if (observer) {
    void done.then(() => observer.close(counted));
    // The abort may come from inside a tap call (a sink error during onData): act once the chunk in
    // hand was written, still in this turn, so the plan starts after every byte the client has got.
    observer.fatal.addEventListener('abort', () =>
      queueMicrotask(() => {
        if (firstEnd === undefined) endRecorded(observer, client, upstream, (n) => (counted.toClient += n), stopUpstreamData!, () => finish('upstream'));
      }),
    );
  }
  return {
    done,
    bytes,
    get mode() {
      return native ? 'native' : 'js';
    },
  };
}

/**
 * An enforced recording failed mid-session: end it with the recording's Status in the client's
 * protocol (docs/recording.md, "Wiring"). The upstream's chunks go through the tap's plan from now
 * on — the rest of the frame in progress, then the Status and the protocol's end — and both sides
 * close; if no frame boundary comes within {@link RECORDING_END_DEADLINE_MS}, both are destroyed.
 */
function endRecorded(observer: RelayObserver, client: Duplex, upstream: Duplex, count: (n: number) => void, stopUpstreamData: () => void, finish: () => void): void {
  const deadline = setTimeout(() => {
    client.destroy();
    upstream.destroy();
  }, RECORDING_END_DEADLINE_MS);
  deadline.unref();
  const reason = observer.fatal.reason as { toStatus?: () => V1Status } | undefined;
  const plan = typeof reason?.toStatus === 'function' ? observer.terminate(reason.toStatus()) : undefined;
  stopUpstreamData();
  if (!plan) {
    client.destroy();
    upstream.destroy();
    return;
  }
  let ended = false;
  const cut = (chunk: Buffer): void => {
    if (ended) return;
    const { forward, done } = plan.cut(chunk);
    if (forward.length > 0) {
      count(forward.length);
      client.write(forward);
    }
    if (!done) return;
    ended = true;
    upstream.off('data', cut);
    client.write(plan.bytes);
    // Flushes what was written, then FIN; the deadline still bounds it.
    client.once('close', () => clearTimeout(deadline));
    finish();
  };
  upstream.on('data', cut);
  cut(Buffer.alloc(0));
  upstream.resume();
}

/**
 * The splice(2) fast path: Node stops reading both sockets, hands over what it had buffered, waits
 * until everything written so far (the 101 head, those bytes) has left, then the addon's thread
 * relays in the kernel until a side ends. The teardown rule is the same as the JavaScript path's:
 * when either direction ends the session ends, and what was read for a side still reaches it (the
 * thread delivers its pipes and sends the FINs; then each socket is closed once its peer has what
 * the kernel holds for it, proxy/drain-close.ts). A peer that took nothing for `noProgressMs` is
 * cut off.
 */
function nativeSplice(addon: NativeSpliceAddon, client: Socket, upstream: Socket, before: { toUpstream: number; toClient: number }, noProgressMs: number): Splice {
  const moved = { toUpstream: before.toUpstream, toClient: before.toClient };
  let handle: NativeSpliceHandle | undefined;
  let firstEnd: SpliceEnd | undefined;
  let closing = false;
  let resolveDone!: (end: SpliceEnd) => void;
  const done = new Promise<SpliceEnd>((resolve) => (resolveDone = resolve));
  const bytes = {
    get toUpstream(): number {
      return moved.toUpstream + (handle ? addon.bytes(handle)[0] : 0);
    },
    get toClient(): number {
      return moved.toClient + (handle ? addon.bytes(handle)[1] : 0);
    },
  };

  const closeSockets = (stalled: boolean): void => {
    if (closing) return;
    closing = true;
    for (const [s, l] of listeners) for (const [ev, f] of l) s.off(ev, f);
    if (stalled) {
      // A peer took nothing of what it is owed for noProgressMs: cut both off now.
      client.destroy();
      upstream.destroy();
    }
    resumeNodeReading(client);
    resumeNodeReading(upstream);
    void closeBoth(client, upstream, noProgressMs).then(() => resolveDone(firstEnd ?? 'client'));
  };
  const end = (side: SpliceEnd): void => {
    if (firstEnd !== undefined) return;
    firstEnd = side;
    if (handle) addon.stop(handle); // closeSockets once the thread has ended (onEnd)
    else closeSockets(false);
  };
  const listeners = new Map<Socket, Array<[string, () => void]>>();
  for (const [s, side] of [[client, 'client'], [upstream, 'upstream']] as const) {
    const f = (): void => end(side);
    const l: Array<[string, () => void]> = [['end', f], ['close', f], ['error', f]];
    for (const [ev, g] of l) s.on(ev, g);
    listeners.set(s, l);
  }

  client.pause();
  upstream.pause();
  stopNodeReading(client);
  stopNodeReading(upstream);
  const toUpstream = takeBuffered(client);
  const toClient = takeBuffered(upstream);
  let pending = 2;
  const flushed = (): void => {
    if (--pending > 0) return;
    if (firstEnd !== undefined || client.destroyed || upstream.destroyed) {
      if (firstEnd === undefined) end(client.destroyed ? 'client' : 'upstream');
      return;
    }
    const fds = [spliceableFd(client), spliceableFd(upstream)];
    if (fds[0] === undefined || fds[1] === undefined) return end(fds[0] === undefined ? 'client' : 'upstream');
    handle = addon.start(
      fds[0],
      fds[1],
      (side, up, down, errno) => {
        moved.toUpstream += up;
        moved.toClient += down;
        handle = undefined;
        if (firstEnd === undefined) firstEnd = side === NativeEnd.Upstream ? 'upstream' : 'client';
        closeSockets(errno === NATIVE_ETIMEDOUT);
      },
      noProgressMs,
    );
  };
  // The write callbacks run once Node handed these bytes (and everything before them) to the kernel.
  for (const [dst, chunks, count] of [
    [upstream, toUpstream, (n: number) => (moved.toUpstream += n)],
    [client, toClient, (n: number) => (moved.toClient += n)],
  ] as const) {
    for (const c of chunks) {
      count(c.length);
      dst.write(c);
    }
    dst.write(Buffer.alloc(0), flushed);
  }
  return { done, bytes, mode: 'native' };
}
