/**
 * The WebSocket half of the malformed-input catalogue: each case opens a translated exec session
 * (`v5.channel.k8s.io`, `cat`, through the proxy to the dev cluster's SPDY kubelet), writes raw frames,
 * and then probes: stdin text must come back on stdout. `expected` is the canonical outcome built by
 * `describeOutcome` in malformed-websocket.test.ts:
 *
 * - `served` — the bad input was ignored and the session still echoes and ends with Success;
 * - `channel 3: <Status>` — what arrived on channel 3;
 * - `close NNNN` — the server's close frame code; `dropped` — TCP closed with no close frame;
 * - `, closed` — the server then closed the connection.
 */
import { WS_OP, wsChannel, wsClose, wsFrame, type CatalogueRow } from './malformed-fixture.js';

/** One WebSocket case. */
export interface WebSocketCase extends CatalogueRow {
  /** Raw client bytes written after the initial frame (or, with `early`, with the upgrade request). */
  send: () => Buffer | Buffer[];
  /** Exec query; default `command=cat&stdin=true&stdout=true&stderr=true`. */
  query?: string;
  /** Write the bytes in the same TCP write as the upgrade request. */
  early?: boolean;
  /** End the client's TCP side (FIN) after sending. */
  fin?: boolean;
  /** Also expect at least this many pongs. */
  pongs?: number;
  /** Skip the echo probe (the session cannot echo any more, e.g. stdin closed). */
  noProbe?: boolean;
}

const TTY = 'command=cat&stdin=true&stdout=true&tty=true';
const SERVED = 'served';
const b = (...xs: number[]): Buffer => Buffer.from(xs);
const bin = (payload: Buffer): Buffer => wsFrame(WS_OP.BINARY, payload);
const resize = (text: string | Buffer): Buffer => wsChannel(4, text);
const closeWithCode = (code: number): Buffer => wsClose(code);
/** The close frame a protocol error produces, then the server ends the connection. */
const PROTOCOL_ERROR = 'close 1002, closed';
const DROPPED = 'dropped, closed';
const MiB = 1024 * 1024;

