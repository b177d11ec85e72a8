/**
 * StreamTunnelProxy: WebSocket port-forward (`SPDY/3.1+portforward.k8s.io`, kubectl ≥ 1.31 by
 * default, 1.30 opt-in) tunnelled to a SPDY/3.1 upstream, after apiserver `pkg/util/proxy/streamtunnel.go`.
 *
 * The client's WebSocket request is re-issued upstream as a SPDY/3.1 upgrade (POST, no body, one
 * `X-Stream-Protocol-Version` line per offered protocol). Only when the upstream has answered 101 is
 * the client's WebSocket handshake completed, echoing `SPDY/3.1+<chosen protocol>`; the bytes then
 * flow raw inside binary messages (see stream-tunnel-relay.ts). An upstream ≥ 400 is replayed
 * verbatim, so kubectl sees the kubelet's refusal and falls back to plain SPDY.
 *
 * The client socket is already hijacked: every answer is raw bytes on it.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { closeAfterAnswer } from '../src/wire/close-after-answer.js';
import type { ClientInfo } from '../src/wire/forwarded-headers.js';
import { requestHeadBytes } from '../src/wire/request-head.js';
import type { CompleteResponseHead } from '../src/wire/response-head.js';
import { relayErrorResponse } from '../src/wire/relay-error-response.js';
import { exchangeUpgradeHead } from '../src/upstream/upstream-exchange.js';
import {
  InvalidUpgradeResponseError,
  NoTunnelingProtocolError,
  UpgradeMismatchError,
  statusForError,
} from '../src/errors.js';
import { errorStatus } from '../src/status.js';
import { HEADER_PROTOCOL_VERSION } from '../src/stream-protocol.js';
import { routeOf, type Route } from '../src/routing/route.js';
import {
  SPDY_31,
  answeredSubprotocol,
  offeredWebSocketProtocols,
  tunnelRequestHeaders,
  tunneledSpdyProtocols,
} from './stream-tunnel-protocol.js';
import { relayTunnel, type TunnelRelay } from './stream-tunnel-relay.js';
import { relayObserverFor } from '../src/recording/relay-observer.js';
import type { BegunRecording } from '../src/recording/session-recorder.js';

/**
 * Largest client message accepted: x/net/websocket's `DefaultMaxPayloadBytes` (32 MiB). client-go
 * writes one message per `Write` of the SPDY framer, a few bytes to 32 KiB each.
 */
export const TUNNEL_MAX_MESSAGE_BYTES = 32 * 1024 * 1024;

/** Settings of a {@link StreamTunnelProxy}; the server passes the passthrough's. */
export interface StreamTunnelOptions {
  /** Where to dial and how to authenticate. */
  upstream: Route;
  /** Per-direction limit on the tunnel, bytes per second; 0 = unlimited. */
  maxBytesPerSec: number;
  /** Deadline for dialling and receiving the complete upstream response head, in milliseconds. */
  responseTimeoutMs: number;
  /** Cap on the upstream's response head; defaults to MAX_RESPONSE_HEAD_BYTES. */
  maxResponseHeadBytes?: number;
  /**
   * WebSocket ping period toward the client, ms; 0 (default) = none, like the apiserver. kubectl's
   * SPDY PING every 10 s travels inside the tunnel and keeps every hop busy already.
   */
  pingPeriodMs?: number;
}

/**
 * What happened to one tunnel request. `tunnelCode` is the `apiserver_stream_tunnel_requests_total`
 * label: 101 success, 400 no tunneling protocol, 500 bad upstream 101 or failed WebSocket upgrade,
 * else the upstream's status (or our Status code when the upstream never answered).
 */
