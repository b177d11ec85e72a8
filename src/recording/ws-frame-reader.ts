/**
 * A read-only RFC 6455 frame reader for taps (pure: bytes in, payload pieces out). It never modifies
 * its input — the relay writes the same chunks on unchanged, possibly later (corked) — so it does not
 * unmask: each piece comes with its frame's mask and its offset in the frame, and the consumer
 * unmasks a copy of only what it records ({@link unmaskedCopy}).
 *
 * Why not `ws`'s Receiver or `translator/ws-fast-receiver.ts`: both unmask in place in the socket's
 * buffers (right for an endpoint, wrong for a tap whose bytes are still to be relayed), and `ws`
 * joins a frame that spans reads into a new buffer. Here a payload comes out as the slices of the
 * input chunks it lies in; fragmented messages are followed across continuation frames (control
 * frames between fragments are skipped), so a consumer sees one message as pieces with `first` on
 * the first and `fin` on the last.
 */

/** Where a {@link WsFrameReader} sends what it reads. */
export interface WsFrameSink {
  /**
   * A piece of a data message's payload. `opcode` is the message's (1 text, 2 binary); `piece` is a
   * slice of an input chunk, still masked when `mask` is given (`offset`: its position in its frame,
   * for the mask phase). `first`: the message's first piece; `fin`: its last.
   */
  data(opcode: number, piece: Buffer, mask: Buffer | undefined, offset: number, first: boolean, fin: boolean): void;
  /** A close frame was read. */
  close(): void;
}

/** Bytes of `piece` unmasked into a new buffer (the mask phase taken from `offset`). */
export function unmaskedCopy(piece: Buffer, mask: Buffer | undefined, offset: number): Buffer {
  const out = Buffer.from(piece);
  if (mask === undefined) return out;
  for (let i = 0; i < out.length; i++) out[i]! ^= mask[(offset + i) & 3]!;
  return out;
}

/** The reader could not parse the stream (the peer would have failed the connection too). */
export class WsFrameError extends Error {
  override readonly name = 'WsFrameError';
}

/** Incremental frame reader for one direction. */
export class WsFrameReader {
  readonly #sink: WsFrameSink;
  #head = Buffer.alloc(14);
  #headLen = 0;
  /** Payload bytes still to come in the current frame (−1: reading a header). */
  #remaining = -1;
  #offset = 0;
  #opcode = 0;
  #mask: Buffer | undefined;
  #fin = false;
  /** The opcode of the data message in progress (continuations follow it); 0 when none. */
  #messageOpcode = 0;
  #messageStarted = false;
  #frameStartsMessage = false;
  #failed: WsFrameError | undefined;

  constructor(sink: WsFrameSink) {
    this.#sink = sink;
  }

  /** Input bytes still to come before the current frame ends: 0 at a boundary, undefined mid-header. */
  get bytesToFrameEnd(): number | undefined {
    if (this.#remaining >= 0) return this.#remaining;
    return this.#headLen === 0 ? 0 : undefined;
  }

  /** True inside a fragmented data message (a non-final frame was read). */
  get midMessage(): boolean {
    return this.#messageOpcode !== 0;
  }

  /** Header bytes held for the frame being started. */
  get bufferedHeaderBytes(): number {
    return this.#headLen;
  }

  /** Feed bytes. Throws {@link WsFrameError} on a malformed stream (and keeps throwing). */
  push(chunk: Buffer): void {
    if (this.#failed) throw this.#failed;
    let at = 0;
    while (at < chunk.length) {
      if (this.#remaining < 0) {
        at = this.#readHeader(chunk, at);
        continue;
      }
      const n = Math.min(this.#remaining, chunk.length - at);
      this.#payload(chunk.subarray(at, at + n));
      at += n;
    }
  }

  #readHeader(chunk: Buffer, at: number): number {
    while (at < chunk.length) {
      this.#head[this.#headLen++] = chunk[at++]!;
      const need = this.#headerLength();
      if (need !== undefined && this.#headLen === need) {
        this.#startFrame();
        return at;
      }
    }
    return at;
  }

  /** Full header length once the first two bytes are known. */
  #headerLength(): number | undefined {
    if (this.#headLen < 2) return undefined;
    const len7 = this.#head[1]! & 0x7f;
    const masked = (this.#head[1]! & 0x80) !== 0;
    return 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (masked ? 4 : 0);
  }

  #startFrame(): void {
    const h = this.#head;
    const fin = (h[0]! & 0x80) !== 0;
    const opcode = h[0]! & 0x0f;
    const masked = (h[1]! & 0x80) !== 0;
    const len7 = h[1]! & 0x7f;
    let length: number;
    let at = 2;
    if (len7 === 126) {
      length = h.readUInt16BE(2);
      at = 4;
    } else if (len7 === 127) {
      const big = h.readBigUInt64BE(2);
      if (big > BigInt(Number.MAX_SAFE_INTEGER)) this.#fail(`frame length ${big} too large`);
      length = Number(big);
      at = 10;
    } else length = len7;
    this.#mask = masked ? Buffer.from(h.subarray(at, at + 4)) : undefined;
    this.#headLen = 0;
    this.#opcode = opcode;
    this.#fin = fin;
    this.#offset = 0;
    this.#remaining = length;
    if (opcode >= 8) {
      if (!fin || length > 125) this.#fail('fragmented or oversized control frame');
      if (opcode === 8) this.#sink.close();
    } else if (opcode === 0) {
      if (this.#messageOpcode === 0) this.#fail('continuation frame without a message');
      this.#frameStartsMessage = false;
    } else if (opcode === 1 || opcode === 2) {
      if (this.#messageOpcode !== 0) this.#fail('new message inside a fragmented message');
      this.#messageOpcode = opcode;
      this.#messageStarted = false;
      this.#frameStartsMessage = true;
    } else this.#fail(`reserved opcode ${opcode}`);
    if (length === 0) this.#frameDone(Buffer.alloc(0));
  }

  #payload(piece: Buffer): void {
    this.#remaining -= piece.length;
    if (this.#opcode < 8) this.#deliver(piece, this.#remaining === 0);
    this.#offset += piece.length;
    if (this.#remaining === 0) this.#endFrame();
  }

  /** An empty frame: deliver its (empty) message end when it ends a message. */
  #frameDone(empty: Buffer): void {
    if (this.#opcode < 8) this.#deliver(empty, true);
    this.#endFrame();
  }

  #deliver(piece: Buffer, frameEnd: boolean): void {
    const fin = frameEnd && this.#fin;
    if (piece.length === 0 && !fin && !(this.#frameStartsMessage && !this.#messageStarted)) return;
    const first = !this.#messageStarted;
    this.#messageStarted = true;
    this.#sink.data(this.#messageOpcode, piece, this.#mask, this.#offset, first, fin);
  }

  #endFrame(): void {
    this.#remaining = -1;
    if (this.#opcode < 8 && this.#fin) {
      this.#messageOpcode = 0;
      this.#messageStarted = false;
    }
  }

  #fail(message: string): never {
    this.#failed = new WsFrameError(message);
    throw this.#failed;
  }
}
