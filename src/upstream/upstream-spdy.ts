/**
 * The client side of a SPDY/3.1 upgrade toward the upstream, as client-go's `spdy.RoundTripper` does
 * it: dial (`Upstream.dial()`, HTTP/1.1 only), write the request head, read the response head with
 * every byte kept — the exchange the passthrough and the port-forward tunnel share
 * (`src/upstream/upstream-exchange.ts`) — and on 101 hand the socket (plus the bytes read past the head) to
 * a client-role {@link SpdyConnection}. A ≥ 400 answer is handed back unread, for the caller to relay
 * verbatim as the answer to its client's handshake (the UpgradeAwareProxy rule: know the upstream's
 * answer before taking the client over); any other answer is an error. No redirect is ever followed
 * (`NewSPDYExecutorRejectRedirects`).
 *
 * Used by the StreamTranslatorProxy (exec/attach); the caller chooses the method, the
 * request-target, the protocols offered and the extra header lines.
 */
import type { Duplex } from 'node:stream';
import { websocketBearer } from '../auth/websocket-bearer.js';
import {
  rawFromPairs,
  setHeaders,
  stripHopByHop,
  withForwardedHeaders,
  type ClientInfo,
  type HeaderPair,
} from '../wire/forwarded-headers.js';
import { requestHeadBytes } from '../wire/request-head.js';
import type { CompleteResponseHead } from '../wire/response-head.js';
import { exchangeUpgradeHead } from './upstream-exchange.js';
import { UpgradeMismatchError, UpstreamUpgradeRefusedError } from '../errors.js';
import { SpdyConnection, type SpdyLogger } from '../spdy/index.js';
import { errorStatus, isStatus, type V1Status } from '../status.js';
import { HEADER_PROTOCOL_VERSION, StreamProtocolV1Name } from '../stream-protocol.js';
import type { Route } from '../routing/route.js';
import type { AuthHeaders } from '../routing/upstream.js';

/** client-go reads at most this much of a refusal's body (`io.LimitReader(resp.Body, 64*1024)`). */
export const MAX_REFUSAL_BODY_BYTES = 64 * 1024;

/**
 * SPDY PING period toward the upstream: what client-go's `RoundTripperFor` and kube-apiserver's
 * translator (`PingPeriod`, #130126) use, so idle timers between us and the kubelet never fire.
 */
export const UPSTREAM_SPDY_PING_INTERVAL_MS = 5_000;

/** What to send and how long to wait. */
export interface UpstreamSpdyRequest {
  /** Where to dial and how to authenticate (its auth headers replace the client's). */
  upstream: Route;
  /** Request-target as received from the client (`/api/v1/…/exec?command=…`); the upstream's path prefix is added. */
  url: string;
  /** HTTP method; client-go uses POST for SPDY. */
  method?: string;
  /**
   * The client's header lines. Hop-by-hop headers, `Host`, `Content-Length` and the WebSocket
   * handshake headers (`Sec-WebSocket-*`, `Origin`) are dropped; the rest (Authorization,
   * Impersonate-*, User-Agent, …) is forwarded as the passthrough forwards it.
   */
  clientHeaders: readonly HeaderPair[];
  /** For `X-Forwarded-For/Proto/Host`. */
  client: ClientInfo;
  /** `X-Stream-Protocol-Version` values in preference order, one header line each. */
  protocols: readonly string[];
  /** Deadline for dialling plus the complete response head (and a non-101 answer's body), in ms. */
  responseTimeoutMs: number;
  /** PING period on the resulting connection; default {@link UPSTREAM_SPDY_PING_INTERVAL_MS}, 0 = none. */
  pingIntervalMs?: number;
  /** The client's socket, not yet upgraded and left paused by the caller: its 'close' abandons the handshake. */
  clientSocket: Duplex;
  /** Logger for the SPDY connection. */
  logger?: SpdyLogger;
}

/** An upgraded upstream connection. */
export interface UpstreamSpdySession {
  connection: SpdyConnection;
  /** The negotiated `X-Stream-Protocol-Version`; `channel.k8s.io` when the upstream named none (as client-go). */
  protocol: string;
  /** The upstream's 101 head, for logging. */
  response: CompleteResponseHead;
}

