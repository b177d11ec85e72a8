/**
 * The SPDY half of the malformed-input catalogue, in two directions:
 *
 * - `S..` cases: a raw SPDY/3.1 client on the passthrough (proxy → dev cluster kubelet). After the
 *   101 the bytes are written; the answer is the kubelet-side frames (RST_STREAM / GOAWAY), then a
 *   PING proves the connection `alive` (or it is `closed`). With `serve`, a complete exec session
 *   (error, stdin, stdout, stderr streams; `cat` echo; v4 Success) then runs on the SAME connection.
 * - `U..` cases: a scripted malicious upstream on the translation side (WebSocket v5 client → proxy
 *   → fake kubelet). The answer is what the WebSocket client gets (`served`, or the channel-3 Status
 *   and close code) and what the proxy sent the upstream in reply (non-CANCEL RST_STREAM, non-OK GOAWAY).
 *
 * Frames are written as raw bytes; helpers below build the malformed ones.
 */
import zlib from 'node:zlib';
import { encodeHeaderPairs, SPDY3_DICTIONARY_ID, type SpdyFrame } from '../../src/spdy/index.js';
import { hex, spdyWire, type CatalogueRow } from './malformed-fixture.js';

/** Builds header blocks for one direction of one connection (one zlib stream, dictionary header first). */
export class BlockWriter {
  #started = false;
  /** A compressed block holding `raw` name/value bytes (may be malformed). */
  raw(pairs: Buffer): Buffer {
    const body = zlib.deflateRawSync(pairs, { finishFlush: zlib.constants.Z_SYNC_FLUSH });
    if (this.#started) return body;
    this.#started = true;
    return Buffer.concat([zlibDictHeader(), body]);
  }
  /** A compressed block of well-formed headers. */
  headers(h: Record<string, string>): Buffer {
    return this.raw(encodeHeaderPairs(h));
  }
}

function zlibDictHeader(): Buffer {
  const cmf = 0x78;
  let flg = 0xa0;
  flg += 31 - ((cmf * 256 + flg) % 31);
  const b = Buffer.alloc(6);
  b[0] = cmf;
  b[1] = flg;
  b.writeUInt32BE(SPDY3_DICTIONARY_ID, 2);
  return b;
}

/** Uncompressed name/value bytes from `[name, value]` pairs, no checks (so they can be bad). */
export function pairBytes(pairs: Array<[string, string]>, countOverride?: number): Buffer {
  const parts: Buffer[] = [];
  const u32 = (n: number): Buffer => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n >>> 0, 0);
    return b;
  };
  parts.push(u32(countOverride ?? pairs.length));
  for (const [n, v] of pairs) parts.push(u32(Buffer.byteLength(n)), Buffer.from(n), u32(Buffer.byteLength(v)), Buffer.from(v));
  return Buffer.concat(parts);
}

/** A raw control frame: any version, type, flags and payload (length from the payload unless given). */
export function control(type: number, payload: Buffer, o: { version?: number; flags?: number; length?: number } = {}): Buffer {
  const h = Buffer.alloc(8);
  h.writeUInt16BE(0x8000 | (o.version ?? 3), 0);
  h.writeUInt16BE(type, 2);
  h.writeUInt32BE(((o.flags ?? 0) << 24) | (o.length ?? payload.length), 4);
  return Buffer.concat([h, payload]);
}

/** A raw DATA frame. */
export function data(streamId: number, payload: Buffer | string, fin = false): Buffer {
  return spdyWire({ type: 'data', streamId, fin, data: Buffer.from(payload) });
}

const u32s = (...ns: number[]): Buffer => Buffer.concat(ns.map((n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n >>> 0, 0); return b; }));

