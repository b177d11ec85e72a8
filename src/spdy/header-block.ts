/**
 * SPDY/3 header blocks: the name/value pair encoding and its zlib compression with the SPDY/3
 * dictionary, one context per direction per connection.
 */
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { GoAwayStatus, RstStatus } from './codes.js';
import { SPDY3_DICTIONARY, SPDY3_DICTIONARY_ID } from './dictionary.js';
import { SpdyProtocolError } from './errors.js';

/** Decoded headers: lowercase names, each with one or more values. */
export type SpdyHeaders = Record<string, string[]>;

/** Headers to send; names are lowercased by the encoder, arrays become NUL-joined values. */
export type SpdyHeadersInit = Record<string, string | number | readonly string[]>;

/** An empty header block, shared (frozen): what a Kubernetes SYN_REPLY carries. */
export const NO_HEADERS: SpdyHeaders = Object.freeze(Object.create(null) as SpdyHeaders);

/** True when `h` has no header. */
export function isEmptyHeaders(h: SpdyHeaders): boolean {
  for (const _ in h) return false;
  return true;
}

/** Largest decompressed header block accepted (bytes). */
export const MAX_HEADER_BLOCK_BYTES = 1024 * 1024;

/** The first value of header `name` (case-insensitive), or undefined. */
export function headerValue(h: SpdyHeaders, name: string): string | undefined {
  return h[name.toLowerCase()]?.[0];
}

function u32(n: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(n, 0);
  return b;
}

/** Headers to send in decoded form: names lowercased (same-name entries merged), values as strings. */
export function normalizeHeaders(headers: SpdyHeadersInit): SpdyHeaders {
  const out: SpdyHeaders = Object.create(null) as SpdyHeaders;
  for (const [rawName, raw] of Object.entries(headers)) {
    const name = rawName.toLowerCase();
    assert.ok(name.length > 0, 'header name must not be empty');
    const values = typeof raw === 'string' ? [raw] : typeof raw === 'number' ? [String(raw)] : [...raw];
    if (values.length === 0) continue;
    out[name] = [...(out[name] ?? []), ...values];
  }
  return out;
}

/** Encodes headers as an uncompressed SPDY/3 name/value block (see {@link normalizeHeaders}). */
export function encodeHeaderPairs(headers: SpdyHeadersInit): Buffer {
  const merged = Object.entries(normalizeHeaders(headers));
  const parts: Buffer[] = [u32(merged.length)];
  for (const [name, values] of merged) {
    const n = Buffer.from(name, 'utf8');
    const v = Buffer.from(values.join('\0'), 'utf8');
    parts.push(u32(n.length), n, u32(v.length), v);
  }
  return Buffer.concat(parts);
}

/**
 * How a decoder treats a name/value block. `strict` (default) refuses a repeated or empty name.
 * `spdystream` reads the block as moby/spdystream (the kubelet's SPDY) does: a repeated name's values
 * are appended in order (`http.Header.Add`, so `Get` returns the first) and an empty name is kept; a
 * session-recording tap reads the client's blocks so, to see the streams the kubelet sees.
 */
export type HeaderPairRules = 'strict' | 'spdystream';

/**
 * Decodes an uncompressed name/value block. Throws a stream-scoped {@link SpdyProtocolError}
 * (status PROTOCOL_ERROR) when `streamId` is given, else a connection-scoped one.
 */
