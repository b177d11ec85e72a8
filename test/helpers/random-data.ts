/**
 * Deterministic pseudo-random bytes: a seeded xorshift32 generator, fast enough to fill 100 MB
 * in well under a second, so tests can compare sha256 without keeping reference files around.
 *
 * The byte sequence for a (seed, length) pair does not depend on how it is chunked: the generator
 * state advances one 32-bit word per 4 bytes, and a stream always emits whole words except at the end.
 */
import { endianness } from 'node:os';
import { createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createHash } from 'node:crypto';
import assert from 'node:assert/strict';
import type { Digest } from './hash.js';

// Words are written through a Uint32Array view; the expected hashes assume little-endian layout.
assert.equal(endianness(), 'LE', 'random-data.ts assumes a little-endian host');

const DEFAULT_CHUNK = 1 << 20;

/** A resumable xorshift32 byte generator. */
export class XorShiftBytes {
  #state: number;

  constructor(seed: number) {
    // xorshift32 must never hold 0; mix the seed so that small seeds still differ early on.
    this.#state = (Math.imul(seed >>> 0 || 0x9e3779b9, 0x85ebca6b) ^ 0x2545f491) >>> 0 || 1;
  }

  /** Fill `buf` (its length must be a multiple of 4 unless it is the final chunk). */
  fill(buf: Buffer): Buffer {
    const words = buf.length >>> 2;
    const aligned = buf.byteOffset % 4 === 0;
    const view = aligned
      ? new Uint32Array(buf.buffer, buf.byteOffset, words)
      : new Uint32Array(words);
    let x = this.#state;
    for (let i = 0; i < words; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      view[i] = x;
    }
    if (!aligned) Buffer.from(view.buffer, 0, words * 4).copy(buf, 0);
    const rest = buf.length - words * 4;
    if (rest > 0) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      const tail = Buffer.alloc(4);
      tail.writeUInt32LE(x >>> 0, 0);
      tail.copy(buf, words * 4, 0, rest);
    }
    this.#state = x >>> 0;
    return buf;
  }
}

/** `length` deterministic bytes for `seed`, in one Buffer (fine up to a few hundred MB). */
export function deterministicBytes(seed: number, length: number): Buffer {
  return new XorShiftBytes(seed).fill(Buffer.allocUnsafe(length));
}

/** The same bytes as {@link deterministicBytes}, as a Readable in chunks (default 1 MiB). */
export function deterministicStream(seed: number, length: number, chunkSize = DEFAULT_CHUNK): Readable {
  assert.ok(chunkSize > 0 && chunkSize % 4 === 0, 'chunkSize must be a positive multiple of 4');
  const gen = new XorShiftBytes(seed);
  let left = length;
  return new Readable({
    highWaterMark: chunkSize,
    read() {
      if (left <= 0) {
        this.push(null);
        return;
      }
      const n = Math.min(left, chunkSize);
      left -= n;
      this.push(gen.fill(Buffer.allocUnsafe(n)));
      if (left <= 0) this.push(null);
    },
  });
}

const digestCache = new Map<string, Digest>();

/** SHA-256 of the deterministic sequence (seed, length), computed in chunks and cached. */
export function deterministicDigest(seed: number, length: number): Digest {
  const key = `${seed}:${length}`;
  const hit = digestCache.get(key);
  if (hit) return hit;
  const gen = new XorShiftBytes(seed);
  const hash = createHash('sha256');
  const chunk = Buffer.allocUnsafe(DEFAULT_CHUNK);
  let left = length;
  while (left > 0) {
    const n = Math.min(left, DEFAULT_CHUNK);
    hash.update(gen.fill(n === DEFAULT_CHUNK ? chunk : chunk.subarray(0, n)));
    left -= n;
  }
  const d = { sha256: hash.digest('hex'), byteLength: length };
  digestCache.set(key, d);
  return d;
}

/** Write the deterministic sequence to a file; returns its digest. */
export async function writeDeterministicFile(path: string, seed: number, length: number): Promise<Digest> {
  await pipeline(deterministicStream(seed, length), createWriteStream(path));
  return deterministicDigest(seed, length);
}

/**
 * Digest of `pattern` repeated and cut at `length` bytes — what
 * `sh -c "yes abcdefghij | head -c N"` prints, computed locally.
 */
export function repeatedPatternDigest(pattern: string, length: number): Digest {
  const unit = Buffer.from(pattern);
  const block = Buffer.alloc(Math.max(unit.length, Math.floor(DEFAULT_CHUNK / unit.length) * unit.length));
  for (let i = 0; i < block.length; i += unit.length) unit.copy(block, i);
  const hash = createHash('sha256');
  let left = length;
  while (left > 0) {
    const n = Math.min(left, block.length);
    hash.update(n === block.length ? block : block.subarray(0, n));
    left -= n;
  }
  return { sha256: hash.digest('hex'), byteLength: length };
}