export const WEBSOCKET_CASES: WebSocketCase[] = [
  // ---- channels ----
  { id: 'W01', title: 'data on unknown channel 5', send: () => wsChannel(5, 'junk'), expected: SERVED, basis: 'apimachinery wsstream: unknown channels ignored' },
  { id: 'W02', title: 'data on unknown channel 254', send: () => wsChannel(254, 'junk'), expected: SERVED, basis: 'same' },
  { id: 'W03', title: 'channel byte 7 alone', send: () => bin(b(7)), expected: SERVED, basis: 'same' },
  { id: 'W04', title: 'empty binary message', send: () => bin(Buffer.alloc(0)), expected: SERVED, basis: 'wsstream: empty messages ignored' },
  { id: 'W05', title: 'client data on stdout (channel 1)', send: () => wsChannel(1, 'not yours'), expected: SERVED, basis: 'server reads only 0 and 4' },
  { id: 'W06', title: 'client data on stderr (channel 2)', send: () => wsChannel(2, 'not yours'), expected: SERVED, basis: 'same' },
  { id: 'W07', title: 'client data on the error channel 3', send: () => wsChannel(3, '{"status":"Success"}'), expected: SERVED, basis: 'same' },
  { id: 'W08', title: 'stdin message with an empty payload `[0]`', send: () => bin(b(0)), expected: SERVED, basis: 'v5: an empty stdin frame is a no-op (CLOSE is `[255,0]`)' },
  { id: 'W09', title: 'text frame carrying stdin (`\\x00hello`)', send: () => wsFrame(WS_OP.TEXT, '\u0000text-on-a-binary-protocol\n'), expected: SERVED, basis: 'binary protocols accept any data frame (kubelet/wsstream)' },
  { id: 'W10', title: 'text frame with invalid UTF-8', send: () => wsFrame(WS_OP.TEXT, b(0, 0xff, 0xfe, 0xc3)), expected: 'close 1007, closed', basis: 'RFC 6455 §8.1' },
  { id: 'W11', title: 'text frame on the resize channel without tty', send: () => wsFrame(WS_OP.TEXT, '\u0004{"Width":80,"Height":24}'), expected: SERVED, basis: 'no tty: resize dropped, never blocks stdin' },
  // ---- v5 CLOSE `[255, id]` ----
  { id: 'W12', title: 'CLOSE of wrong length `[255]`', send: () => bin(b(255)), expected: DROPPED, basis: 'wsstream v5: drops the connection' },
  { id: 'W13', title: 'CLOSE of wrong length `[255, 0, 0]`', send: () => bin(b(255, 0, 0)), expected: DROPPED, basis: 'same' },
  { id: 'W14', title: 'CLOSE of unknown stream `[255, 5]`', send: () => bin(b(255, 5)), expected: DROPPED, basis: 'same' },
  { id: 'W15', title: 'CLOSE of `[255, 255]`', send: () => bin(b(255, 255)), expected: DROPPED, basis: 'same' },
  { id: 'W16', title: 'CLOSE stdin twice', send: () => [bin(b(255, 0)), bin(b(255, 0))], noProbe: true, expected: 'channel 3: Success, close 1000, closed', basis: 'a repeated close is a no-op; cat sees EOF' },
  { id: 'W17', title: 'CLOSE of stdout `[255, 1]`', send: () => bin(b(255, 1)), expected: SERVED, basis: 'only stdin/resize are client-writable; nothing to close' },
  { id: 'W18', title: 'CLOSE of resize without tty `[255, 4]`', send: () => bin(b(255, 4)), expected: SERVED, basis: 'same' },
  { id: 'W19', title: 'stdin data after CLOSE of stdin', send: () => [bin(b(255, 0)), wsChannel(0, 'late')], noProbe: true, expected: 'channel 3: Success, close 1000, closed', basis: 'dropped after the half-close' },
  { id: 'W20', title: 'CLOSE `[255, 0]` as a text frame', send: () => wsFrame(WS_OP.TEXT, b(255, 0)), expected: 'close 1007, closed', basis: '0xff is not UTF-8 (RFC 6455 §8.1)' },
  // ---- resize ----
  { id: 'W21', title: 'resize garbage `hello`', query: TTY, send: () => resize('hello'), expected: SERVED, basis: 'kubelet stops reading resize on a decode error; the session goes on' },
  { id: 'W22', title: 'resize `{"Width":"x"}`', query: TTY, send: () => resize('{"Width":"x"}'), expected: SERVED, basis: 'same' },
  { id: 'W23', title: '1 MiB resize JSON (one complete object)', query: TTY, send: () => resize(`{"Width":80,"Height":24,"pad":"${'x'.repeat(MiB)}"}`), expected: SERVED, basis: 'decoded and ignored fields dropped, or refused; never buffered without bound' },
  { id: 'W24', title: '1 MiB unterminated resize object', query: TTY, send: () => resize(`{"Width":80${' '.repeat(MiB)}`), expected: SERVED, basis: 'over 4 KiB pending: resize input dropped' },
  { id: 'W25', title: '1 MiB of `[` on resize', query: TTY, send: () => resize('['.repeat(MiB)), expected: SERVED, basis: 'not an object: dropped' },
  { id: 'W26', title: 'resize with a negative width', query: TTY, send: () => resize('{"Width":-1,"Height":24}'), expected: SERVED, basis: 'uint16: decode error, dropped' },
  { id: 'W27', title: 'resize width 70000', query: TTY, send: () => resize('{"Width":70000,"Height":24}'), expected: SERVED, basis: 'uint16 overflow: dropped' },
  { id: 'W28', title: 'resize object split over two messages', query: TTY, send: () => [resize('{"Width":1'), resize('00,"Height":30}')], expected: SERVED, basis: 'json.Decoder stream' },
  { id: 'W29', title: '1,000 resize objects in one message', query: TTY, send: () => resize('{"width":80,"height":24}'.repeat(1000)), expected: SERVED, basis: 'json.Decoder stream; never blocks stdin' },
  { id: 'W30', title: 'resize `null`', query: TTY, send: () => resize('null'), expected: SERVED, basis: 'Go: null into a struct is a no-op' },
  { id: 'W31', title: 'resize on a session without tty', send: () => resize('{"Width":80,"Height":24}'.repeat(100)), expected: SERVED, basis: 'dropped; never blocks stdin (PROTOCOLS §1)' },
  { id: 'W32', title: 'valid resize after a bad one', query: TTY, send: () => [resize('}'), resize('{"Width":100,"Height":40}')], expected: SERVED, basis: 'resize input stays dropped; stdin unaffected' },
  { id: 'W33', title: 'CLOSE of resize on a tty session `[255, 4]`', query: TTY, send: () => bin(b(255, 4)), expected: SERVED, basis: 'resize stream half-closed; stdin unaffected' },
  // ---- size limit ----
  { id: 'W34', title: 'one frame declaring 32 MiB + 1', send: () => wsFrame(WS_OP.BINARY, Buffer.alloc(0), { declaredLength: 32 * MiB + 1 }), expected: 'close 1009, closed', basis: 'x/net `DefaultMaxPayloadBytes` 32 MiB; RFC 6455 1009' },
  { id: 'W35', title: 'fragments adding up to over 32 MiB', send: () => [wsFrame(WS_OP.BINARY, Buffer.alloc(MiB), { fin: false }), wsFrame(WS_OP.CONT, Buffer.alloc(0), { declaredLength: 31 * MiB + 1 })], expected: 'close 1009, closed', basis: 'the limit is per message' },
  { id: 'W36', title: 'frame length with the 64-bit MSB set', send: () => wsFrame(WS_OP.BINARY, Buffer.alloc(0), { declaredLength: 0x8000000000000000n }), expected: 'close 1009, closed', basis: 'RFC 6455 §5.2: MSB must be 0' },
  { id: 'W37', title: '4 MiB stdin message', send: () => wsChannel(0, Buffer.alloc(4 * MiB, 0x61)), expected: SERVED, basis: 'below the limit: delivered' },
  // ---- framing ----
  { id: 'W38', title: 'fragmented ping (FIN=0)', send: () => wsFrame(WS_OP.PING, 'x', { fin: false }), expected: PROTOCOL_ERROR, basis: 'RFC 6455 §5.5: control frames must not be fragmented' },
  { id: 'W39', title: 'ping with a 126-byte payload', send: () => wsFrame(WS_OP.PING, Buffer.alloc(126)), expected: PROTOCOL_ERROR, basis: 'RFC 6455 §5.5: ≤ 125 bytes' },
  { id: 'W40', title: 'close frame with a 1-byte payload', send: () => wsFrame(WS_OP.CLOSE, b(3)), expected: PROTOCOL_ERROR, basis: 'RFC 6455 §5.5.1' },
  { id: 'W41', title: 'close code 1005 on the wire', send: () => closeWithCode(1005), expected: PROTOCOL_ERROR, basis: 'RFC 6455 §7.4.1: reserved' },
  { id: 'W42', title: 'close code 999', send: () => closeWithCode(999), expected: PROTOCOL_ERROR, basis: 'RFC 6455 §7.4.2' },
  { id: 'W43', title: 'close reason with invalid UTF-8', send: () => wsClose(1000, b(0xff, 0xfe)), expected: 'close 1007, closed', basis: 'RFC 6455 §8.1' },
  { id: 'W44', title: 'unmasked client frame', send: () => wsChannel(0, 'unmasked', { mask: false }), expected: PROTOCOL_ERROR, basis: 'RFC 6455 §5.1' },
  { id: 'W45', title: 'RSV1 set without an extension', send: () => wsChannel(0, 'x', { rsv: 4 }), expected: PROTOCOL_ERROR, basis: 'RFC 6455 §5.2' },
  { id: 'W46', title: 'RSV2 and RSV3 set', send: () => wsChannel(0, 'x', { rsv: 3 }), expected: PROTOCOL_ERROR, basis: 'same' },
  { id: 'W47', title: 'reserved data opcode 3', send: () => wsFrame(3, 'x'), expected: PROTOCOL_ERROR, basis: 'RFC 6455 §5.2' },
  { id: 'W48', title: 'reserved control opcode 0xB', send: () => wsFrame(0xb, 'x'), expected: PROTOCOL_ERROR, basis: 'same' },
  { id: 'W49', title: 'continuation frame with no message started', send: () => wsFrame(WS_OP.CONT, 'x'), expected: PROTOCOL_ERROR, basis: 'RFC 6455 §5.4' },
  { id: 'W50', title: 'new data frame inside a fragmented message', send: () => [wsFrame(WS_OP.BINARY, b(0, 0x61), { fin: false }), wsFrame(WS_OP.BINARY, b(0, 0x62))], expected: PROTOCOL_ERROR, basis: 'RFC 6455 §5.4' },
  { id: 'W51', title: 'valid stdin message in three fragments', send: () => [wsFrame(WS_OP.BINARY, b(0, 0x61), { fin: false }), wsFrame(WS_OP.CONT, 'b', { fin: false }), wsFrame(WS_OP.CONT, 'c\n')], expected: SERVED, basis: 'RFC 6455 §5.4' },
  { id: 'W52', title: 'ping between the fragments of a message', send: () => [wsFrame(WS_OP.BINARY, b(0, 0x61), { fin: false }), wsFrame(WS_OP.PING, 'p'), wsFrame(WS_OP.CONT, 'b\n')], expected: SERVED, pongs: 1, basis: 'RFC 6455 §5.4: control frames may be injected' },
  { id: 'W53', title: 'ping flood: 5,000 pings in one write', send: () => Buffer.concat(Array.from({ length: 5000 }, () => wsFrame(WS_OP.PING, 'flood'))), expected: DROPPED, basis: 'ws ping-flood guard: more than 60 unwritten auto-pongs (`maxPendingAutoPongs`) drops the flooder; other sessions unaffected (x/net/websocket has no guard)' },
  { id: 'W61', title: '50 pings in one write', send: () => Buffer.concat(Array.from({ length: 50 }, () => wsFrame(WS_OP.PING, 'p'))), pongs: 50, expected: SERVED, basis: 'under the guard: every ping answered' },
  { id: 'W54', title: '1,000 unsolicited pongs', send: () => Buffer.concat(Array.from({ length: 1000 }, () => wsFrame(WS_OP.PONG, 'x'))), expected: SERVED, basis: 'RFC 6455 §5.5.3: ignored' },
  { id: 'W55', title: '2,000 one-byte stdin messages in one write', send: () => Buffer.concat(Array.from({ length: 2000 }, () => wsChannel(0, 'z'))), expected: SERVED, basis: 'delivered in order' },
  { id: 'W56', title: 'stdin frames pipelined with the upgrade request', early: true, send: () => wsChannel(0, 'early-bird\n'), expected: SERVED, basis: 'read before the upstream is ready: held, then delivered' },
  { id: 'W57', title: 'client close 1000 mid-session', send: () => closeWithCode(1000), noProbe: true, expected: 'close 1000, closed', basis: 'RFC 6455 §5.5.1: echoed; the upstream session is ended' },
  { id: 'W58', title: 'empty close frame mid-session', send: () => wsFrame(WS_OP.CLOSE), noProbe: true, expected: 'close 1005, closed', basis: 'echoed without a code' },
  { id: 'W59', title: 'TCP FIN without a close frame', send: () => Buffer.alloc(0), fin: true, noProbe: true, expected: 'closed', basis: 'the session ends; upstream closed' },
  { id: 'W60', title: 'garbage after the close frame', send: () => [closeWithCode(1000), Buffer.from('garbage after close')], noProbe: true, expected: 'close 1000, closed', basis: 'nothing is read after close' },
];