export function decodeHeaderPairs(buf: Buffer, streamId?: number, rules: HeaderPairRules = 'strict'): SpdyHeaders {
  const fail = (msg: string): never => {
    throw streamId === undefined
      ? new SpdyProtocolError('SPDY_BAD_HEADER_BLOCK', msg, GoAwayStatus.PROTOCOL_ERROR)
      : new SpdyProtocolError('SPDY_BAD_HEADER_BLOCK', msg, RstStatus.PROTOCOL_ERROR, streamId);
  };
  let at = 0;
  const readLen = (what: string): number => {
    if (buf.length - at < 4) fail(`header block truncated reading ${what}`);
    const n = buf.readUInt32BE(at);
    at += 4;
    if (n > buf.length - at) fail(`header block ${what} ${n} overruns the block`);
    return n;
  };
  if (buf.length < 4) fail('header block truncated reading pair count');
  const count = buf.readUInt32BE(0);
  at = 4;
  // Each pair needs at least 8 bytes; reject absurd counts before allocating anything.
  if (count > (buf.length - 4) / 8) fail(`header block claims ${count} pairs in ${buf.length} bytes`);
  const out: SpdyHeaders = Object.create(null) as SpdyHeaders;
  for (let i = 0; i < count; i++) {
    const nl = readLen('name length');
    const name = buf.toString('utf8', at, at + nl);
    at += nl;
    if (nl === 0 && rules === 'strict') fail('header block has an empty header name');
    if (name !== name.toLowerCase()) fail(`header name ${JSON.stringify(name)} is not lowercase`);
    const repeated = Object.prototype.hasOwnProperty.call(out, name);
    if (repeated && rules === 'strict') fail(`duplicate header name ${JSON.stringify(name)}`);
    const vl = readLen('value length');
    const values = buf.toString('utf8', at, at + vl).split('\0');
    out[name] = repeated ? [...out[name]!, ...values] : values;
    at += vl;
  }
  if (at !== buf.length) fail(`header block has ${buf.length - at} trailing bytes`);
  return out;
}

/** zlib stream header announcing a preset dictionary (FDICT) followed by its DICTID. */
function zlibDictHeader(): Buffer {
  const cmf = 0x78; // deflate, 32 KiB window
  let flg = 0x80 | 0x20; // FLEVEL=2 (default), FDICT
  flg += 31 - ((cmf * 256 + flg) % 31);
  assert.equal((cmf * 256 + flg) % 31, 0);
  const b = Buffer.allocUnsafe(6);
  b[0] = cmf;
  b[1] = flg;
  b.writeUInt32BE(SPDY3_DICTIONARY_ID, 2);
  return b;
}

/**
 * Compresses outgoing header blocks for one connection direction, synchronously.
 *
 * The first block starts with a zlib header naming the SPDY/3 dictionary; every block is then a
 * self-contained raw deflate segment that ends on a sync-flush boundary (never a final block), so
 * the peer's single continuous inflate (with dictionary) reads the sequence as one zlib stream.
 * Blocks do not back-reference earlier blocks or the dictionary, which costs some ratio but keeps
 * compression synchronous, so frames are produced and written strictly in order.
 */
export class HeaderCompressor {
  private started = false;

  /** Returns the compressed header block for `headers`. Must be called in wire order. */
  compress(headers: SpdyHeadersInit): Buffer {
    const pairs = encodeHeaderPairs(headers);
    const body = zlib.deflateRawSync(pairs, { finishFlush: zlib.constants.Z_SYNC_FLUSH });
    if (this.started) return body;
    this.started = true;
    return Buffer.concat([zlibDictHeader(), body]);
  }
}

/** Output buffer size of the inflate context (Node's default is 16 KiB; header blocks are small). */
const INFLATE_CHUNK_BYTES = 4 * 1024;

/**
 * Decompresses incoming header blocks for one connection direction with one persistent inflate
 * (peers such as kubectl back-reference earlier blocks). Blocks are processed strictly in call order.
 * Any inflate failure is connection-scoped (GOAWAY PROTOCOL_ERROR) and poisons the decompressor.
 *
 * The zlib context (its 32 KiB window, inflate state and output buffer: about 40 KiB of native and
 * external memory) is created on the first block and dropped by {@link release} or {@link close}.
 */
/** A promise reaction that drops what it gets. */
function settledWithNothing(): undefined {
  return undefined;
}

export class HeaderDecompressor {
  private inflate: zlib.Inflate | undefined;
  private tail: Promise<unknown> = Promise.resolve();
  private failure: SpdyProtocolError | undefined;
  private failCurrent: ((e: SpdyProtocolError) => void) | undefined;
  private output: Buffer[] = [];
  private outputSize = 0;
  private released = false;
  private closed = false;

  /** True once {@link release} or {@link close} was called: every later block is refused. */
  get isReleased(): boolean {
    return this.released;
  }

  /** True while a zlib context is allocated (for tests and memory accounting). */
  get hasContext(): boolean {
    return this.inflate !== undefined;
  }

