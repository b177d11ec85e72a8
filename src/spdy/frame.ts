/**
 * SPDY/3 frame codec: pure encode/decode over Buffer, no sockets, no zlib.
 *
 * Header blocks stay compressed here (`headerBlock`); `header-block.ts` owns zlib.
 */
import assert from 'node:assert/strict';
import { GoAwayStatus, RstStatus } from './codes.js';
import { SpdyProtocolError } from './errors.js';

/** The only protocol version on the wire (SPDY/3.1 still sends 3). */
export const SPDY_VERSION = 3;

/** Control frame type numbers. */
export const FrameType = {
  SYN_STREAM: 1,
  SYN_REPLY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  HEADERS: 8,
  WINDOW_UPDATE: 9,
} as const;

/** FLAG_FIN for DATA, SYN_STREAM, SYN_REPLY and HEADERS. */
export const FLAG_FIN = 0x01;
/** FLAG_UNIDIRECTIONAL for SYN_STREAM. */
export const FLAG_UNIDIRECTIONAL = 0x02;
/** FLAG_SETTINGS_CLEAR_SETTINGS for SETTINGS. */
export const FLAG_CLEAR_SETTINGS = 0x01;

/** Largest payload the 24-bit length field can express. */
export const MAX_FRAME_PAYLOAD = 0xffffff;
/** Default {@link FrameParserOptions.maxFrameSize}: 16 MiB (every legal frame). */
export const DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024;

const MAX_ID = 0x7fffffff;
const HEADER_BYTES = 8;

/** One SETTINGS entry. */
export interface SpdySetting {
  flags: number;
  id: number;
  value: number;
}

/** One SPDY/3 frame; `headerBlock` holds the still-compressed header block. */
export type SpdyFrame =
  | {
      type: 'data';
      streamId: number;
      fin: boolean;
      data: Buffer;
      /**
       * Only from a parser with {@link FrameParserOptions.streamData}: true on the second and later
       * pieces of one DATA frame (the first piece carries the frame's start; `fin` only the last).
       */
      continued?: boolean;
    }
  | {
      type: 'syn_stream';
      streamId: number;
      associatedStreamId: number;
      priority: number;
      fin: boolean;
      unidirectional: boolean;
      headerBlock: Buffer;
    }
  | { type: 'syn_reply'; streamId: number; fin: boolean; headerBlock: Buffer }
  | { type: 'rst_stream'; streamId: number; status: number }
  | { type: 'settings'; clearSettings: boolean; entries: SpdySetting[] }
  | { type: 'ping'; id: number }
  | { type: 'goaway'; lastGoodStreamId: number; status: number }
  | { type: 'headers'; streamId: number; fin: boolean; headerBlock: Buffer }
  | { type: 'window_update'; streamId: number; delta: number }
  | { type: 'unknown'; frameType: number; flags: number };

function controlHeader(type: number, flags: number, length: number): Buffer {
  assert.ok(length <= MAX_FRAME_PAYLOAD, `control frame payload ${length} exceeds 24 bits`);
  const b = Buffer.allocUnsafe(HEADER_BYTES);
  b.writeUInt16BE(0x8000 | SPDY_VERSION, 0);
  b.writeUInt16BE(type, 2);
  b.writeUInt32BE(((flags & 0xff) << 24) | length, 4);
  return b;
}

function checkId(id: number, what: string): void {
  assert.ok(Number.isInteger(id) && id >= 0 && id <= MAX_ID, `${what} ${id} is not a 31-bit id`);
}

/** The 8-byte header of a DATA frame carrying `length` payload bytes. */
export function encodeDataHeader(streamId: number, fin: boolean, length: number): Buffer {
  checkId(streamId, 'stream id');
  assert.ok(length <= MAX_FRAME_PAYLOAD, 'DATA payload exceeds 24 bits');
  const h = Buffer.allocUnsafe(HEADER_BYTES);
  h.writeUInt32BE(streamId, 0);
  h.writeUInt32BE(((fin ? FLAG_FIN : 0) << 24) | length, 4);
  return h;
}

