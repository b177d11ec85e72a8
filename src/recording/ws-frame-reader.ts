/**
 * A read-only RFC 6455 frame reader for taps (pure: bytes in, payload pieces out). It never modifies
 * its input — the relay writes the same chunks on unchanged, possibly later (corked) — so it does not
 * unmask: each piece comes with its frame's mask and its offset in the frame, and the consumer
 * unmasks a copy of only what it records ({@link unmaskedCopy}).
 *
 * A tap must see what the peer that reads the direction sees, so the reader follows that peer's
 * rules ({@link WsReadingRules}): server frames as a client reads them (RFC 6455, strictly, messages
 * across continuation frames), client frames as the kubelet's golang.org/x/net/websocket reads them
 * (every frame on its own, leniently). Past what its peer would stop reading at, it reads nothing.
 *
 * Why not `ws`'s Receiver or `translator/ws-fast-receiver.ts`: both unmask in place in the socket's
 * buffers (right for an endpoint, wrong for a tap whose bytes are still to be relayed), and `ws`
 * joins a frame that spans reads into a new buffer. Here a payload comes out as the slices of the
 * input chunks it lies in.
 */
import { isUtf8 } from 'node:buffer';
import { TextDecoder } from 'node:util';

/**
 * Whose reading a {@link WsFrameReader} follows.
 *
 * - `rfc6455-client`: a client reading server frames, as `ws`, gorilla/websocket and browsers do.
 *   A message runs across continuation frames (control frames may come between them). It fails
 *   ({@link WsFrameError}, with `ws`'s codes) on RSV bits (no extension is ever negotiated: the
 *   kubelet's x/net/websocket has none), a masked frame, a reserved opcode, a fragmented or
 *   oversized control frame, a continuation without a message or a new message inside one, a length
 *   past 2^53 − 1, text that is not UTF-8, and a close frame with a 1-byte payload, an invalid code
 *   or a reason that is not UTF-8. After a valid close frame it reads nothing.
 * - `x-net-websocket-server`: golang.org/x/net/websocket reading client frames (the kubelet's and
 *   kube-apiserver's wsstream, one `Message.Receive` per frame). Every frame is read on its own: FIN
 *   and RSV are ignored, a continuation or a reserved opcode is data, a ping is skipped whatever its
 *   length or FIN, and a 64-bit length with its top bit set is negative to Go, so the frame is empty.
 *   It never fails; it stops reading (as the kubelet's read loop ends) at a close frame, a pong
 *   (`ErrNotImplemented`), an unmasked frame, or a data frame over {@link X_NET_MAX_PAYLOAD_BYTES}.
 */
export type WsReadingRules = 'rfc6455-client' | 'x-net-websocket-server';

/** golang.org/x/net/websocket's `DefaultMaxPayloadBytes` (wsstream does not change it): a bigger frame ends its read loop. */
export const X_NET_MAX_PAYLOAD_BYTES = 32 << 20;

/** Where a {@link WsFrameReader} sends what it reads. */
export interface WsFrameSink {
  /**
   * A piece of a data payload. `piece` is a slice of an input chunk, still masked when `mask` is
   * given (`offset`: its position in its frame, for the mask phase). `rfc6455-client`: `opcode` is
   * the message's (1 text, 2 binary) and `first`/`fin` mark the message's first and last piece.
   * `x-net-websocket-server`: they are the frame's (each frame is a message of its own; `opcode` as
   * x/net reports it).
   */
  data(opcode: number, piece: Buffer, mask: Buffer | undefined, offset: number, first: boolean, fin: boolean): void;
  /** The reader stops here: a valid close frame (`rfc6455-client`), or anything x/net stops reading at. */
  close(): void;
}

/** Bytes of `piece` unmasked into a new buffer (the mask phase taken from `offset`). */
export function unmaskedCopy(piece: Buffer, mask: Buffer | undefined, offset: number): Buffer {
  const out = Buffer.from(piece);
  if (mask === undefined) return out;
  for (let i = 0; i < out.length; i++) out[i]! ^= mask[(offset + i) & 3]!;
  return out;
}

/** Stable codes of {@link WsFrameError} (the codes `ws`'s Receiver gives the same failures). */
export type WsFrameErrorCode =
  | 'WS_ERR_UNEXPECTED_RSV_1'
  | 'WS_ERR_UNEXPECTED_RSV_2_3'
  | 'WS_ERR_INVALID_OPCODE'
  | 'WS_ERR_EXPECTED_FIN'
  | 'WS_ERR_INVALID_CONTROL_PAYLOAD_LENGTH'
  | 'WS_ERR_UNEXPECTED_MASK'
  | 'WS_ERR_UNSUPPORTED_DATA_PAYLOAD_LENGTH'
  | 'WS_ERR_INVALID_UTF8'
  | 'WS_ERR_INVALID_CLOSE_CODE';