  /**
   * Inflates one block and decodes its pairs (by `rules`). With `streamId`, a malformed pair list (after a
   * successful inflate) is stream-scoped; inflate failures are always connection-scoped, and so is
   * any block handed in after {@link release} (SPDY_UNEXPECTED_HEADERS, GOAWAY PROTOCOL_ERROR).
   */
  decompress(block: Buffer, streamId?: number, rules: HeaderPairRules = 'strict'): Promise<SpdyHeaders> {
    const refused = this.released;
    const result = this.tail
      .then(() => (refused ? Promise.reject(this.refusal()) : this.inflateOne(block)))
      .then((raw) => decodeHeaderPairs(raw, streamId, rules));
    // The tail settles with nothing: it must not keep the last block's headers alive (an idle
    // connection's decompressor is released with its last SYN_REPLY's headers still in it).
    this.tail = result.then(settledWithNothing, settledWithNothing);
    return result;
  }

  /**
   * The owner expects no more header blocks: blocks already handed to {@link decompress} are still
   * inflated, then the zlib context is closed and dropped; every later block is refused with a
   * connection-scoped SPDY_UNEXPECTED_HEADERS error. Idempotent. Irreversible: the peer's deflate
   * stream back-references the window that is thrown away, so no later block could be read anyway.
   */
  release(): void {
    if (this.released) return;
    this.released = true;
    void this.tail.then(() => this.dropContext());
  }

  /** Releases the zlib context now (connection gone); later blocks are refused. */
  close(): void {
    this.released = true;
    this.closed = true;
    this.dropContext();
  }

  private refusal(): SpdyProtocolError {
    return new SpdyProtocolError(
      'SPDY_UNEXPECTED_HEADERS',
      'header block received after the last expected one (header decompressor released)',
      GoAwayStatus.PROTOCOL_ERROR,
    );
  }

  private dropContext(): void {
    const inflate = this.inflate;
    if (inflate === undefined) return;
    this.inflate = undefined;
    // A block still inflating (close() during teardown) fails now: its flush callback may never run.
    const inFlight = this.failCurrent;
    this.failCurrent = undefined;
    inFlight?.(this.refusal());
    this.output = [];
    this.outputSize = 0;
    inflate.removeAllListeners('data');
    // Keep a no-op 'error' listener: close() on a zlib stream may still emit a late error.
    inflate.removeAllListeners('error');
    inflate.on('error', () => {});
    inflate.close();
  }

  private context(): zlib.Inflate {
    if (this.inflate !== undefined) return this.inflate;
    const inflate = zlib.createInflate({ dictionary: SPDY3_DICTIONARY, chunkSize: INFLATE_CHUNK_BYTES });
    // Flowing mode: output is emitted synchronously as zlib produces it, before the callback of
    // the flush that follows each block (and the readable buffer never fills and stalls zlib).
    inflate.on('data', (c: Buffer) => {
      this.output.push(c);
      this.outputSize += c.length;
    });
    inflate.on('error', (err: Error) => {
      this.failure ??= new SpdyProtocolError(
        'SPDY_BAD_COMPRESSION',
        `header block failed to inflate: ${err.message}`,
        GoAwayStatus.PROTOCOL_ERROR,
      );
      this.failCurrent?.(this.failure);
    });
    this.inflate = inflate;
    return inflate;
  }

  private inflateOne(block: Buffer): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      if (this.failure) return reject(this.failure);
      // close() ran while this block waited behind another one.
      if (this.closed) return reject(this.refusal());
      const inflate = this.context();
      let done = false;
      this.failCurrent = (e) => {
        if (!done) {
          done = true;
          reject(e);
        }
      };
      inflate.write(block);
      inflate.flush(zlib.constants.Z_SYNC_FLUSH, () => {
        if (done) return;
        done = true;
        this.failCurrent = undefined;
        if (this.failure) return reject(this.failure);
        if (this.inflate !== inflate) return reject(this.refusal()); // closed mid-block
        const parts = this.output;
        const size = this.outputSize;
        this.output = [];
        this.outputSize = 0;
        if (size > MAX_HEADER_BLOCK_BYTES) {
          this.failure = new SpdyProtocolError(
            'SPDY_BAD_COMPRESSION',
            `header block inflates to ${size} bytes`,
            GoAwayStatus.PROTOCOL_ERROR,
          );
          return reject(this.failure);
        }
        resolve(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
      });
    });
  }
}