/**
 * Encodes one frame. DATA returns `[header, payload]` so the payload is not copied; control frames
 * return a single buffer.
 */
export function encodeFrame(frame: SpdyFrame): Buffer[] {
  switch (frame.type) {
    case 'data': {
      const h = encodeDataHeader(frame.streamId, frame.fin, frame.data.length);
      return frame.data.length > 0 ? [h, frame.data] : [h];
    }
    case 'syn_stream': {
      checkId(frame.streamId, 'stream id');
      checkId(frame.associatedStreamId, 'associated stream id');
      const flags = (frame.fin ? FLAG_FIN : 0) | (frame.unidirectional ? FLAG_UNIDIRECTIONAL : 0);
      const b = Buffer.allocUnsafe(HEADER_BYTES + 10 + frame.headerBlock.length);
      controlHeader(FrameType.SYN_STREAM, flags, 10 + frame.headerBlock.length).copy(b, 0);
      b.writeUInt32BE(frame.streamId, 8);
      b.writeUInt32BE(frame.associatedStreamId, 12);
      b[16] = (frame.priority & 0x07) << 5;
      b[17] = 0; // slot
      frame.headerBlock.copy(b, 18);
      return [b];
    }
    case 'syn_reply':
    case 'headers': {
      checkId(frame.streamId, 'stream id');
      const type = frame.type === 'syn_reply' ? FrameType.SYN_REPLY : FrameType.HEADERS;
      const b = Buffer.allocUnsafe(HEADER_BYTES + 4 + frame.headerBlock.length);
      controlHeader(type, frame.fin ? FLAG_FIN : 0, 4 + frame.headerBlock.length).copy(b, 0);
      b.writeUInt32BE(frame.streamId, 8);
      frame.headerBlock.copy(b, 12);
      return [b];
    }
    case 'rst_stream':
    case 'goaway':
    case 'window_update': {
      const [type, first, second] =
        frame.type === 'rst_stream'
          ? [FrameType.RST_STREAM, frame.streamId, frame.status]
          : frame.type === 'goaway'
            ? [FrameType.GOAWAY, frame.lastGoodStreamId, frame.status]
            : [FrameType.WINDOW_UPDATE, frame.streamId, frame.delta];
      checkId(first, 'stream id');
      const b = Buffer.allocUnsafe(HEADER_BYTES + 8);
      controlHeader(type, 0, 8).copy(b, 0);
      b.writeUInt32BE(first, 8);
      b.writeUInt32BE(second >>> 0, 12);
      return [b];
    }
    case 'settings': {
      const len = 4 + 8 * frame.entries.length;
      const b = Buffer.allocUnsafe(HEADER_BYTES + len);
      controlHeader(FrameType.SETTINGS, frame.clearSettings ? FLAG_CLEAR_SETTINGS : 0, len).copy(b, 0);
      b.writeUInt32BE(frame.entries.length, 8);
      frame.entries.forEach((e, i) => {
        b.writeUInt32BE((((e.flags & 0xff) << 24) | (e.id & 0xffffff)) >>> 0, 12 + 8 * i);
        b.writeUInt32BE(e.value >>> 0, 16 + 8 * i);
      });
      return [b];
    }
    case 'ping': {
      const b = Buffer.allocUnsafe(HEADER_BYTES + 4);
      controlHeader(FrameType.PING, 0, 4).copy(b, 0);
      b.writeUInt32BE(frame.id >>> 0, 8);
      return [b];
    }
    case 'unknown':
      assert.fail('cannot encode a frame of unknown type');
  }
}

/** The DATA member of {@link SpdyFrame}. */
export type DataFrame = Extract<SpdyFrame, { type: 'data' }>;