/** How {@link openUpstreamSpdy} ended. */
export type UpstreamSpdyOpening =
  /** 101 with the upgrade headers: the connection is up. */
  | { kind: 'upgraded'; session: UpstreamSpdySession }
  /**
   * The upstream refused with a ≥ 400 answer (401, 403, 404, …): its head is read, its body is not.
   * The caller owns `upstreamSocket` (paused) and relays the answer (`relayErrorResponse`).
   */
  | { kind: 'refused'; upstreamSocket: Duplex; response: CompleteResponseHead }
  /**
   * No connection: UpstreamUnreachableError, UpstreamTimeoutError, UpstreamClosedError,
   * ResponseHeadTooLargeError / MalformedResponseHeadError, {@link UpgradeMismatchError} (101 without
   * the upgrade headers) or {@link UpstreamUpgradeRefusedError} (another non-101 answer). Cleaned up.
   */
  | { kind: 'failed'; error: unknown }
  /** The client left before the upstream answered; cleaned up. */
  | { kind: 'client-gone' };

/** Header lines of the client request that never go upstream on a SPDY upgrade. */
function isDroppedHeader(lowerName: string): boolean {
  return (
    lowerName === 'host' ||
    lowerName === 'content-length' ||
    lowerName === 'origin' ||
    lowerName === 'x-stream-protocol-version' ||
    lowerName.startsWith('sec-websocket-')
  );
}

/** The request header lines for the upstream SPDY upgrade (exported for tests and the tunnel). */
export function upstreamSpdyHeaders(
  clientHeaders: readonly HeaderPair[],
  client: ClientInfo,
  auth: AuthHeaders,
  host: string,
  protocols: readonly string[],
): HeaderPair[] {
  let pairs = stripHopByHop(clientHeaders).filter(([n]) => !isDroppedHeader(n.toLowerCase()));
  // A browser's bearer token rides in the WebSocket subprotocol list, which does not go upstream on
  // a SPDY request: carry it as the Authorization it stands for (kube-apiserver reads it the same way).
  const wsToken = websocketBearer(rawFromPairs(clientHeaders)).token;
  if (wsToken !== undefined && !pairs.some(([n]) => n.toLowerCase() === 'authorization')) pairs.push(['Authorization', `Bearer ${wsToken}`]);
  pairs = withForwardedHeaders(pairs, client);
  pairs = setHeaders(pairs, auth);
  // The upgrade lines go first: a Node upstream keeps only about the first 1,000 header lines, so a
  // client with many lines must not push them out (a Go kubelet has no line limit).
  return [
    ['Host', host],
    ['Connection', 'Upgrade'],
    ['Upgrade', 'SPDY/3.1'],
    ...protocols.map((p): HeaderPair => [HEADER_PROTOCOL_VERSION, p]),
    // Go's req.Write sends this for a body-less POST.
    ['Content-Length', '0'],
    ...pairs,
  ];
}

/** Dial the upstream and ask for SPDY/3.1; see {@link UpstreamSpdyOpening}. Never throws. */
export async function openUpstreamSpdy(r: UpstreamSpdyRequest): Promise<UpstreamSpdyOpening> {
  const exchange = await exchangeUpgradeHead({
    upstream: r.upstream,
    clientSocket: r.clientSocket,
    timeoutMs: r.responseTimeoutMs,
    request: (auth) => requestHeadBytes(r.method ?? 'POST', r.upstream.target(r.url), upstreamSpdyHeaders(r.clientHeaders, r.client, auth, r.upstream.host, r.protocols)),
  });
  if (exchange.kind !== 'answered') return exchange;
  const { upstreamSocket: socket, response } = exchange;
  const { statusCode, headers } = response.head;
  if (statusCode >= 400) return { kind: 'refused', upstreamSocket: socket, response };
  if (statusCode !== 101) {
    const body = await readBody(socket, response, AbortSignal.timeout(r.responseTimeoutMs));
    socket.destroy();
    return { kind: 'failed', error: refusal(statusCode, body) };
  }
  if (!headers.tokens('connection').includes('upgrade') || !headers.tokens('upgrade').includes('spdy/3.1')) {
    socket.destroy();
    return { kind: 'failed', error: new UpgradeMismatchError('SPDY/3.1', `${headers.get('upgrade') ?? ''} (Connection: ${headers.get('connection') ?? ''})`) };
  }
  const protocol = headers.get(HEADER_PROTOCOL_VERSION)?.trim() || StreamProtocolV1Name;
  const connection = new SpdyConnection(socket, {
    isServer: false,
    head: response.rest,
    pingIntervalMs: r.pingIntervalMs ?? UPSTREAM_SPDY_PING_INTERVAL_MS,
    ...(r.logger ? { logger: r.logger } : {}),
  });
  socket.resume();
  return { kind: 'upgraded', session: { connection, protocol, response } };
}