/** The reader could not parse the stream (its peer fails the connection there too). */
export class WsFrameError extends Error {
  override readonly name = 'WsFrameError';
  constructor(
    readonly code: WsFrameErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** A close code a peer may send (RFC 6455 §7.4, as `ws` checks it). */
function isValidCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999);
}

const EMPTY = Buffer.alloc(0);

/** Incremental frame reader for one direction. */
export class WsFrameReader {
  readonly #sink: WsFrameSink;
  readonly #strict: boolean;
  #head = Buffer.alloc(14);
  #headLen = 0;
  /** Payload bytes still to come in the current frame (−1: reading a header). */
  #remaining = -1;
  #offset = 0;
  #opcode = 0;
  #mask: Buffer | undefined;
  #fin = false;
  /** rfc6455-client: the opcode of the data message in progress (continuations follow it); 0 when none. */
  #messageOpcode = 0;
  #messageStarted = false;
  #frameStartsMessage = false;
  /** x/net: the opcode a continuation frame is reported with (its `hybiFrameHandler.payloadType`). */
  #lastDataOpcode = 0;
  /** rfc6455-client: the text message's UTF-8 check, across its pieces. */
  #utf8: TextDecoder | undefined;
  /** rfc6455-client: the close frame's payload (at most 125 bytes), checked at its end. */
  #closePayload: Buffer[] = [];
  #ended = false;
  #failed: WsFrameError | undefined;

  constructor(sink: WsFrameSink, rules: WsReadingRules) {
    this.#sink = sink;
    this.#strict = rules === 'rfc6455-client';
  }