/** A SYN_STREAM frame with a given (possibly malformed) block. */
export function synWith(streamId: number, block: Buffer, flags = 0): Buffer {
  return control(1, Buffer.concat([u32s(streamId, 0), Buffer.from([0, 0]), block]), { flags });
}
/** A SYN_REPLY frame with a given block. */
export function replyWith(streamId: number, block: Buffer, flags = 0): Buffer {
  return control(2, Buffer.concat([u32s(streamId), block]), { flags });
}
/** A HEADERS frame with a given block. */
export function headersWith(streamId: number, block: Buffer): Buffer {
  return control(8, Buffer.concat([u32s(streamId), block]));
}
export const rst = (streamId: number, status: number): Buffer => spdyWire({ type: 'rst_stream', streamId, status });
export const ping = (id: number): Buffer => spdyWire({ type: 'ping', id });
export const goaway = (last: number, status: number): Buffer => spdyWire({ type: 'goaway', lastGoodStreamId: last, status });
export const frames = (...fs: SpdyFrame[]): Buffer => spdyWire(...fs);

/** A block that inflates to `n` bytes of zeros (a zip bomb in a header block). */
export function bombBlock(w: BlockWriter, n: number): Buffer {
  return w.raw(Buffer.alloc(n));
}

/** Context given to the `send` of a client-side case. */
export interface ClientSend {
  /** Header blocks of this connection's client→server direction. */
  w: BlockWriter;
}

/** One client-side (passthrough) case. */
export interface SpdyClientCase extends CatalogueRow {
  send: (ctx: ClientSend) => Buffer | Buffer[];
  /** Written in the same TCP write as the upgrade request. */
  early?: boolean;
  /** End the client's TCP side (FIN) after sending; no PING probe. */
  fin?: boolean;
  /** Run a complete exec session on the same connection afterwards, from this stream id. */
  serve?: number;
}

/** Context of a scripted upstream (translation side). */
export interface UpstreamCtx {
  /** Header blocks of the upstream→proxy direction. */
  w: BlockWriter;
}

/** One upstream-side (translation) case. */
export interface SpdyUpstreamCase extends CatalogueRow {
  /** Bytes the fake kubelet writes right after its 101, before replying to any stream. */
  before?: (ctx: UpstreamCtx) => Buffer;
  /** Bytes it writes once all four streams are replied (error 1, stdin 3, stdout 5, stderr 7). */
  after?: (ctx: UpstreamCtx) => Buffer;
  /** Bytes it writes after stdin's FIN, before its own FINs and the Status (default: nothing). */
  atEnd?: (ctx: UpstreamCtx) => Buffer;
  /** What goes on the error stream (default `{"metadata":{},"status":"Success"}`). */
  status?: Buffer;
  /** The raw 101 head (default: SPDY/3.1, v4). */
  head101?: string;
  /** Close the TCP connection right after `before`. */
  hangUp?: boolean;
}

const SERVED_ALIVE = 'alive, served';
const GOAWAY_PROTOCOL = 'GOAWAY(0, 1), closed';
const bogus = (w: BlockWriter): Buffer => w.headers({ streamtype: 'bogus' });