/** Options of {@link FrameParser}. */
export interface FrameParserOptions {
  /** Largest accepted payload in bytes; default {@link DEFAULT_MAX_FRAME_SIZE}. */
  maxFrameSize?: number;
  /**
   * Deliver DATA payloads in pieces as the bytes arrive instead of assembling whole frames: a frame
   * that spans input chunks comes out as several `data` frames of the same stream (the later ones
   * marked `continued`, only the last one carrying `fin`), each a slice of an input chunk, so no
   * payload byte is ever copied. An empty DATA frame still comes out once.
   */
  streamData?: boolean;
  /**
   * Read control frames of any version, as moby/spdystream (the kubelet's SPDY) does: it never
   * checks the field. A session-recording tap reads so, to see every frame the kubelet acts on.
   */
  anyVersion?: boolean;
}

interface PendingHeader {
  control: boolean;
  /** Control: frame type. DATA: stream id. */
  typeOrStream: number;
  flags: number;
  length: number;
  /** DATA in streamData mode: payload bytes not yet delivered. */
  remaining: number;
  /** DATA in streamData mode: a piece of this frame was delivered already. */
  started: boolean;
}

function connError(code: 'SPDY_BAD_VERSION' | 'SPDY_BAD_FRAME' | 'SPDY_FRAME_TOO_LARGE', msg: string) {
  return new SpdyProtocolError(code, msg, GoAwayStatus.PROTOCOL_ERROR);
}

/**
 * Incremental frame parser. Accepts chunks split at any byte. Payloads are sliced from the input
 * chunks without copying when they lie in one chunk, and copied once otherwise.
 *
 * Errors are thrown as {@link SpdyProtocolError}. When frames were parsed before the error in the
 * same `push`, they are returned and the error is thrown by the next `push` (see
 * {@link hasPendingError}), so frames are never lost and stay in order. After a stream-scoped error
 * (oversized DATA) the offending payload is skipped and parsing continues; after a
 * connection-scoped error the parser keeps throwing it.
 */
export class FrameParser {
  private readonly maxFrameSize: number;
  private readonly streamData: boolean;
  private readonly anyVersion: boolean;
  private chunks: Buffer[] = [];
  private offset = 0; // into chunks[0]
  private available = 0;
  private header: PendingHeader | undefined;
  private skip = 0;
  private deferred: SpdyProtocolError | undefined;
  private fatal: SpdyProtocolError | undefined;

  /** @param options parser limits. */
  constructor(options: FrameParserOptions = {}) {
    this.maxFrameSize = Math.min(options.maxFrameSize ?? DEFAULT_MAX_FRAME_SIZE, MAX_FRAME_PAYLOAD);
    this.streamData = options.streamData ?? false;
    this.anyVersion = options.anyVersion ?? false;
  }

  /** True when a deferred error will be thrown by the next `push` (call `push(Buffer.alloc(0))`). */
  get hasPendingError(): boolean {
    return this.deferred !== undefined;
  }

  /** Bytes held for an incomplete frame. */
  get bufferedBytes(): number {
    return this.available;
  }

  /** True while a frame is incomplete (bytes held, or a DATA frame partly delivered in pieces). */
  get midFrame(): boolean {
    return this.available > 0 || this.header !== undefined;
  }

  /**
   * Input bytes still to come before the frame being read ends: 0 at a frame boundary, undefined
   * while a frame's 8-byte header is incomplete (its length is not known yet; {@link bufferedBytes}
   * of it are held). A relay uses it to stop at a frame boundary (session recording's enforce end).
   */
  get bytesToFrameEnd(): number | undefined {
    if (this.skip > 0) return this.skip;
    const h = this.header;
    if (h === undefined) return this.available === 0 ? 0 : undefined;
    return (this.streamData && !h.control ? h.remaining : h.length) - this.available;
  }

  /** Feeds bytes; returns the frames completed by them, in wire order. */
  push(chunk: Buffer): SpdyFrame[] {
    if (this.deferred) {
      const e = this.deferred;
      this.deferred = undefined;
      // Keep the new bytes (unless the parser is dead): the next push parses them.
      if (!this.fatal && chunk.length > 0) this.append(chunk);
      throw e;
    }
    if (this.fatal) throw this.fatal;
    if (chunk.length > 0) this.append(chunk);
    const out: SpdyFrame[] = [];
    try {
      for (;;) {
        const frame = this.next();
        if (frame === undefined) break;
        out.push(frame);
      }
    } catch (e) {
      assert.ok(e instanceof SpdyProtocolError);
      if (!e.streamScoped) this.fatal = e;
      if (out.length === 0) throw e;
      this.deferred = e;
    }
    return out;
  }

