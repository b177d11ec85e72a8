/**
 * The client side of a WebSocket upgrade toward the upstream, for a SPDY client whose upstream takes
 * only WebSockets (the reverse translator and tunnel): dial (`route.dial()`), write the request head
 * through the one serializer (`requestHeadBytes`), read the response head with every byte kept — the
 * exchange every upgrade path shares (`src/upstream/upstream-exchange.ts`) — and check a 101 as
 * gorilla's client (client-go's WebSocket dialer) checks it: `Upgrade: websocket`, `Connection:
 * upgrade`, the `Sec-WebSocket-Accept` of our key (RFC 6455 §4.2.2), one of the offered subprotocols,
 * and no extension (none was offered). A ≥ 400 answer is handed back unread, for the caller to relay
 * verbatim as the answer to its client's handshake; any other answer is an error, reported before
 * the client is upgraded. No redirect is followed.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { InvalidUpgradeResponseError, UpgradeMismatchError } from '../src/errors.js';
import type { Route } from '../src/routing/route.js';
import type { AuthHeaders } from '../src/routing/upstream.js';
import { upstreamSpdyHeaders } from '../src/upstream/upstream-spdy.js';
import { exchangeUpgradeHead } from '../src/upstream/upstream-exchange.js';
import type { ClientInfo, HeaderPair } from '../src/wire/forwarded-headers.js';
import { requestHeadBytes } from '../src/wire/request-head.js';
import { relayErrorResponse } from '../src/wire/relay-error-response.js';
import type { CompleteResponseHead } from '../src/wire/response-head.js';

/** RFC 6455 §1.3: the GUID appended to the key before hashing. */
const WEBSOCKET_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/** What to send and how long to wait. */
export interface UpstreamWebSocketRequest {
  /** Where to dial and how to authenticate (its auth headers replace the client's). */
  upstream: Route;
  /** Request-target as received from the client; the upstream's path prefix is added. */
  url: string;
  /** The client's header lines (hop-by-hop, `Host`, `Content-Length`, the SPDY and WebSocket handshake lines are dropped). */
  clientHeaders: readonly HeaderPair[];
  /** For `X-Forwarded-For/Proto/Host`. */
  client: ClientInfo;
  /** `Sec-WebSocket-Protocol` values in preference order (one line, comma-separated). */
  protocols: readonly string[];
  /** Deadline for dialling plus the complete response head, in ms. */
  responseTimeoutMs: number;
  /** Cap on the response head's bytes (default: the exchange's). */
  maxResponseHeadBytes?: number;
  /** The client's socket, paused by the caller: its 'close' abandons the handshake. */
  clientSocket: Duplex;
}

/** How {@link openUpstreamWebSocket} ended. */
export type UpstreamWebSocketOpening =
  /** A valid 101: `socket` (paused) is upgraded, `head` holds the bytes read past the 101 head (frames). */
  | { kind: 'upgraded'; socket: Duplex; head: Buffer; protocol: string; response: CompleteResponseHead }
  /** A ≥ 400 answer: its head is read, its body is not; the caller owns `upstreamSocket` (paused) and relays it. */
  | { kind: 'refused'; upstreamSocket: Duplex; response: CompleteResponseHead }
  /** No connection (dial, timeout, head errors, another status, a 101 that fails the checks); cleaned up. */
  | { kind: 'failed'; error: unknown }
  /** The client left before the upstream answered; cleaned up. */
  | { kind: 'client-gone' };

/** `Sec-WebSocket-Accept` for `key`: base64 of SHA-1 over the key and the GUID. */
export function webSocketAccept(key: string): string {
  return createHash('sha1').update(key + WEBSOCKET_GUID).digest('base64');
}

/** Names of the lines the SPDY header builder puts in front that a WebSocket request replaces. */
const SPDY_UPGRADE_LINES: ReadonlySet<string> = new Set(['host', 'connection', 'upgrade', 'content-length']);

/**
 * The request header lines for the upstream WebSocket upgrade: the client's lines filtered and
 * forwarded exactly as for the translator's SPDY upgrade (`upstreamSpdyHeaders`: hop-by-hop,
 * `Host`, `Content-Length`, `X-Stream-Protocol-Version`, `Sec-WebSocket-*`, `Origin` dropped;
 * `X-Forwarded-*`; `auth` set over them), with the WebSocket upgrade lines first.
 */