export const SPDY_CLIENT_CASES: SpdyClientCase[] = [
  { id: 'S01', title: 'control frame with version 2', send: () => hex('8002 0006 00 000004 00000001'), expected: GOAWAY_PROTOCOL, basis: 'SPDY/3 §2.2: unsupported version; spdystream closes the connection' },
  { id: 'S02', title: 'SYN_STREAM with version 1', send: () => control(1, Buffer.alloc(10), { version: 1 }), expected: GOAWAY_PROTOCOL, basis: 'same' },
  { id: 'S03', title: 'truncated frame, then FIN', send: () => hex('8003 0006 00 000004 0000'), fin: true, expected: 'closed', basis: 'nothing to answer; the connection ends, no socket left' },
  { id: 'S04', title: 'truncated DATA header (3 bytes), then FIN', send: () => hex('000001'), fin: true, expected: 'closed', basis: 'same' },
  { id: 'S05', title: 'header block that fails to inflate', send: () => synWith(1, hex('78f9e3c6a7c2 ffffffff00')), expected: GOAWAY_PROTOCOL, basis: 'SPDY/3 §2.6.10: the shared zlib context is lost: connection error' },
  { id: 'S06', title: 'header block with the wrong dictionary id', send: () => synWith(1, hex('78bb 12345678 0000ffff')), expected: GOAWAY_PROTOCOL, basis: 'same' },
  { id: 'S07', title: 'header block inflating to 2 MiB (zip bomb)', send: ({ w }) => synWith(1, bombBlock(w, 2 * 1024 * 1024)), expected: GOAWAY_PROTOCOL, basis: 'bounded decompression (1 MiB)' },
  { id: 'S08', title: 'pair count larger than the block', send: ({ w }) => synWith(1, w.raw(pairBytes([['streamtype', 'error']], 1000))), serve: 3, expected: `RST_STREAM(1, 1), ${SERVED_ALIVE}`, basis: 'stream error PROTOCOL_ERROR; the connection carries on' },
  { id: 'S09', title: 'upper-case header name', send: ({ w }) => synWith(1, w.raw(pairBytes([['StreamType', 'error']]))), serve: 3, expected: `RST_STREAM(1, 1), ${SERVED_ALIVE}`, basis: 'SPDY/3 §2.6.10: names are lower case' },
  { id: 'S10', title: 'duplicate header name', send: ({ w }) => synWith(1, w.raw(pairBytes([['streamtype', 'a'], ['streamtype', 'b']]))), serve: 3, expected: `RST_STREAM(1, 1), ${SERVED_ALIVE}`, basis: 'SPDY/3 §2.6.10: duplicate names are a PROTOCOL_ERROR' },
  { id: 'S11', title: 'empty header name', send: ({ w }) => synWith(1, w.raw(pairBytes([['', 'x']]))), serve: 3, expected: `RST_STREAM(1, 1), ${SERVED_ALIVE}`, basis: 'SPDY/3 §2.6.10: zero-length names are a PROTOCOL_ERROR' },
  { id: 'S12', title: 'trailing bytes after the pairs', send: ({ w }) => synWith(1, w.raw(Buffer.concat([pairBytes([['streamtype', 'bogus']]), Buffer.from('junk')]))), serve: 3, expected: `RST_STREAM(1, 1), ${SERVED_ALIVE}`, basis: 'malformed block: stream error' },
  { id: 'S13', title: 'even (server-parity) stream id from the client', send: ({ w }) => synWith(2, bogus(w)), serve: 1, expected: `RST_STREAM(2, 1), ${SERVED_ALIVE}`, basis: 'SPDY/3 §2.3.2: client ids are odd' },
  { id: 'S14', title: 'duplicate stream id', send: ({ w }) => [synWith(1, bogus(w)), synWith(1, bogus(w))], serve: 3, expected: `SYN_REPLY(1), RST_STREAM(1, 1), ${SERVED_ALIVE}`, basis: 'SPDY/3 §2.3.2: ids must increase' },
  { id: 'S15', title: 'decreasing stream id (5, then 3)', send: ({ w }) => [synWith(5, bogus(w)), synWith(3, bogus(w))], serve: 7, expected: `SYN_REPLY(5), RST_STREAM(3, 1), ${SERVED_ALIVE}`, basis: 'same' },
  { id: 'S16', title: 'SYN_STREAM with stream id 0', send: ({ w }) => synWith(0, bogus(w)), expected: GOAWAY_PROTOCOL, basis: 'stream 0 is invalid: connection error' },
  { id: 'S17', title: 'DATA on an unknown stream', send: () => data(99, 'who?'), serve: 1, expected: `RST_STREAM(99, 2), ${SERVED_ALIVE}`, basis: 'SPDY/3 §2.4.2: INVALID_STREAM' },
  { id: 'S18', title: 'DATA on stream 0', send: () => data(0, 'x'), expected: GOAWAY_PROTOCOL, basis: 'connection error' },
  { id: 'S19', title: 'DATA on a stream after its FIN', send: ({ w }) => [synWith(1, bogus(w), 1), data(1, 'late')], serve: 3, expected: `SYN_REPLY(1), RST_STREAM(1, 9), ${SERVED_ALIVE}`, basis: 'SPDY/3 §2.4.2: STREAM_ALREADY_CLOSED' },
  { id: 'S20', title: 'DATA on a stream the client reset', send: ({ w }) => [synWith(1, bogus(w)), rst(1, 5), data(1, 'late')], serve: 3, expected: `SYN_REPLY(1), ${SERVED_ALIVE}`, basis: 'stale frames of a reset stream are dropped (spdystream drops DATA for unknown streams)' },
  { id: 'S21', title: 'RST storm: 10,000 RST_STREAM on unknown streams', send: () => Buffer.concat(Array.from({ length: 10000 }, (_, i) => rst(2 * i + 1001, 1))), serve: 1, expected: SERVED_ALIVE, basis: 'a reset of nothing is ignored' },
  { id: 'S22', title: 'RST_STREAM on stream 0', send: () => control(3, u32s(0, 1)), expected: GOAWAY_PROTOCOL, basis: 'connection error' },
  { id: 'S23', title: 'RST_STREAM with length 4', send: () => control(3, u32s(1)), expected: GOAWAY_PROTOCOL, basis: 'bad control frame length' },
  { id: 'S24', title: 'PING with length 5', send: () => control(6, Buffer.alloc(5)), expected: GOAWAY_PROTOCOL, basis: 'same' },
  { id: 'S25', title: 'GOAWAY mid-session from the client', send: () => goaway(0, 0), serve: 1, expected: SERVED_ALIVE, basis: 'the client may still finish its streams' },
  { id: 'S26', title: 'GOAWAY, then FIN', send: () => goaway(0, 1), fin: true, expected: 'closed', basis: 'the connection ends; nothing left open' },
  { id: 'S27', title: 'SETTINGS with 100 garbage entries', send: () => control(4, Buffer.concat([u32s(100), ...Array.from({ length: 100 }, (_, i) => u32s(0x01000000 | i, 0xffffffff))])), serve: 1, expected: SERVED_ALIVE, basis: 'spdystream ignores SETTINGS' },
  { id: 'S28', title: 'SETTINGS whose count does not match its length', send: () => control(4, u32s(5, 1, 1)), expected: GOAWAY_PROTOCOL, basis: 'bad control frame length' },
  { id: 'S29', title: 'WINDOW_UPDATE storm (1,000)', send: () => Buffer.concat(Array.from({ length: 1000 }, () => control(9, u32s(1, 0x7fffffff)))), serve: 3, expected: SERVED_ALIVE, basis: 'spdystream has no flow control' },
  { id: 'S30', title: 'WINDOW_UPDATE with length 4', send: () => control(9, u32s(1)), expected: GOAWAY_PROTOCOL, basis: 'bad control frame length' },
  { id: 'S31', title: 'unknown control frame type 0x0f', send: () => control(0x0f, Buffer.from('whatever')), serve: 1, expected: SERVED_ALIVE, basis: 'SPDY/3 §2.2.1: ignored' },
  { id: 'S32', title: 'HEADERS on an unknown stream', send: ({ w }) => headersWith(41, w.headers({ x: 'y' })), serve: 1, expected: `RST_STREAM(41, 2), ${SERVED_ALIVE}`, basis: 'INVALID_STREAM' },
  { id: 'S33', title: 'SYN_REPLY for a stream nobody opened', send: ({ w }) => replyWith(43, w.headers({})), serve: 1, expected: `RST_STREAM(43, 2), ${SERVED_ALIVE}`, basis: 'INVALID_STREAM' },
  { id: 'S34', title: 'SYN_REPLY on the client\'s own stream', send: ({ w }) => [synWith(1, bogus(w)), replyWith(1, w.headers({}))], serve: 3, expected: `SYN_REPLY(1), RST_STREAM(1, 8), ${SERVED_ALIVE}`, basis: 'STREAM_IN_USE' },
  { id: 'S35', title: 'SYN_STREAM with FIN and UNIDIRECTIONAL', send: ({ w }) => synWith(1, bogus(w), 0x03), serve: 3, expected: `SYN_REPLY(1), ${SERVED_ALIVE}`, basis: 'flags accepted; the stream is just half-closed' },
  { id: 'S36', title: 'bad-version frame pipelined with the upgrade request', early: true, send: () => hex('8002 0006 00 000004 00000001'), expected: GOAWAY_PROTOCOL, basis: 'bytes after the head are relayed after the 101, in order' },
  { id: 'S37', title: 'PING pipelined with the upgrade request', early: true, send: () => ping(77), serve: 1, expected: `PING(77), ${SERVED_ALIVE}`, basis: 'relayed after the 101 and answered' },
  { id: 'S38', title: 'SYN_STREAM with an unknown streamtype', send: ({ w }) => synWith(1, w.headers({ streamtype: 'bogus' })), serve: 3, expected: `SYN_REPLY(1), ${SERVED_ALIVE}`, basis: 'kubelet ignores unknown stream types' },
  { id: 'S39', title: 'SYN_STREAM without streamtype', send: ({ w }) => synWith(1, w.headers({ other: 'x' })), serve: 3, expected: `SYN_REPLY(1), ${SERVED_ALIVE}`, basis: 'same' },
  { id: 'S40', title: 'PING flood: 10,000 pings in one write', send: () => Buffer.concat(Array.from({ length: 10000 }, (_, i) => ping(2 * i + 1))), serve: 1, expected: 'PING ×10000, alive, served', basis: 'every ping echoed (spdystream)' },
  { id: 'S41', title: '1,000 SYN_STREAMs with unknown types', send: ({ w }) => Array.from({ length: 1000 }, (_, i) => synWith(2 * i + 1, bogus(w))), serve: 2001, expected: 'SYN_REPLY ×1000, alive, served', basis: 'each accepted and ignored' },
  { id: 'S42', title: 'DATA frame header announcing 16 MiB − 1, never sent, then FIN', send: () => hex('00000001 00ffffff'), fin: true, expected: 'closed', basis: 'no data is buffered for a frame that never comes' },
  { id: 'S43', title: 'header block truncated inside a pair', send: ({ w }) => synWith(1, w.raw(pairBytes([['streamtype', 'error']]).subarray(0, 12))), serve: 3, expected: `RST_STREAM(1, 1), ${SERVED_ALIVE}`, basis: 'malformed block: stream error' },
  { id: 'S44', title: 'SYN_STREAM shorter than its fixed fields', send: () => control(1, Buffer.alloc(6)), expected: GOAWAY_PROTOCOL, basis: 'bad control frame length' },
];

