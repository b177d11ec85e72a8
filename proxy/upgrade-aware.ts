/**
 * UpgradeAwareProxy: the byte-passthrough path for SPDY and WebSocket upgrades, after apimachinery's
 * `UpgradeAwareHandler.tryUpgrade`. It dials the upstream itself (HTTP/1.1 only), writes the request
 * head (nothing more: bytes the client sent after it wait for the 101), reads the upstream's response
 * head with every byte kept, and then either splices the two sockets (101, the client's early bytes
 * first), replays the upstream's error verbatim (≥ 400, the connection then closed) or answers a
 * Kubernetes Status — or, when the caller will ask again in another protocol, hands a refusal back
 * unrelayed (`fallbackFrom`, issue 32). The client socket is already hijacked: every answer is raw bytes.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  InvalidUpgradeResponseError,
  ProxyError,
  UpgradeMismatchError,
  statusForError,
} from '../src/errors.js';
import type { AuthHeaders } from '../src/routing/upstream.js';
import { routeOf, type Route } from '../src/routing/route.js';
import {
  pairsFromRaw,
  setHeaders,
  stripHopByHop,
  withForwardedHeaders,
  type ClientInfo,
  type HeaderPair,
} from '../src/wire/forwarded-headers.js';
import { requestHeadBytes } from '../src/wire/request-head.js';
import type { CompleteResponseHead } from '../src/wire/response-head.js';
import { relayErrorResponse } from '../src/wire/relay-error-response.js';
import { spliceSockets, type Splice } from './splice.js';
import { closeAfterAnswer } from '../src/wire/close-after-answer.js';
import { relayObserverFor } from '../src/recording/relay-observer.js';
import type { BegunRecording } from '../src/recording/session-recorder.js';
import { exchangeUpgradeHead } from '../src/upstream/upstream-exchange.js';
import { readRefusalBody, type UpstreamRefusal } from '../src/wire/refusal-body.js';

/** The few settings the one caller needs (not Go's pile of booleans). */
export interface UpgradeAwareProxyOptions {
  /** Where to dial and how to authenticate. */
  upstream: Route;
  /** Per-direction limit on the upgraded connection, bytes per second; 0 = unlimited. */
  maxBytesPerSec: number;
  /** Deadline for dialling and receiving the complete response head, in milliseconds. */
  responseTimeoutMs: number;
  /** Cap on the upstream's response head; defaults to MAX_RESPONSE_HEAD_BYTES. */
  maxResponseHeadBytes?: number;
}

/** What happened to one upgrade request. */
export type UpgradeOutcome =
  /** 101 relayed; the splice runs until either side ends. */
  | { kind: 'upgraded'; statusCode: 101; splice: Splice }
  /** The upstream's ≥ 400 answer was relayed byte for byte. */
  | { kind: 'forwarded'; statusCode: number }
  /** We answered a Status for this error. */
  | { kind: 'error'; statusCode: number; error: unknown }
  /** The client went away before there was anything to answer. */
  | { kind: 'client-gone'; statusCode: 499 }
  /**
   * {@link TryUpgradeOptions.fallbackFrom}: the upstream answered `statusCode` before any 101 and it
   * was NOT relayed. Nothing was written to the client, whose socket stays paused with its early bytes
   * unread; the upstream connection is destroyed. The caller asks again in another protocol.
   */
  | { kind: 'refused-before-upgrade'; statusCode: number; response: CompleteResponseHead; refusal: UpstreamRefusal };

/** Per-request choices of {@link UpgradeAwareProxy.tryUpgrade}. */
export interface TryUpgradeOptions {
  /**
   * A non-101 answer for which this returns true is not relayed (`refused-before-upgrade`): the
   * caller will try another protocol. Asked with the answer's body read first when it is a small
   * Content-Length one (src/wire/refusal-body.ts), so a Kubernetes `Status` can be told from a
   * refusal of the protocol. Never asked for a 401: refused credentials are refused in every
   * protocol, so a 401 is always relayed.
   */
  fallbackFrom?: (refusal: UpstreamRefusal) => boolean;
}

/** Status codes never fallen back from: the caller's credentials were refused (kubectl's own fallback relays them too). */
const ALWAYS_RELAYED = 401;

/** Header lines of an upgrade request that are kept exactly as sent, even if `Connection` names them. */
function isProtocolHeader(lowerName: string): boolean {
  return lowerName === 'x-stream-protocol-version' || lowerName.startsWith('sec-websocket-');
}

/** The protocol a recorded session's tap parses: the client asked for a WebSocket, or SPDY/3.1. */
function negotiated(requested: readonly string[], streamProtocol: string | undefined, wsProtocol: string | undefined): { kind: 'spdy' | 'websocket'; subprotocol: string } {
  return requested.includes('websocket') ? { kind: 'websocket', subprotocol: (wsProtocol ?? '').trim() } : { kind: 'spdy', subprotocol: (streamProtocol ?? '').trim() };
}

/** Proxies one upgrade request at a time; one instance serves the whole server. */
export class UpgradeAwareProxy {
  readonly #options: UpgradeAwareProxyOptions;

  constructor(options: UpgradeAwareProxyOptions) {
    this.#options = options;
  }

  /** The settings this proxy runs with (the port-forward tunnel reuses them). */
  get options(): Readonly<UpgradeAwareProxyOptions> {
    return this.#options;
  }