export function upstreamWebSocketHeaders(
  clientHeaders: readonly HeaderPair[],
  client: ClientInfo,
  auth: AuthHeaders,
  host: string,
  protocols: readonly string[],
  key: string,
): HeaderPair[] {
  // With no protocols the SPDY builder adds exactly Host, Connection, Upgrade and Content-Length of
  // its own; every other line is the client's (filtered), the forwarding lines, or `auth`.
  const forwarded = upstreamSpdyHeaders(clientHeaders, client, auth, host, []).filter(([n]) => !SPDY_UPGRADE_LINES.has(n.toLowerCase()));
  return [
    ['Host', host],
    ['Connection', 'Upgrade'],
    ['Upgrade', 'websocket'],
    ['Sec-WebSocket-Version', '13'],
    ['Sec-WebSocket-Key', key],
    ['Sec-WebSocket-Protocol', protocols.join(', ')],
    ...forwarded,
  ];
}

/** Dial the upstream and ask for a WebSocket; see {@link UpstreamWebSocketOpening}. Never throws. */
export async function openUpstreamWebSocket(r: UpstreamWebSocketRequest): Promise<UpstreamWebSocketOpening> {
  const key = randomBytes(16).toString('base64');
  const exchange = await exchangeUpgradeHead({
    upstream: r.upstream,
    clientSocket: r.clientSocket,
    timeoutMs: r.responseTimeoutMs,
    ...(r.maxResponseHeadBytes !== undefined ? { maxHeadBytes: r.maxResponseHeadBytes } : {}),
    request: (auth) => requestHeadBytes('GET', r.upstream.target(r.url), upstreamWebSocketHeaders(r.clientHeaders, r.client, auth, r.upstream.host, r.protocols, key)),
  });
  if (exchange.kind !== 'answered') return exchange;
  const { upstreamSocket: socket, response } = exchange;
  const { statusCode } = response.head;
  if (statusCode >= 400) return { kind: 'refused', upstreamSocket: socket, response };
  const checked = statusCode === 101 ? checkSwitch(response, key, r.protocols) : { error: new InvalidUpgradeResponseError(statusCode) };
  if ('error' in checked) {
    socket.destroy();
    return { kind: 'failed', error: checked.error };
  }
  return { kind: 'upgraded', socket, head: response.rest, protocol: checked.protocol, response };
}

/**
 * Relay a refusal (`openUpstreamWebSocket`'s `refused`) to the client byte for byte as the answer to
 * its handshake, as every upgrade path relays one (`relayErrorResponse`); returns its status code.
 */
export function relayRefusal(clientSocket: Duplex, refused: Extract<UpstreamWebSocketOpening, { kind: 'refused' }>): number {
  const { upstreamSocket, response } = refused;
  const raw = response.rest.length > 0 ? Buffer.concat([response.headBytes, response.rest]) : response.headBytes;
  relayErrorResponse(clientSocket, upstreamSocket, raw, response, false);
  return response.head.statusCode;
}

/** Check a 101 as gorilla's client does; the chosen subprotocol, or the error. */
function checkSwitch(response: CompleteResponseHead, key: string, offered: readonly string[]): { protocol: string } | { error: Error } {
  const { headers } = response.head;
  if (!headers.tokens('upgrade').includes('websocket') || !headers.tokens('connection').includes('upgrade')) {
    return { error: new UpgradeMismatchError('websocket', `${headers.get('upgrade') ?? ''} (Connection: ${headers.get('connection') ?? ''})`) };
  }
  const accept = headers.get('sec-websocket-accept')?.trim();
  if (accept !== webSocketAccept(key)) {
    return { error: new UpgradeMismatchError('websocket', `a 101 whose Sec-WebSocket-Accept (${accept ?? 'none'}) does not answer our key`) };
  }
  if ((headers.get('sec-websocket-extensions') ?? '').trim() !== '') {
    return { error: new UpgradeMismatchError('websocket', `a 101 with extensions (${headers.get('sec-websocket-extensions') ?? ''}), none offered`) };
  }
  const protocol = headers.get('sec-websocket-protocol')?.trim() ?? '';
  // client-go refuses a 101 whose subprotocol it did not offer, an empty one included.
  if (!offered.includes(protocol)) {
    return { error: new UpgradeMismatchError(`websocket (${offered.join(', ')})`, protocol === '' ? 'websocket without a subprotocol' : `websocket with subprotocol ${protocol}`) };
  }
  return { protocol };
}
