/**
 * The optional splice(2) fast path of the passthrough (native/splice.c, built by node-gyp into
 * build/Release/ksp_splice.node on `npm ci` when a compiler and Node's headers are there). Where the
 * addon cannot be loaded (not built, not Linux, `KSP_NATIVE_SPLICE=0`), {@link nativeSplice} is
 * undefined and proxy/splice.ts keeps its JavaScript copy loop. See docs/decisions.md.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { packageRoot } from '../src/package-root.js';

/** A running native splice (opaque). */
export type NativeSpliceHandle = object;

/** Which side ended a native splice: the client, the upstream, or `stop()`. */
export const NativeEnd = { Client: 0, Upstream: 1, Stopped: 2 } as const;

/** The addon's functions. */
export interface NativeSpliceAddon {
  /**
   * Start relaying between two connected TCP socket descriptors (the caller has stopped Node from
   * reading them and nothing is queued for writing). `onEnd` runs once on the main thread after the
   * thread has flushed, closed its own descriptors and ended.
   */
  start(clientFd: number, upstreamFd: number, onEnd: (side: number, toUpstream: number, toClient: number, errno: number) => void): NativeSpliceHandle;
  /** End the splice now without flushing; `onEnd` follows with side {@link NativeEnd.Stopped}. */
  stop(handle: NativeSpliceHandle): void;
  /** Bytes moved so far: [to upstream, to client]. */
  bytes(handle: NativeSpliceHandle): [number, number];
}

/** Environment variable that turns the fast path off (`0`), for comparisons and tests. */
export const NATIVE_SPLICE_ENV = 'KSP_NATIVE_SPLICE';

let loaded: NativeSpliceAddon | undefined;
let tried = false;
let loadError: string | undefined;

/** Load the addon once; undefined when it is absent, cannot load, or is turned off. */
export function loadNativeSplice(): NativeSpliceAddon | undefined {
  if (tried) return loaded;
  tried = true;
  if (process.env[NATIVE_SPLICE_ENV] === '0') {
    loadError = `${NATIVE_SPLICE_ENV}=0`;
    return undefined;
  }
  if (process.platform !== 'linux') {
    loadError = 'not Linux';
    return undefined;
  }
  const path = join(packageRoot(import.meta.url), 'build', 'Release', 'ksp_splice.node');
  try {
    const addon = createRequire(import.meta.url)(path) as Partial<NativeSpliceAddon>;
    if (typeof addon.start !== 'function' || typeof addon.stop !== 'function' || typeof addon.bytes !== 'function') throw new Error('unexpected exports');
    loaded = addon as NativeSpliceAddon;
  } catch (err) {
    loadError = `${path}: ${(err as Error).message}`;
  }
  return loaded;
}

/** Why the addon is not used (undefined when it is loaded or not tried yet). */
export function nativeSpliceUnavailableReason(): string | undefined {
  loadNativeSplice();
  return loaded ? undefined : loadError;
}
