/**
 * The optional splice(2) addon of the passthrough (native/splice.c, built by node-gyp into
 * build/Release/ksp_splice.node on `npm ci` when a compiler and Node's headers are there): the fast
 * path of the copy loop ({@link loadNativeSplice}) and what the kernel knows of a socket's peer: the
 * bytes it has not acknowledged yet and the receive window it advertised last ({@link socketPeerState},
 * the progress a relay's teardown waits on: proxy/drain-close.ts). Where the addon cannot be loaded
 * (not built, not Linux) the copy loop is JavaScript and the peer's state unknown;
 * `KSP_NATIVE_SPLICE=0` turns the fast path off only. See docs/decisions.md and docs/half-close.md.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { packageRoot } from '../src/package-root.js';

/** A running native splice (opaque). */
export type NativeSpliceHandle = object;

/** Which side ended a native splice: the client, the upstream, or `stop()`. */
export const NativeEnd = { Client: 0, Upstream: 1, Stopped: 2 } as const;

/** The `errno` a native splice ends with when a peer took nothing for the no-progress deadline. */
export const NATIVE_ETIMEDOUT = 110;

/** The addon's functions. */
export interface NativeSpliceAddon {
  /**
   * Start relaying between two connected TCP socket descriptors (the caller has stopped Node from
   * reading them and nothing is queued for writing). When either side ends (EOF or error) the thread
   * reads nothing more, delivers what it already read (each pipe to its destination, then a FIN
   * there) while the destination takes bytes at least once per `noProgressMs`, and ends. `onEnd`
   * runs once on the main thread after the thread has closed its own descriptors and ended; `errno`
   * is {@link NATIVE_ETIMEDOUT} when a destination took nothing for `noProgressMs`.
   */
  start(clientFd: number, upstreamFd: number, onEnd: (side: number, toUpstream: number, toClient: number, errno: number) => void, noProgressMs: number): NativeSpliceHandle;
  /** End the splice now without flushing; `onEnd` follows with side {@link NativeEnd.Stopped}. */
  stop(handle: NativeSpliceHandle): void;
  /** Bytes moved so far: [to upstream, to client]. */
  bytes(handle: NativeSpliceHandle): [number, number];
  /** Bytes in a socket's send queue its peer has not acknowledged (SIOCOUTQ); −1 when it cannot tell. */
  unsent(fd: number): number;
  /** The receive window the socket's peer advertised last (TCP_INFO `tcpi_snd_wnd`); −1 when it cannot tell. */
  peerWindow(fd: number): number;
}

/** Environment variable that turns the fast path off (`0`), for comparisons and tests. */
export const NATIVE_SPLICE_ENV = 'KSP_NATIVE_SPLICE';

let addon: NativeSpliceAddon | undefined;
let tried = false;
let loadError: string | undefined;

/** The addon, loaded once whatever {@link NATIVE_SPLICE_ENV} says; undefined when absent or not loadable. */
function loadAddon(): NativeSpliceAddon | undefined {
  if (tried) return addon;
  tried = true;
  if (process.platform !== 'linux') {
    loadError = 'not Linux';
    return undefined;
  }
  const path = join(packageRoot(import.meta.url), 'build', 'Release', 'ksp_splice.node');
  try {
    const found = createRequire(import.meta.url)(path) as Partial<NativeSpliceAddon>;
    for (const f of ['start', 'stop', 'bytes', 'unsent', 'peerWindow'] as const) {
      if (typeof found[f] !== 'function') throw new Error(`unexpected exports (no ${f}: an older build; npm run build:native)`);
    }
    addon = found as NativeSpliceAddon;
  } catch (err) {
    loadError = `${path}: ${(err as Error).message}`;
  }
  return addon;
}

/** The fast path: the addon unless it is absent, cannot load, or is turned off. */
export function loadNativeSplice(): NativeSpliceAddon | undefined {
  return process.env[NATIVE_SPLICE_ENV] === '0' ? undefined : loadAddon();
}

/** Why the fast path is not used (undefined when it is). */
export function nativeSpliceUnavailableReason(): string | undefined {
  if (process.env[NATIVE_SPLICE_ENV] === '0') return `${NATIVE_SPLICE_ENV}=0`;
  return loadAddon() ? undefined : loadError;
}

/** The descriptor under a connected socket (net.Socket, or TLSSocket: its TLSWrap has the TCP descriptor). */
export function socketFd(s: Duplex): number | undefined {
  const fd = (s as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/** What the kernel knows of a socket's peer (see {@link socketPeerState}). */
export interface PeerState {
  /** Bytes sent that the peer has not acknowledged (SIOCOUTQ). */
  unsent: number;
  /** The receive window the peer advertised last; it grows as the peer's application reads. −1: unknown. */
  window: number;
}

/** What the kernel knows of `socket`'s peer, or undefined when it cannot be asked (no addon, not a kernel socket, closed). */
export function socketPeerState(socket: Duplex): PeerState | undefined {
  const a = loadAddon();
  const fd = a && !socket.destroyed ? socketFd(socket) : undefined;
  if (fd === undefined) return undefined;
  const unsent = a!.unsent(fd);
  return unsent >= 0 ? { unsent, window: a!.peerWindow(fd) } : undefined;
}

/** Bytes `socket` has handed to the kernel that its peer has not acknowledged yet, or undefined when that cannot be known. */
export function socketUnsentBytes(socket: Duplex): number | undefined {
  return socketPeerState(socket)?.unsent;
}