export type TunnelOutcome =
  /** Both handshakes done; the relay runs until either side ends. */
  | {
      kind: 'tunneled';
      statusCode: 101;
      tunnelCode: 101;
      protocol: string | undefined;
      relay: TunnelRelay;
      /** Close the client WebSocket with 1001 Going Away (graceful shutdown); the relay then ends both sides. */
      goAway(reason: string): void;
    }
  /** The upstream's ≥ 400 answer was relayed byte for byte. */
  | { kind: 'forwarded'; statusCode: number; tunnelCode: number }
  /** We answered for this error (a Status, or ws's handshake refusal). */
  | { kind: 'error'; statusCode: number; tunnelCode: number; error: unknown }
  /** The client went away before there was anything to answer; not counted as a tunnel request. */
  | { kind: 'client-gone'; statusCode: 499 };

/** The client's WebSocket handshake failed after the upstream said 101 (ws wrote the refusal). */
export class WebSocketHandshakeError extends Error {
  override readonly name = 'WebSocketHandshakeError';
  constructor(message: string) {
    super(`error upgrading websocket connection: ${message}`);
  }
}

/** Tunnels one request at a time per call; one instance serves the whole server. */
export class StreamTunnelProxy {
  readonly #options: StreamTunnelOptions;
  readonly #wss: WebSocketServer;
  /** The subprotocol to answer, per request, read by the 'headers' hook. */
  readonly #answers = new WeakMap<IncomingMessage, string>();
  /** ws handshake refusals, per request (ws then leaves the answer to us). */
  readonly #refusals = new WeakMap<IncomingMessage, (err: Error) => void>();