/**
 * The error for a non-101 answer, as client-go builds it: the body decoded as a metav1.Status if it
 * is one, else `unable to upgrade connection: <body>` with the response's code.
 */
export function refusal(statusCode: number, body: Buffer): UpstreamUpgradeRefusedError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    // not JSON
  }
  if (isStatus(parsed)) return new UpstreamUpgradeRefusedError(statusCode, parsed, true);
  return new UpstreamUpgradeRefusedError(
    statusCode,
    errorStatus(statusCode, `unable to upgrade connection: ${body.toString('utf8').trim()}`),
    false,
  );
}

/**
 * Read a refusal's body: what came with the head, then up to Content-Length (or until the upstream
 * closes) and never more than {@link MAX_REFUSAL_BODY_BYTES}. Chunked bodies are decoded.
 */
async function readBody(socket: Duplex, response: CompleteResponseHead, signal: AbortSignal): Promise<Buffer> {
  const length = response.head.headers.get('content-length');
  const chunked = response.head.headers.tokens('transfer-encoding').includes('chunked');
  const want = length !== undefined && !chunked && /^\d+$/.test(length) ? Math.min(Number(length), MAX_REFUSAL_BODY_BYTES) : MAX_REFUSAL_BODY_BYTES;
  let body = response.rest;
  if (body.length < want && !(chunked && chunkedComplete(body))) {
    try {
      body = await readUntil(
        socket,
        signal,
        (chunk) => {
          body = Buffer.concat([body, chunk]);
          return body.length >= want || (chunked && chunkedComplete(body)) ? body : undefined;
        },
        () => undefined,
      ) ?? body;
    } catch {
      // A body cut short is still reported as far as it came.
    }
  }
  body = body.subarray(0, want);
  return chunked ? dechunk(body) : body;
}

/** Feed socket data to `step` until it returns a value; `onEnd` decides what a close means. */
function readUntil<T>(
  socket: Duplex,
  signal: AbortSignal,
  step: (chunk: Buffer) => T | undefined,
  onEnd: () => Error | undefined,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cleanup = (): void => {
      socket.pause();
      socket.off('data', onData);
      socket.off('end', onClose);
      socket.off('close', onClose);
      signal.removeEventListener('abort', onAbort);
    };
    const onData = (chunk: Buffer): void => {
      try {
        const done = step(chunk);
        if (done !== undefined) {
          cleanup();
          resolve(done);
        }
      } catch (e) {
        cleanup();
        reject(e);
      }
    };
    const onClose = (): void => {
      cleanup();
      const err = onEnd();
      if (err) reject(err);
      else resolve(undefined as T);
    };
    const onAbort = (): void => {
      cleanup();
      reject(signal.reason);
    };
    socket.on('data', onData);
    socket.on('end', onClose);
    socket.on('close', onClose);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    socket.resume();
  });
}

/** True once a chunked body's last (zero-size) chunk has arrived. */
function chunkedComplete(body: Buffer): boolean {
  return /(^|\r\n)0(;[^\r\n]*)?\r\n/.test(body.toString('latin1'));
}

/** Decode a (possibly truncated) chunked body, best effort. */
function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = parseInt(body.toString('latin1', at, eol).split(';')[0]!, 16);
    if (!(size > 0)) break;
    parts.push(body.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(parts);
}