  /** Input bytes still to come before the current frame ends: 0 at a boundary (or once it stopped reading), undefined mid-header. */
  get bytesToFrameEnd(): number | undefined {
    if (this.#ended) return 0;
    if (this.#remaining >= 0) return this.#remaining;
    return this.#headLen === 0 ? 0 : undefined;
  }

  /** True inside a fragmented data message (rfc6455-client: a non-final frame was read). */
  get midMessage(): boolean {
    return this.#messageOpcode !== 0 && !this.#ended;
  }

  /** Header bytes held for the frame being started. */
  get bufferedHeaderBytes(): number {
    return this.#headLen;
  }

  /** True once the reader stopped reading (see {@link WsFrameSink.close}); later input is ignored. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Feed bytes. Throws {@link WsFrameError} on a malformed stream (`rfc6455-client` only; and keeps throwing). */
  push(chunk: Buffer): void {
    if (this.#failed) throw this.#failed;
    let at = 0;
    while (at < chunk.length && !this.#ended) {
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
      // A client judges a frame by its first two bytes, before its length and mask arrive.
      if (this.#headLen === 2 && this.#strict) this.#checkStrict(this.#head[0]!, this.#head[1]!);
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
    const len7 = h[1]! & 0x7f;
    let length: number;
    let at = 2;
    if (len7 === 126) {
      length = h.readUInt16BE(2);
      at = 4;
    } else if (len7 === 127) {
      const big = h.readBigUInt64BE(2);
      at = 10;
      if (!this.#strict) {
        // Go accumulates the 8 bytes into an int64: with the top bit set it is negative, and a
        // LimitReader of a negative length reads nothing. Past 2^53 it is over the 32 MiB limit anyway.
        length = big >= 1n << 63n ? 0 : big > BigInt(X_NET_MAX_PAYLOAD_BYTES) ? X_NET_MAX_PAYLOAD_BYTES + 1 : Number(big);
      } else {
        if (big > BigInt(Number.MAX_SAFE_INTEGER)) this.#fail('WS_ERR_UNSUPPORTED_DATA_PAYLOAD_LENGTH', `frame length ${big} too large`);
        length = Number(big);
      }
    } else length = len7;
    this.#mask = (h[1]! & 0x80) !== 0 ? Buffer.from(h.subarray(at, at + 4)) : undefined;
    this.#headLen = 0;
    this.#opcode = h[0]! & 0x0f;
    this.#fin = (h[0]! & 0x80) !== 0;
    this.#offset = 0;
    this.#remaining = length;
    if (this.#strict) this.#startStrict();
    else this.#startXNet(length);
    if (!this.#ended && length === 0) this.#frameDone();
  }

  /** rfc6455-client: the checks `ws`'s Receiver (client side) makes on a frame's first two bytes. */
  #checkStrict(b0: number, b1: number): void {
    const opcode = b0 & 0x0f;
    const len7 = b1 & 0x7f;
    if ((b0 & 0x30) !== 0) this.#fail('WS_ERR_UNEXPECTED_RSV_2_3', 'RSV2 and RSV3 must be clear');
    if ((b0 & 0x40) !== 0) this.#fail('WS_ERR_UNEXPECTED_RSV_1', 'RSV1 must be clear');
    if (opcode >= 8 && opcode <= 10) {
      if ((b0 & 0x80) === 0) this.#fail('WS_ERR_EXPECTED_FIN', 'FIN must be set');
      if (len7 > 125 || (opcode === 8 && len7 === 1)) this.#fail('WS_ERR_INVALID_CONTROL_PAYLOAD_LENGTH', `invalid payload length ${len7}`);
    } else if (opcode === 0) {
      if (this.#messageOpcode === 0) this.#fail('WS_ERR_INVALID_OPCODE', 'invalid opcode 0');
    } else if (opcode === 1 || opcode === 2) {
      if (this.#messageOpcode !== 0) this.#fail('WS_ERR_INVALID_OPCODE', `invalid opcode ${opcode}`);
    } else this.#fail('WS_ERR_INVALID_OPCODE', `invalid opcode ${opcode}`);
    if ((b1 & 0x80) !== 0) this.#fail('WS_ERR_UNEXPECTED_MASK', 'MASK must be clear');
  }

  /** rfc6455-client: the frame (checked by {@link #checkStrict}) starts. */
  #startStrict(): void {
    const opcode = this.#opcode;
    if (opcode >= 8) this.#closePayload = [];
    else if (opcode === 0) this.#frameStartsMessage = false;
    else {
      this.#messageOpcode = opcode;
      this.#messageStarted = false;
      this.#frameStartsMessage = true;
      this.#utf8 = opcode === 1 ? new TextDecoder('utf-8', { fatal: true }) : undefined;
    }
  }

  /** x/net: what `hybiFrameHandler.HandleFrame` and `Codec.Receive` make of the frame's header. */
  #startXNet(length: number): void {
    const opcode = this.#opcode;
    // Unmasked (it answers close 1002), a close frame (io.EOF) or a pong (ErrNotImplemented): the read loop ends.
    if (!this.#mask || opcode === 8 || opcode === 10) return this.#end();
    if (opcode === 9) return; // a ping: read and dropped
    if (length > X_NET_MAX_PAYLOAD_BYTES) return this.#end(); // ErrFrameTooLarge
    if (opcode === 1 || opcode === 2) this.#lastDataOpcode = opcode;
    this.#messageStarted = false;
    this.#frameStartsMessage = true;
  }

  #payload(piece: Buffer): void {
    this.#remaining -= piece.length;
    const frameEnd = this.#remaining === 0;
    if (this.#isData()) this.#deliver(piece, frameEnd);
    else if (this.#strict && this.#opcode === 8) this.#closePayload.push(piece);
    this.#offset += piece.length;
    if (frameEnd) this.#endFrame();
  }

  /** An empty frame: deliver its (empty) message end when it ends a message. */
  #frameDone(): void {
    if (this.#isData()) this.#deliver(EMPTY, true);
    this.#endFrame();
  }

  #isData(): boolean {
    return this.#strict ? this.#opcode < 8 : this.#opcode !== 9;
  }

  #deliver(piece: Buffer, frameEnd: boolean): void {
    const fin = frameEnd && (this.#fin || !this.#strict);
    if (piece.length === 0 && !fin && !(this.#frameStartsMessage && !this.#messageStarted)) return;
    if (this.#utf8) this.#checkText(piece, fin);
    const first = !this.#messageStarted;
    this.#messageStarted = true;
    const opcode = this.#strict ? this.#messageOpcode : this.#opcode === 0 ? this.#lastDataOpcode : this.#opcode;
    this.#sink.data(opcode, piece, this.#mask, this.#offset, first, fin);
  }

  /** rfc6455-client: a text message must be UTF-8 (checked as it arrives; a sequence may span pieces). */
  #checkText(piece: Buffer, fin: boolean): void {
    try {
      this.#utf8!.decode(piece, { stream: !fin });
    } catch {
      this.#fail('WS_ERR_INVALID_UTF8', 'invalid UTF-8 sequence');
    }
  }

  #endFrame(): void {
    this.#remaining = -1;
    if (this.#strict && this.#opcode === 8) return this.#closeFrame();
    if (!this.#strict || (this.#opcode < 8 && this.#fin)) {
      this.#messageOpcode = 0;
      this.#messageStarted = false;
      this.#utf8 = undefined;
    }
  }

  /** rfc6455-client: a close frame's code and reason are checked, then the reader stops. */
  #closeFrame(): void {
    const p = Buffer.concat(this.#closePayload);
    this.#closePayload = [];
    if (p.length >= 2 && !isValidCloseCode(p.readUInt16BE(0))) this.#fail('WS_ERR_INVALID_CLOSE_CODE', `invalid status code ${p.readUInt16BE(0)}`);
    if (p.length > 2 && !isUtf8(p.subarray(2))) this.#fail('WS_ERR_INVALID_UTF8', 'invalid UTF-8 sequence');
    this.#end();
  }

  #end(): void {
    this.#ended = true;
    this.#remaining = -1;
    this.#sink.close();
  }

  #fail(code: WsFrameErrorCode, message: string): never {
    this.#failed = new WsFrameError(code, message);
    throw this.#failed;
  }
}