  constructor(options: StreamTunnelOptions) {
    this.#options = options;
    this.#wss = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      perMessageDeflate: false,
      maxPayload: TUNNEL_MAX_MESSAGE_BYTES,
    });
    // ws refuses `SPDY/3.1+…` as a subprotocol ('/' is not a token character), so the request's
    // header is hidden from it and the answer line is added here instead.
    this.#wss.on('headers', (headers: string[], req: IncomingMessage) => {
      const protocol = this.#answers.get(req);
      if (protocol !== undefined) headers.push(`Sec-WebSocket-Protocol: ${protocol}`);
    });
    this.#wss.on('wsClientError', (err: Error, _socket: Duplex, req: IncomingMessage) => this.#refusals.get(req)?.(err));
  }

  /** The settings this proxy runs with. */
  get options(): Readonly<StreamTunnelOptions> {
    return this.#options;
  }

  /**
   * Tunnel a WebSocket port-forward request whose client socket the caller has hijacked. `head` holds
   * bytes Node read past the request head (WebSocket frames, normally none). Never throws.
   * `recording` (a port-forward record) counts the tunnelled bytes once tunneled; the caller closes
   * it otherwise.
   */
  async tryTunnel(req: IncomingMessage, socket: Duplex, head: Buffer, client: ClientInfo, recording?: BegunRecording): Promise<TunnelOutcome> {
    const protocols = tunneledSpdyProtocols(req.rawHeaders);
    if (protocols.length === 0) {
      const error = new NoTunnelingProtocolError();
      closeAfterAnswer(socket, error.toStatus());
      return { kind: 'error', statusCode: 400, tunnelCode: 400, error };
    }
    // Nothing the client sends is read until the WebSocket is open (the relay resumes it).
    socket.pause();
    const upstream = routeOf(req, this.#options.upstream);
    const exchange = await exchangeUpgradeHead({
      upstream,
      clientSocket: socket,
      timeoutMs: this.#options.responseTimeoutMs,
      ...(this.#options.maxResponseHeadBytes !== undefined ? { maxHeadBytes: this.#options.maxResponseHeadBytes } : {}),
      request: (auth) =>
        requestHeadBytes('POST', upstream.target(req.url ?? '/'), tunnelRequestHeaders(req.rawHeaders, protocols, client, auth, upstream.host)),
    });
    switch (exchange.kind) {
      case 'client-gone':
        return { kind: 'client-gone', statusCode: 499 };
      case 'failed': {
        const status = statusForError(exchange.error);
        closeAfterAnswer(socket, status);
        const code = status.code ?? 500;
        return { kind: 'error', statusCode: code, tunnelCode: code, error: exchange.error };
      }
      case 'answered':
        return this.#answer(req, socket, head, exchange.upstreamSocket, exchange.response, recording);
    }
  }

  #answer(req: IncomingMessage, socket: Duplex, head: Buffer, upstreamSocket: Duplex, response: CompleteResponseHead, recording: BegunRecording | undefined): TunnelOutcome {
    const { statusCode, headers } = response.head;
    if (statusCode === 101) {
      const connectionUpgrade = headers.tokens('connection').includes('upgrade');
      const upgrade = headers.tokens('upgrade');
      if (!connectionUpgrade || !upgrade.includes(SPDY_31.toLowerCase())) {
        upstreamSocket.destroy();
        const error = new UpgradeMismatchError(SPDY_31, connectionUpgrade ? upgrade.join(', ') : '(no Connection: upgrade)');
        closeAfterAnswer(socket, error.toStatus());
        return { kind: 'error', statusCode: 500, tunnelCode: 500, error };
      }
      const protocol = answeredSubprotocol(headers.get(HEADER_PROTOCOL_VERSION), offeredWebSocketProtocols(req.rawHeaders));
      const upgraded = this.#upgradeClient(req, socket, head, protocol);
      if (upgraded instanceof Error) {
        upstreamSocket.destroy();
        return { kind: 'error', statusCode: 400, tunnelCode: 500, error: upgraded };
      }
      const relay = relayTunnel(upgraded, upstreamSocket, response.rest, {
        maxBytesPerSec: this.#options.maxBytesPerSec,
        pingPeriodMs: this.#options.pingPeriodMs ?? 0,
        clientSocket: socket,
        // The tunnel carries the SPDY connection itself: the record reads its stream headers' ports.
        ...(recording ? { observer: relayObserverFor(recording, { kind: 'spdy', subprotocol: 'portforward.k8s.io' }) } : {}),
      });
      const ws = upgraded;
      const goAway = (reason: string): void => ws.close(1001, reason);
      return { kind: 'tunneled', statusCode: 101, tunnelCode: 101, protocol, relay, goAway };
    }
    if (statusCode >= 400) {
      const raw = response.rest.length > 0 ? Buffer.concat([response.headBytes, response.rest]) : response.headBytes;
      relayErrorResponse(socket, upstreamSocket, raw, response, false);
      return { kind: 'forwarded', statusCode, tunnelCode: statusCode };
    }
    upstreamSocket.destroy();
    const error = new InvalidUpgradeResponseError(statusCode);
    const status = error.toStatus();
    closeAfterAnswer(socket, status);
    return { kind: 'error', statusCode: status.code ?? 500, tunnelCode: statusCode, error };
  }

  /**
   * Complete the client's WebSocket handshake (any Origin, as the apiserver's gorilla upgrader). ws
   * validates synchronously: the callback runs, or 'wsClientError' fires and we answer, or the socket
   * was already half-closed and ws destroyed it.
   */
  #upgradeClient(req: IncomingMessage, socket: Duplex, head: Buffer, protocol: string | undefined): WebSocket | Error {
    delete req.headers['sec-websocket-protocol'];
    if (protocol !== undefined) this.#answers.set(req, protocol);
    let result: WebSocket | Error | undefined;
    this.#refusals.set(req, (err) => {
      result = new WebSocketHandshakeError(err.message);
      const code = err.message === 'Invalid HTTP method' ? 405 : 400;
      closeAfterAnswer(socket, errorStatus(code, result.message));
    });
    try {
      this.#wss.handleUpgrade(req, socket, head, (ws) => {
        result = ws;
      });
    } catch (e) {
      result = e instanceof Error ? e : new Error(String(e));
      socket.destroy();
    } finally {
      this.#refusals.delete(req);
      this.#answers.delete(req);
    }
    return result ?? new WebSocketHandshakeError('client connection closed before the handshake completed');
  }
}