  private append(chunk: Buffer): void {
    if (this.skip > 0) {
      const n = Math.min(this.skip, chunk.length);
      this.skip -= n;
      if (n === chunk.length) return;
      chunk = chunk.subarray(n);
    }
    this.chunks.push(chunk);
    this.available += chunk.length;
  }

  /** Removes and returns n buffered bytes (n <= available); copies only across chunk borders. */
  private take(n: number): Buffer {
    assert.ok(n <= this.available);
    this.available -= n;
    const first = this.chunks[0];
    if (first !== undefined && first.length - this.offset >= n) {
      const out = first.subarray(this.offset, this.offset + n);
      this.offset += n;
      if (this.offset === first.length) {
        this.chunks.shift();
        this.offset = 0;
      }
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const c = this.chunks[0];
      assert.ok(c !== undefined);
      const m = Math.min(c.length - this.offset, n - filled);
      c.copy(out, filled, this.offset, this.offset + m);
      filled += m;
      this.offset += m;
      if (this.offset === c.length) {
        this.chunks.shift();
        this.offset = 0;
      }
    }
    return out;
  }

  /** Drops n bytes: what is buffered now, the rest from future input. */
  private discard(n: number): void {
    const now = Math.min(n, this.available);
    if (now > 0) this.take(now);
    this.skip = n - now;
  }

  private next(): SpdyFrame | undefined {
    if (this.skip > 0) return undefined;
    if (!this.header) {
      if (this.available < HEADER_BYTES) return undefined;
      const h = this.take(HEADER_BYTES);
      const word = h.readUInt32BE(0);
      const control = (word & 0x80000000) !== 0;
      const flags = h[4]!;
      const length = h.readUInt32BE(4) & 0xffffff;
      if (control) {
        const version = (word >>> 16) & 0x7fff;
        if (version !== SPDY_VERSION && !this.anyVersion) {
          throw connError('SPDY_BAD_VERSION', `unsupported SPDY version ${version}`);
        }
        const type = word & 0xffff;
        if (length > this.maxFrameSize) {
          throw connError('SPDY_FRAME_TOO_LARGE', `control frame type ${type} of ${length} bytes`);
        }
        if (!isKnownType(type)) {
          // SPDY/3 §2.2.1: unrecognised control frames must be ignored.
          this.discard(length);
          return { type: 'unknown', frameType: type, flags };
        }
        this.header = { control, typeOrStream: type, flags, length, remaining: length, started: false };
      } else {
        const streamId = word & MAX_ID;
        if (streamId === 0) throw connError('SPDY_BAD_FRAME', 'DATA frame on stream 0');
        if (length > this.maxFrameSize) {
          this.discard(length);
          throw new SpdyProtocolError(
            'SPDY_FRAME_TOO_LARGE',
            `DATA frame of ${length} bytes on stream ${streamId}`,
            RstStatus.FRAME_TOO_LARGE,
            streamId,
          );
        }
        this.header = { control, typeOrStream: streamId, flags, length, remaining: length, started: false };
      }
    }
    const header = this.header;
    if (this.streamData && !header.control) return this.nextDataPiece(header);
    if (this.available < header.length) return undefined;
    this.header = undefined;
    const payload = this.take(header.length);
    if (!header.control) {
      return { type: 'data', streamId: header.typeOrStream, fin: (header.flags & FLAG_FIN) !== 0, data: payload };
    }
    return decodeControl(header.typeOrStream, header.flags, payload);
  }

