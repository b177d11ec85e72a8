/**
 * The receiving half of the translated session's WebSocket without a copy per message: a frame
 * parser that sits in front of `ws`'s own Receiver on the client socket and takes the one shape of
 * frame a v5 client sends its data in (masked, binary, FIN, no RSV bits, within the payload limit),
 * unmasks it in place in the socket's read buffers and hands the message on as the pieces it lies in
 * (views of those reads; a message spanning reads is not joined). Everything else goes to `ws`
 * byte for byte: control frames (ping, pong, close) one complete frame at a time, and from the first
 * frame of any other kind (text, fragmented, reserved bits, unmasked, too large, after a close) on,
 * the rest of the connection, so `ws` answers those exactly as it would have alone.
 *
 * Why: `ws` joins a frame that spans socket reads into a new buffer (kubectl's 32 KiB stdin frames
 * straddle its 64 KiB reads about every other frame), which with the allocation's GC pressure and
 * the per-message Writable/`emit` work made translated stdin the costliest path per byte
 * (docs/benchmarks.md, "Translation CPU").
 */
import { createRequire } from 'node:module';

/** Native unmasking from `bufferutil` (what `ws` uses), or undefined when it cannot load. */
const nativeUnmask: ((buffer: Buffer, mask: Buffer) => void) | undefined = (() => {
  if (process.env.WS_NO_BUFFER_UTIL) return undefined;
  try {
    return (createRequire(import.meta.url)('bufferutil') as { unmask: (b: Buffer, m: Buffer) => void }).unmask;
  } catch {
    return undefined;
  }
})();

/** XOR `piece` in place with `mask` starting at mask byte `phase` (0–3), as RFC 6455 §5.3 unmasks. */
export function unmaskInPlace(piece: Buffer, mask: Buffer, phase: number): void {
  const m = phase === 0 ? mask : Buffer.from([mask[phase & 3]!, mask[(phase + 1) & 3]!, mask[(phase + 2) & 3]!, mask[(phase + 3) & 3]!]);
  if (nativeUnmask !== undefined && piece.length >= 32) return nativeUnmask(piece, m);
  for (let i = 0; i < piece.length; i++) piece[i]! ^= m[i & 3]!;
}

/** Where a {@link FastFrameReceiver} sends its output. */
export interface FastFrameSink {
  /** One complete binary message, unmasked: `parts` (non-empty pieces) joined is the payload. */
  message(parts: Buffer[], length: number): void;
  /** Bytes for `ws`'s own Receiver, in wire order (complete control frames, or everything from a fallback on). */
  passThrough(raw: Buffer): void;
  /**
   * Optional: one complete binary message of at most 125 bytes whose frame lay whole in one socket
   * read, unmasked in place: `chunk[start, start + length)` is the payload. No Buffer is made for it
   * (a flood of tiny frames costs no allocation per frame); the bytes are valid only during the call.
   * Without it such messages go to {@link message} like the others.
   */
  small?(chunk: Buffer, start: number, length: number): void;
}

const enum State {
  Head,
  Payload,
  Control,
  Fallback,
}

/**
 * The frame parser (pure: bytes in, messages and pass-through bytes out). Feed it every socket read
 * with {@link push}; it never holds more than one frame's pieces.
 */
export class FastFrameReceiver {
  #state = State.Head;
  /** Header bytes of the frame being started (copied: at most 14). */
  #head = Buffer.alloc(0);
  #mask = Buffer.alloc(4);
  /** Payload bytes still to come in the current frame. */
  #remaining = 0;
  /** Payload bytes of the current frame seen so far (the unmasking phase). */
  #offset = 0;
  #parts: Buffer[] = [];
  #length = 0;
  /** A control frame being collected whole: its header, then its payload pieces (masked). */
  #control: Buffer[] = [];
  #parsing = false;

  /**
   * @param maxPayload the largest message `ws` accepts (its `maxPayload`): larger frames go to `ws`,
   *   which refuses them with 1009.
   * @param sink where messages and pass-through bytes go.
   * @param masked true (a server reading its client) takes masked frames only; false (a client
   *   reading its server, the reverse translator's upstream) unmasked ones only. Frames of the other
   *   kind go to `ws`, which refuses them.
   */
  constructor(
    private readonly maxPayload: number,
    private readonly sink: FastFrameSink,
    private readonly masked = true,
  ) {}

  /** True once everything goes to `ws` (a frame of another kind, or a close frame, was seen). */
  get fallenBack(): boolean {
    return this.#state === State.Fallback;
  }

  /** True while a data frame is partly read (its pieces are held here, not yet delivered). */
  get midFrame(): boolean {
    return this.#state === State.Payload || this.#state === State.Control || this.#head.length > 0;
  }

  /** True while {@link push} runs (what the sink receives then is part of that read). */
  get parsing(): boolean {
    return this.#parsing;
  }

  /** Feed one socket read. */
  push(chunk: Buffer): void {
    this.#parsing = true;
    try {
      this.#push(chunk);
    } finally {
      this.#parsing = false;
    }
  }