  /**
   * Proxy an upgrade request whose client socket the caller has hijacked. `head` holds the bytes
   * Node read past the request head. Never throws: every failure is answered on `socket`.
   * `recording` (session recording, begun by the handler): at a 101 it is created on the sink before
   * the client's 101 is written, then the splice taps it (with the splice(2) fast path off); the
   * caller abandons it when there was no 101. `options.fallbackFrom`: see {@link TryUpgradeOptions}.
   */
  async tryUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, client: ClientInfo, recording?: BegunRecording, options: TryUpgradeOptions = {}): Promise<UpgradeOutcome> {
    // Leave later client bytes in the socket until the upstream has said 101; they are relayed then.
    socket.pause();
    const upstream = routeOf(req, this.#options.upstream);
    const exchange = await exchangeUpgradeHead({
      upstream,
      clientSocket: socket,
      timeoutMs: this.#options.responseTimeoutMs,
      ...(this.#options.maxResponseHeadBytes !== undefined ? { maxHeadBytes: this.#options.maxResponseHeadBytes } : {}),
      // The request head only. Bytes the client sent after it (`head`) belong to the new protocol and
      // leave only once the upstream has said 101: before that, an upstream that answers anything else
      // on a kept-alive connection would read them as the next request, on the proxy's credentials.
      request: (auth) => requestHeadBytes(req.method ?? 'GET', upstream.target(req.url ?? '/'), this.#headers(req, client, auth, upstream.host)),
    });
    switch (exchange.kind) {
      case 'client-gone':
        return { kind: 'client-gone', statusCode: 499 };
      case 'failed': {
        const status = statusForError(exchange.error);
        closeAfterAnswer(socket, status);
        return { kind: 'error', statusCode: status.code ?? 500, error: exchange.error };
      }
      case 'answered': {
        const { statusCode } = exchange.response.head;
        let response = exchange.response;
        if (statusCode !== 101 && statusCode !== ALWAYS_RELAYED && options.fallbackFrom) {
          const read = await readRefusalBody(exchange.upstreamSocket, response);
          response = read.response;
          if (options.fallbackFrom(read.refusal)) {
            // Nothing was started upstream by a refused upgrade, and nothing goes to the client: the
            // caller's next attempt answers it. This connection is not reused (it carried a refusal).
            exchange.upstreamSocket.destroy();
            return { kind: 'refused-before-upgrade', statusCode, response, refusal: read.refusal };
          }
        }
        return this.#answer(req, socket, exchange.upstreamSocket, response, head, recording);
      }
    }
  }

  /** The request header lines for the upstream (see forwarded-headers.ts), Connection/Upgrade rebuilt. */
  #headers(req: IncomingMessage, client: ClientInfo, auth: AuthHeaders, host: string): HeaderPair[] {
    const received = pairsFromRaw(req.rawHeaders);
    const upgradeLines = received.filter(([n]) => n.toLowerCase() === 'upgrade');
    let pairs = stripHopByHop(received, isProtocolHeader).filter(([n]) => n.toLowerCase() !== 'host');
    pairs = withForwardedHeaders(pairs, client);
    pairs = setHeaders(pairs, auth);
    return [['Host', host], ...pairs, ['Connection', 'Upgrade'], ...upgradeLines];
  }

  async #answer(req: IncomingMessage, socket: Duplex, upstreamSocket: Duplex, response: CompleteResponseHead, early: Buffer, recording: BegunRecording | undefined): Promise<UpgradeOutcome> {
    const { head } = response;
    const raw = response.rest.length > 0 ? Buffer.concat([response.headBytes, response.rest]) : response.headBytes;
    if (head.statusCode === 101) {
      const requested = (req.headers.upgrade ?? '').split(',').map((t) => t.trim().toLowerCase()).filter((t) => t !== '');
      const offered = head.headers.tokens('upgrade');
      const connectionUpgrade = head.headers.tokens('connection').includes('upgrade');
      if (!connectionUpgrade || !offered.some((p) => requested.includes(p))) {
        upstreamSocket.destroy();
        const error = new UpgradeMismatchError(requested.join(', '), connectionUpgrade ? offered.join(', ') : '(no Connection: upgrade)');
        closeAfterAnswer(socket, error.toStatus());
        return { kind: 'error', statusCode: 500, error };
      }
      // Recorded: created on the sink now, before the client gets its 101 (both sockets stay paused);
      // an enforced recording that cannot be is refused with its 503 instead (docs/recording.md).
      const refusal = recording ? await recording.create() : undefined;
      if (refusal) {
        upstreamSocket.destroy();
        closeAfterAnswer(socket, refusal.toStatus());
        return { kind: 'error', statusCode: 503, error: refusal };
      }
      if (recording && socket.destroyed) {
        upstreamSocket.destroy();
        return { kind: 'client-gone', statusCode: 499 };
      }
      // Recorded: the tap sees the stream from its first byte after each head (docs/recording.md, "Wiring").
      const observer = recording ? relayObserverFor(recording, negotiated(requested, head.headers.get('x-stream-protocol-version'), head.headers.get('sec-websocket-protocol'))) : undefined;
      if (observer && early.length > 0) observer.fromClient(early);
      if (observer && response.rest.length > 0) observer.fromUpstream(response.rest);
      socket.write(raw);
      // The 101 is in: the client's early bytes are the upgraded stream's first bytes.
      if (early.length > 0) upstreamSocket.write(early);
      const options = observer ? { maxBytesPerSec: this.#options.maxBytesPerSec, native: false, observer } : { maxBytesPerSec: this.#options.maxBytesPerSec };
      return { kind: 'upgraded', statusCode: 101, splice: spliceSockets(socket, upstreamSocket, options) };
    }
    if (head.statusCode >= 400) {
      relayErrorResponse(socket, upstreamSocket, raw, response, req.method === 'HEAD');
      return { kind: 'forwarded', statusCode: head.statusCode };
    }
    upstreamSocket.destroy();
    const error = new InvalidUpgradeResponseError(head.statusCode);
    closeAfterAnswer(socket, error.toStatus());
    return { kind: 'error', statusCode: 500, error };
  }
}
