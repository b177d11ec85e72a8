/**
 * The WebSocket protocol-error half of the malformed-input catalogue (issue 26 item 2): frames `ws`
 * cannot read, sent by a client that then never answers the close frame and never closes its side
 * (malformed-websocket-abort.test.ts), on a translated exec session and on a port-forward tunnel.
 * `expected` is the canonical outcome:
 *
 * - `close NNNN` — the proxy's close frame and its code; `, no Status` — nothing on channel 3 after it;
 * - `, dropped by the proxy` — the proxy closed the connection itself (the test's writes got a reset);
 * - `, upstream closed` — the proxy's upstream connection ended (the relay before the dev cluster saw it);
 * - `, reading stopped` — of 256 MiB the client kept offering, the proxy took less than 64 MiB.
 */
import { WS_OP, wsChannel, wsFrame, type CatalogueRow } from './malformed-fixture.js';

/** One protocol-error case. */
export interface AbortCase extends CatalogueRow {
  /** `exec`: translated v5 session; `tunnel`: `SPDY/3.1+portforward.k8s.io`. */
  session: 'exec' | 'tunnel';
  /** The close code ws answers with. */
  code: number;
  /** Raw client bytes, written after the 101 (and the exec session's initial frame). */
  send: () => Buffer[];
  /** After the bad frame, keep offering continuation frames (up to 256 MiB) while the socket takes them. */
  keepSending?: boolean;
}

const MiB = 1024 * 1024;
const GO = 'gorilla/websocket and x/net/websocket close the connection on a read error; the 15-minute Status-flush deadline is for sessions that ended normally (docs/decisions.md)';

const KINDS: Array<{ key: string; title: string; code: number; send: () => Buffer[]; basis: string }> = [
  { key: '2^63', title: 'a frame announcing 2^63 bytes', code: 1009, send: () => [wsFrame(WS_OP.BINARY, Buffer.alloc(0), { declaredLength: 0x8000000000000000n })], basis: `RFC 6455 §5.2 / 1009; ${GO}` },
  { key: '32MiB', title: 'a frame announcing 32 MiB + 1', code: 1009, send: () => [wsFrame(WS_OP.BINARY, Buffer.alloc(0), { declaredLength: 32 * MiB + 1 })], basis: `x/net DefaultMaxPayloadBytes; ${GO}` },
  {
    key: 'fragments',
    title: 'a message in 16,385 fragments (ws allows 16,384)',
    code: 1008,
    send: () => [wsFrame(WS_OP.BINARY, Buffer.from([0]), { fin: false }), Buffer.concat(Array.from({ length: 16_384 }, () => wsFrame(WS_OP.CONT, Buffer.alloc(0), { fin: false })))],
    basis: `ws maxFragments (1008 Policy Violation); ${GO}`,
  },
  { key: 'utf8', title: 'a text frame with invalid UTF-8', code: 1007, send: () => [wsFrame(WS_OP.TEXT, Buffer.from([0, 0xff, 0xfe]))], basis: `RFC 6455 §8.1; ${GO}` },
  { key: 'opcode', title: 'a frame with the reserved opcode 3', code: 1002, send: () => [wsFrame(3, 'x')], basis: `RFC 6455 §5.2; ${GO}` },
  { key: 'unmasked', title: 'an unmasked client frame', code: 1002, send: () => [wsChannel(0, 'unmasked', { mask: false })], basis: `RFC 6455 §5.1; ${GO}` },
];

const outcome = (code: number, session: 'exec' | 'tunnel', extra = ''): string => `close ${code}${session === 'exec' ? ', no Status' : ''}, dropped by the proxy, upstream closed${extra}`;

export const ABORT_CASES: AbortCase[] = [
  ...KINDS.map((k, i): AbortCase => ({ id: `X${String(i + 1).padStart(2, '0')}`, session: 'exec', title: `exec: ${k.title}`, code: k.code, send: k.send, expected: outcome(k.code, 'exec'), basis: k.basis })),
  {
    id: 'X07',
    session: 'exec',
    title: 'exec: 16,385 fragments, then fragments without end (256 MiB offered)',
    code: 1008,
    send: KINDS[2]!.send,
    keepSending: true,
    expected: outcome(1008, 'exec', ', reading stopped'),
    basis: 'nothing more is read after a protocol error (the review had 50 GB read and discarded in 15 s)',
  },
  ...KINDS.map((k, i): AbortCase => ({ id: `X${String(i + 8).padStart(2, '0')}`, session: 'tunnel', title: `port-forward tunnel: ${k.title}`, code: k.code, send: k.send, expected: outcome(k.code, 'tunnel'), basis: k.basis })),
];