  #push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      switch (this.#state) {
        case State.Fallback:
          this.sink.passThrough(at === 0 ? chunk : chunk.subarray(at));
          return;
        case State.Head:
          if (this.#head.length === 0 && this.sink.small !== undefined && this.masked) {
            at = this.#smallFrames(chunk, at);
            if (at >= chunk.length) break;
          }
          at = this.#readHead(chunk, at);
          break;
        case State.Payload: {
          const n = Math.min(this.#remaining, chunk.length - at);
          const piece = chunk.subarray(at, at + n);
          if (this.masked) unmaskInPlace(piece, this.#mask, this.#offset & 3);
          this.#parts.push(piece);
          this.#length += n;
          this.#offset += n;
          this.#remaining -= n;
          at += n;
          if (this.#remaining === 0) this.#deliver();
          break;
        }
        case State.Control: {
          const n = Math.min(this.#remaining, chunk.length - at);
          this.#control.push(chunk.subarray(at, at + n));
          this.#remaining -= n;
          at += n;
          if (this.#remaining === 0) this.#passControl();
          break;
        }
      }
    }
  }

  /**
   * The run of whole tiny data frames at `at` (FIN, binary, no RSV bits, masked, a 7-bit length
   * within the payload limit, header and payload inside `chunk`): each is unmasked in place and handed
   * to the sink's `small` without allocating anything. Returns where the run stopped: at the first
   * frame of any other shape or not complete in `chunk`, which the general path then reads.
   */
  #smallFrames(chunk: Buffer, at: number): number {
    const end = chunk.length;
    const limit = Math.min(125, this.maxPayload);
    while (end - at >= 6) {
      const b1 = chunk[at + 1]!;
      const length = b1 & 0x7f;
      if (chunk[at] !== 0x82 || (b1 & 0x80) === 0 || length > limit || at + 6 + length > end) break;
      const mask = at + 2;
      const start = at + 6;
      for (let i = 0; i < length; i++) chunk[start + i]! ^= chunk[mask + (i & 3)]!;
      at = start + length;
      this.sink.small!(chunk, start, length);
    }
    return at;
  }

  /** Collect header bytes from `chunk` at `at`; decide the frame's route once the header is whole. */
  #readHead(chunk: Buffer, at: number): number {
    const before = this.#head.length;
    const head = before === 0 ? chunk.subarray(at, at + 14) : Buffer.concat([this.#head, chunk.subarray(at, at + 14 - before)]);
    if (head.length < 2) {
      this.#head = Buffer.from(head);
      return chunk.length;
    }
    const b0 = head[0]!;
    const b1 = head[1]!;
    const len7 = b1 & 0x7f;
    const masked = (b1 & 0x80) !== 0;
    const headLen = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (masked ? 4 : 0);
    if (head.length < headLen) {
      // A header split across reads: keep its bytes (copied, the read may be reused by no one else,
      // but a view would pin the whole read).
      this.#head = Buffer.from(head);
      return chunk.length;
    }
    const consumed = headLen - before;
    const header = head.subarray(0, headLen);
    this.#head = Buffer.alloc(0);
    const fin = (b0 & 0x80) !== 0;
    const rsv = b0 & 0x70;
    const opcode = b0 & 0x0f;
    let length = len7;
    if (len7 === 126) length = header.readUInt16BE(2);
    else if (len7 === 127) {
      const high = header.readUInt32BE(2);
      length = high > 0x1fffff ? Number.MAX_SAFE_INTEGER : high * 0x100000000 + header.readUInt32BE(6);
    }
    if (masked !== this.masked || rsv !== 0) return this.#fallback(header, chunk, at + consumed);
    if (opcode >= 0x08) {
      // ping, pong, close: to ws whole; anything else (reserved opcodes, bad control frames) falls back.
      if (!fin || length > 125 || opcode > 0x0a) return this.#fallback(header, chunk, at + consumed);
      this.#control = [Buffer.from(header)];
      this.#remaining = length;
      this.#state = State.Control;
      if (length === 0) this.#passControl();
      return at + consumed;
    }
    if (opcode !== 0x02 || !fin || length > this.maxPayload) return this.#fallback(header, chunk, at + consumed);
    if (masked) header.copy(this.#mask, 0, headLen - 4, headLen);
    this.#remaining = length;
    this.#offset = 0;
    this.#parts = [];
    this.#length = 0;
    this.#state = State.Payload;
    if (length === 0) this.#deliver();
    return at + consumed;
  }

  /** From this frame on, everything goes to ws (starting with the header just read). */
  #fallback(header: Buffer, chunk: Buffer, rest: number): number {
    this.#state = State.Fallback;
    this.sink.passThrough(Buffer.from(header));
    if (rest < chunk.length) this.sink.passThrough(chunk.subarray(rest));
    return chunk.length;
  }

  #deliver(): void {
    const parts = this.#parts;
    const length = this.#length;
    this.#parts = [];
    this.#length = 0;
    this.#state = State.Head;
    this.sink.message(parts, length);
  }

  #passControl(): void {
    const frame = this.#control.length === 1 ? this.#control[0]! : Buffer.concat(this.#control);
    const isClose = (frame[0]! & 0x0f) === 0x08;
    this.#control = [];
    this.#state = isClose ? State.Fallback : State.Head;
    this.sink.passThrough(frame);
  }
}
