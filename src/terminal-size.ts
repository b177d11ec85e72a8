/**
 * Terminal sizes sent on the resize channel (WebSocket channel 4, SPDY `resize` stream).
 *
 * The kubelet reads that input with Go's `json.Decoder`, so it is a stream of JSON objects: one may
 * be split across frames and several may share one frame. Go clients send `{"Width":80,"Height":24}`
 * (struct fields without JSON tags), the JS client sends `{"height":24,"width":80}`; Go matches keys
 * case-insensitively, and so do we.
 */

/** A terminal size in character cells (Go `remotecommand.TerminalSize`, uint16 fields). */
export interface TerminalSize {
  width: number;
  height: number;
}

/** Bytes the decoder keeps while waiting for the end of an object; more than this is an error. */
export const MAX_PENDING_RESIZE_BYTES = 4096;

/** Why the resize input was rejected. */
export type TerminalSizeDecodeErrorCode = 'RESIZE_SYNTAX' | 'RESIZE_TYPE' | 'RESIZE_TOO_LARGE';

/**
 * The resize input is not a stream of size objects. Like the kubelet, the caller stops reading resize
 * input after this error; `decoded` holds the sizes that preceded the bad input in the same push.
 */
export class TerminalSizeDecodeError extends Error {
  override readonly name = 'TerminalSizeDecodeError';
  constructor(
    readonly code: TerminalSizeDecodeErrorCode,
    message: string,
    readonly decoded: TerminalSize[] = [],
  ) {
    super(message);
  }
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * Incremental decoder for a stream of JSON terminal-size objects. `push` returns every complete
 * object seen so far and throws {@link TerminalSizeDecodeError} on bad input; once failed, every
 * later push throws the same error.
 */
export class TerminalSizeDecoder {
  #pending: Buffer = Buffer.alloc(0);
  #failed: TerminalSizeDecodeError | undefined;

  /** Feed the next chunk; returns the sizes completed by it, in order. */
  push(chunk: Buffer): TerminalSize[] {
    if (this.#failed) throw this.#failed;
    const buf = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const sizes: TerminalSize[] = [];
    let pos = 0;
    for (;;) {
      while (pos < buf.length && WHITESPACE.has(buf[pos]!)) pos++;
      if (pos >= buf.length) break;
      const end = scanValue(buf, pos);
      if (end === 'syntax') return this.#fail('RESIZE_SYNTAX', `invalid character in resize input at byte ${pos}`, sizes);
      if (end === 'incomplete') break;
      let value: unknown;
      try {
        value = JSON.parse(buf.subarray(pos, end).toString('utf8'));
      } catch (e) {
        return this.#fail('RESIZE_SYNTAX', `invalid resize object: ${(e as Error).message}`, sizes);
      }
      pos = end;
      if (value === null) continue; // Go: decoding null into a struct is a no-op
      const size = toTerminalSize(value);
      if (typeof size === 'string') return this.#fail('RESIZE_TYPE', size, sizes);
      sizes.push(size);
    }
    this.#pending = Buffer.from(buf.subarray(pos));
    if (this.#pending.length > MAX_PENDING_RESIZE_BYTES) {
      return this.#fail('RESIZE_TOO_LARGE', `resize object longer than ${MAX_PENDING_RESIZE_BYTES} bytes`, sizes);
    }
    return sizes;
  }

  #fail(code: TerminalSizeDecodeErrorCode, message: string, decoded: TerminalSize[]): never {
    this.#pending = Buffer.alloc(0);
    this.#failed = new TerminalSizeDecodeError(code, message, decoded);
    throw this.#failed;
  }
}

/**
 * Find the end of the JSON value starting at `start`: objects are scanned with string and nesting
 * awareness; `null` is the only other value allowed. Returns the end offset, 'incomplete' or 'syntax'.
 */
function scanValue(buf: Buffer, start: number): number | 'incomplete' | 'syntax' {
  const first = buf[start];
  if (first === 0x6e /* n */) {
    const want = Buffer.from('null');
    const have = buf.subarray(start, start + 4);
    if (!want.subarray(0, have.length).equals(have)) return 'syntax';
    return have.length < 4 ? 'incomplete' : start + 4;
  }
  if (first !== 0x7b /* { */) return 'syntax';
  let depth = 0;
  let inString = false;
  for (let i = start; i < buf.length; i++) {
    const c = buf[i]!;
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return 'incomplete';
}

/** Map a decoded object onto a TerminalSize the way Go's json does for uint16 fields. */
function toTerminalSize(value: unknown): TerminalSize | string {
  if (typeof value !== 'object' || Array.isArray(value) || value === null) {
    return 'resize input is not an object';
  }
  const size: TerminalSize = { width: 0, height: 0 };
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    const field = key.toLowerCase();
    if (field !== 'width' && field !== 'height') continue; // Go ignores unknown fields
    if (v === null) continue;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffff) {
      return `resize ${field} must be an integer in 0..65535`;
    }
    size[field] = v;
  }
  return size;
}
