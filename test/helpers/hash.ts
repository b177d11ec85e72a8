/**
 * SHA-256 of Buffers, streams and files, plus a Writable sink that hashes and counts what passes
 * through it (for 100 MB+ outputs that should never be held in memory).
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** A digest together with the number of bytes it covers. */
export interface Digest {
  /** Lowercase hex SHA-256. */
  sha256: string;
  byteLength: number;
}

/** Lowercase hex SHA-256 of one Buffer (or string, hashed as UTF-8). */
export function sha256(data: Buffer | Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A Writable that hashes and counts everything written to it; `digest()` is valid after 'finish'. */
export class HashingSink extends Writable {
  readonly #hash: Hash = createHash('sha256');
  #bytes = 0;
  #hex: string | undefined;

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.#hash.update(chunk);
    this.#bytes += chunk.length;
    cb();
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.#hex = this.#hash.digest('hex');
    cb();
  }

  /** Bytes seen so far. */
  get byteLength(): number {
    return this.#bytes;
  }

  /** The final digest; throws if the sink has not finished yet. */
  digest(): Digest {
    if (this.#hex === undefined) throw new Error('HashingSink.digest() called before the stream finished');
    return { sha256: this.#hex, byteLength: this.#bytes };
  }
}

/** SHA-256 and length of everything a Readable produces (consumes it to the end). */
export async function sha256Stream(stream: Readable): Promise<Digest> {
  const sink = new HashingSink();
  await pipeline(stream, sink);
  return sink.digest();
}

/** SHA-256 and length of a file. */
export async function sha256File(path: string): Promise<Digest> {
  return sha256Stream(createReadStream(path, { highWaterMark: 1 << 20 }));
}
