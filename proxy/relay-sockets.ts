/**
 * What every fast path of an upgraded connection's relay does with Node's sockets when it takes them
 * over from the JavaScript copy loop (proxy/splice.ts) and hands them back: which sockets qualify
 * (a plain TCP descriptor for splice(2)), keeping Node from reading, taking what Node had already
 * buffered, and closing both sides without truncating (proxy/drain-close.ts). Below the relays that
 * use it (the splice(2) path, the TLS user-buffer path: proxy/tls-relay.ts) so neither imports the other.
 */
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { drainAndClose } from './drain-close.js';

/** Which side ended the connection first. */
export type SpliceEnd = 'client' | 'upstream';

/** A running splice. */
export interface Splice {
  /** Resolves when both sockets are closed, with the side that ended first. */
  readonly done: Promise<SpliceEnd>;
  /** Bytes copied so far, per direction. */
  readonly bytes: { readonly toUpstream: number; readonly toClient: number };
  /** Which copy loop runs now: the kernel's splice(2) (native addon) or Node streams. */
  readonly mode: 'native' | 'js';
}

/** Close both sides once each has what was read for it (proxy/drain-close.ts). */
export function closeBoth(client: Duplex, upstream: Duplex, noProgressMs: number): Promise<unknown> {
  return Promise.all([drainAndClose(client, { noProgressMs }), drainAndClose(upstream, { noProgressMs })]);
}

/** Node's TCP handle of a socket (internal, stable since Node 0.x). */
interface TcpHandle {
  fd?: number;
  reading?: boolean;
  readStop?(): number;
}

/** The descriptor of a connected, plain (not TLS) TCP socket in both directions, else undefined. */
export function spliceableFd(s: Duplex): number | undefined {
  if (!(s instanceof Socket) || s instanceof TLSSocket || s.connecting || s.destroyed || !s.readable || !s.writable) return undefined;
  if (s.readableEnded || s.writableEnded) return undefined;
  const h = (s as unknown as { _handle?: TcpHandle })._handle;
  return typeof h?.fd === 'number' && h.fd >= 0 && typeof h.readStop === 'function' ? h.fd : undefined;
}

/** Keep Node from reading `s` from now on (the native thread reads its descriptor instead). */
export function stopNodeReading(s: Socket): void {
  // A pending maybeReadMore or a read() would call _read and start libuv reading again.
  (s as unknown as { _read: () => void })._read = () => {};
  const h = (s as unknown as { _handle?: TcpHandle })._handle;
  if (h?.reading) {
    h.reading = false;
    h.readStop?.();
  }
}

/**
 * Let Node read `s` again (the native thread has ended): its own `_read` back, and called once, since
 * the stream still waits for the read our stand-in swallowed (its `reading` state stays set until a
 * read pushes something).
 */
export function resumeNodeReading(s: Socket): void {
  const own = s as unknown as { _read?: (n: number) => void };
  delete own._read;
  if (!s.destroyed && !s.readableEnded) own._read!(s.readableHighWaterMark);
}

/** Whatever Node had already read from `s` into its stream buffer. */
export function takeBuffered(s: Socket): Buffer[] {
  const chunks: Buffer[] = [];
  for (let c = s.read() as Buffer | null; c !== null; c = s.read() as Buffer | null) chunks.push(c);
  return chunks;
}