  /** streamData mode: the next piece of the current DATA frame, a slice of the first input chunk. */
  private nextDataPiece(header: PendingHeader): SpdyFrame | undefined {
    let data: Buffer;
    if (header.remaining === 0) {
      if (header.started) return undefined; // unreachable: a finished frame clears the header
      data = EMPTY;
    } else {
      const first = this.chunks[0];
      if (first === undefined) return undefined;
      const n = Math.min(header.remaining, first.length - this.offset);
      data = this.take(n);
      header.remaining -= n;
    }
    const last = header.remaining === 0;
    const piece: DataFrame = {
      type: 'data',
      streamId: header.typeOrStream,
      fin: last && (header.flags & FLAG_FIN) !== 0,
      data,
    };
    if (header.started) piece.continued = true;
    header.started = true;
    if (last) this.header = undefined;
    return piece;
  }
}

const EMPTY = Buffer.alloc(0);

function isKnownType(type: number): boolean {
  return type >= 1 && type <= 9 && type !== 5;
}

function streamIdAt(p: Buffer, at: number, name: string, allowZero = false): number {
  const id = p.readUInt32BE(at) & MAX_ID;
  if (id === 0 && !allowZero) throw connError('SPDY_BAD_FRAME', `${name} with stream id 0`);
  return id;
}

function decodeControl(type: number, flags: number, p: Buffer): SpdyFrame {
  const fin = (flags & FLAG_FIN) !== 0;
  const need = (name: string, ok: boolean): void => {
    if (!ok) throw connError('SPDY_BAD_FRAME', `${name} with invalid length ${p.length}`);
  };
  switch (type) {
    case FrameType.SYN_STREAM:
      need('SYN_STREAM', p.length >= 10);
      return {
        type: 'syn_stream',
        streamId: streamIdAt(p, 0, 'SYN_STREAM'),
        associatedStreamId: p.readUInt32BE(4) & MAX_ID,
        priority: p[8]! >>> 5,
        fin,
        unidirectional: (flags & FLAG_UNIDIRECTIONAL) !== 0,
        headerBlock: p.subarray(10),
      };
    case FrameType.SYN_REPLY:
    case FrameType.HEADERS: {
      const name = type === FrameType.SYN_REPLY ? 'SYN_REPLY' : 'HEADERS';
      need(name, p.length >= 4);
      const streamId = streamIdAt(p, 0, name);
      const headerBlock = p.subarray(4);
      return type === FrameType.SYN_REPLY
        ? { type: 'syn_reply', streamId, fin, headerBlock }
        : { type: 'headers', streamId, fin, headerBlock };
    }
    case FrameType.RST_STREAM:
      need('RST_STREAM', p.length === 8);
      return { type: 'rst_stream', streamId: streamIdAt(p, 0, 'RST_STREAM'), status: p.readUInt32BE(4) };
    case FrameType.SETTINGS: {
      need('SETTINGS', p.length >= 4);
      const count = p.readUInt32BE(0);
      need('SETTINGS', p.length === 4 + 8 * count);
      const entries: SpdySetting[] = [];
      for (let i = 0; i < count; i++) {
        const w = p.readUInt32BE(4 + 8 * i);
        entries.push({ flags: w >>> 24, id: w & 0xffffff, value: p.readUInt32BE(8 + 8 * i) });
      }
      return { type: 'settings', clearSettings: (flags & FLAG_CLEAR_SETTINGS) !== 0, entries };
    }
    case FrameType.PING:
      need('PING', p.length === 4);
      return { type: 'ping', id: p.readUInt32BE(0) };
    case FrameType.GOAWAY:
      need('GOAWAY', p.length === 8);
      return { type: 'goaway', lastGoodStreamId: p.readUInt32BE(0) & MAX_ID, status: p.readUInt32BE(4) };
    case FrameType.WINDOW_UPDATE:
      need('WINDOW_UPDATE', p.length === 8);
      return {
        type: 'window_update',
        streamId: streamIdAt(p, 0, 'WINDOW_UPDATE', true),
        delta: p.readUInt32BE(4) & MAX_ID,
      };
    default:
      return assert.fail(`unreachable control frame type ${type}`);
  }
}