const v4Success = Buffer.from('{"metadata":{},"status":"Success"}');

export const SPDY_UPSTREAM_CASES: SpdyUpstreamCase[] = [
  { id: 'U01', title: 'bad version right after the 101', before: () => hex('8002 0006 00 000004 00000001'), expected: "channel 3: 500 InternalError \"Internal error occurred: unsupported SPDY version 2\", close 1000, upstream got GOAWAY(0, 1)", basis: 'translator: GOAWAY to the upstream, InternalError on channel 3' },
  { id: 'U02', title: 'bad version mid-session', after: () => hex('8002 0006 00 000004 00000001'), expected: "channel 3: 500 InternalError \"Internal error occurred: error reading from error stream: the upstream connection was closed\", close 1000, upstream got GOAWAY(0, 1)", basis: 'same' },
  { id: 'U03', title: 'truncated frame, then the upstream hangs up', before: () => hex('8003 0002 00 000010 0000'), hangUp: true, expected: "channel 3: 500 InternalError \"Internal error occurred: SPDY connection closed by peer\", close 1000", basis: 'InternalError on channel 3' },
  { id: 'U04', title: 'SYN_REPLY whose block fails to inflate', before: () => replyWith(1, hex('78f9e3c6a7c2 ffffffff00')), expected: "channel 3: 500 InternalError \"Internal error occurred: header block failed to inflate: invalid block type\", close 1000, upstream got GOAWAY(0, 1)", basis: 'GOAWAY(PROTOCOL_ERROR), InternalError' },
  { id: 'U05', title: 'SYN_REPLY inflating to 2 MiB (zip bomb)', before: ({ w }) => replyWith(1, bombBlock(w, 2 * 1024 * 1024)), expected: "channel 3: 500 InternalError \"Internal error occurred: header block inflates to 2097152 bytes\", close 1000, upstream got GOAWAY(0, 1)", basis: 'bounded decompression' },
  { id: 'U06', title: 'SYN_REPLY with an upper-case header name', before: ({ w }) => replyWith(1, w.raw(pairBytes([['X-Bad', '1']]))), expected: "channel 3: 500 InternalError \"Internal error occurred: SPDY stream 1 closed before SYN_REPLY\", close 1000, upstream got RST_STREAM(1, 1)", basis: 'stream error on the error stream: the session cannot go on' },
  { id: 'U07', title: 'SYN_REPLY for a stream never opened', after: ({ w }) => replyWith(99, w.headers({})), expected: "served, upstream got RST_STREAM(99, 2)", basis: 'RST(INVALID_STREAM); the session carries on' },
  { id: 'U08', title: 'duplicate SYN_REPLY on stdout', after: ({ w }) => replyWith(5, w.headers({})), expected: 'channel 3: Success, stdout incomplete, close 1000, upstream got RST_STREAM(5, 8)', basis: 'STREAM_IN_USE resets stdout; like client-go (which only logs a failed stdout copy), the upstream\'s Success is still reported' },
  { id: 'U09', title: 'SYN_STREAM with an odd (client-parity) id', after: ({ w }) => synWith(9, w.headers({ streamtype: 'x' })), expected: "served, upstream got RST_STREAM(9, 1)", basis: 'PROTOCOL_ERROR on that stream only' },
  { id: 'U10', title: 'server-initiated SYN_STREAM (even id)', after: ({ w }) => synWith(2, w.headers({ streamtype: 'x' })), expected: "served, upstream got RST_STREAM(2, 3)", basis: 'REFUSED_STREAM: nothing accepts pushed streams' },
  { id: 'U11', title: 'DATA on an unknown stream', after: () => data(99, 'who?'), expected: "served, upstream got RST_STREAM(99, 2)", basis: 'INVALID_STREAM; session unaffected' },
  { id: 'U12', title: 'DATA on stdout after its FIN', atEnd: () => Buffer.concat([data(5, '', true), data(5, 'late')]), expected: "served, upstream got RST_STREAM(5, 9)", basis: 'STREAM_ALREADY_CLOSED on stdout; the Status still arrives' },
  { id: 'U13', title: 'RST storm: 10,000 RST_STREAM on unknown streams', after: () => Buffer.concat(Array.from({ length: 10000 }, (_, i) => rst(2 * i + 1001, 1))), expected: "served", basis: 'ignored' },
  { id: 'U14', title: 'RST_STREAM(PROTOCOL_ERROR) on the error stream only', after: () => rst(1, 1), expected: "channel 3: 500 InternalError \"Internal error occurred: error reading from error stream: the upstream connection was closed\", close 1000", basis: 'no Status can arrive: InternalError; the process must survive' },
  { id: 'U15', title: 'GOAWAY mid-session (last good 7)', after: () => goaway(7, 0), expected: "served", basis: 'streams up to 7 carry on' },
  { id: 'U16', title: 'GOAWAY before any SYN_REPLY (last good 0)', before: () => goaway(0, 1), expected: "channel 3: 500 InternalError \"Internal error occurred: SPDY peer sent GOAWAY (status 1) before replying to stream 1\", close 1000", basis: 'no stream can be opened: InternalError' },
  { id: 'U17', title: 'upstream hangs up right after the 101', before: () => Buffer.alloc(0), hangUp: true, expected: "channel 3: 500 InternalError \"Internal error occurred: SPDY connection closed by peer\", close 1000", basis: 'InternalError' },
  { id: 'U18', title: '101 with `Upgrade: websocket`', head101: 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n', expected: "channel 3: 500 InternalError \"Internal error occurred: unable to upgrade: upstream switched to \\\"websocket (Connection: Upgrade)\\\", requested \\\"SPDY/3.1\\\"\", close 1000", basis: 'not SPDY: InternalError (apiserver: 500)' },
  { id: 'U19', title: 'PING flood: 10,000 pings', after: () => Buffer.concat(Array.from({ length: 10000 }, (_, i) => ping(2 * i + 2))), expected: "served", basis: 'all echoed; session unaffected' },
  { id: 'U20', title: 'PING with length 5', after: () => control(6, Buffer.alloc(5)), expected: "channel 3: 500 InternalError \"Internal error occurred: error reading from error stream: the upstream connection was closed\", close 1000, upstream got GOAWAY(0, 1)", basis: 'connection error' },
  { id: 'U21', title: 'SETTINGS and WINDOW_UPDATE storm', after: () => Buffer.concat([...Array.from({ length: 500 }, () => control(9, u32s(5, 1))), ...Array.from({ length: 500 }, () => control(4, u32s(1, 0x01000007, 1)))]), expected: "served", basis: 'ignored (no flow control)' },
  { id: 'U22', title: 'HEADERS on stdout whose block fails to inflate', after: () => headersWith(5, hex('ffffffffffff')), expected: "channel 3: 500 InternalError \"Internal error occurred: error reading from error stream: the upstream connection was closed\", close 1000, upstream got GOAWAY(0, 1)", basis: 'zlib context lost: connection error' },
  { id: 'U23', title: 'unknown control frame type 0x0f', after: () => control(0x0f, Buffer.from('whatever')), expected: "served", basis: 'ignored' },
  { id: 'U24', title: 'DATA on stream 0', after: () => data(0, 'x'), expected: "channel 3: 500 InternalError \"Internal error occurred: error reading from error stream: the upstream connection was closed\", close 1000, upstream got GOAWAY(0, 1)", basis: 'connection error' },
  { id: 'U25', title: 'error stream that is not JSON (v4)', status: Buffer.from('this is not json'), expected: "channel 3: 500 InternalError \"Internal error occurred: error stream protocol error: Unexpected token 'h', \\\"this is not json\\\" is not valid JSON in \\\"this is not json\\\"\", close 1000", basis: 'client-go v4 decoder: error stream protocol error' },
  { id: 'U26', title: 'error stream Status with exit code 300', status: Buffer.from('{"metadata":{},"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"300"}]}}'), expected: "channel 3: 500 InternalError \"Internal error occurred: error stream protocol error: invalid exit code value \\\"300\\\"\", close 1000", basis: 'client-go `ParseUint(msg, 10, 8)` fails' },
  { id: 'U27', title: 'error stream of 2 MiB', status: Buffer.alloc(2 * 1024 * 1024, 0x7b), expected: `channel 3: 500 InternalError ${JSON.stringify(`Internal error occurred: error stream protocol error: Expected property name or '}' in JSON at position 1 in "${'{'.repeat(256)}"… (1048576 characters)`)}, close 1000`, basis: 'bounded: 1 MiB kept, and only 256 characters quoted in the Status (client-go quotes all of it)' },
  { id: 'U28', title: 'Status Failure without details (NonZeroExitCode)', status: Buffer.from('{"metadata":{},"status":"Failure","reason":"NonZeroExitCode"}'), expected: "channel 3: 500 InternalError \"Internal error occurred: error stream protocol error: details must be set\", close 1000", basis: 'client-go: details must be set' },
  { id: 'U29', title: 'RST_STREAM(CANCEL) storm on the open streams, then the Status', atEnd: () => Buffer.concat(Array.from({ length: 100 }, () => rst(3, 5))), expected: "served", basis: 'resets of stdin (ours to write) do not end the outputs' },
  { id: 'U30', title: 'frames after GOAWAY and FIN from the upstream', atEnd: () => goaway(7, 0), expected: "served", basis: 'the Status written before the FIN still counts' },
];

export { v4Success };
