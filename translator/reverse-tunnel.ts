/**
 * ReverseStreamTunnelProxy: a SPDY/3.1 port-forward client (`portforward.k8s.io`: kubectl ≤ 1.30,
 * `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`, every SPDY library) in front of an upstream that refuses
 * SPDY and takes only the WebSocket tunnel `SPDY/3.1+portforward.k8s.io` (KEP-4006). The mirror of the
 * StreamTunnelProxy: the client's SPDY bytes go upstream inside binary messages, the upstream's
 * messages' payloads go to the client as bytes; SPDY is never parsed, so the session is the client's
 * and the kubelet's, byte for byte (pings, streams, GOAWAY included).
 *
 * Order: negotiate with the client first (the only protocol is `portforward.k8s.io`, as the
 * kubelet's; a refusal is answered at once), then dial the upstream with the tunnel's WebSocket
 * upgrade (translator/reverse-upstream-websocket.ts, the head through the one serializer), and only
 * on its checked 101 answer the client's upgrade with 101; the client's early bytes go upstream only
 * then. An upstream ≥ 400 is relayed verbatim; no answer, a bad 101 or a 3xx is our Status.
 *
 * The data phase is the forward tunnel's relay (translator/stream-tunnel-relay.ts) with the roles
 * turned around: its WebSocket is the upstream one (client role, frames masked in place) and its
 * byte stream is the client's socket; the outcome and the recording see the roles as they are. An
 * upstream close 1000 (its EOF) flushes everything it sent to the client before the client's
 * connection ends.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { FLUSH_DEADLINE_MS } from '../proxy/splice.js';
import { statusForError } from '../src/errors.js';
import type { RelayObserver, RelayedBytes } from '../src/recording/observer.js';
import { relayObserverFor } from '../src/recording/relay-observer.js';
import type { BegunRecording } from '../src/recording/session-recorder.js';
import { routeOf } from '../src/routing/route.js';
import { PortForwardProtocolV1Name } from '../src/stream-protocol.js';
import { closeAfterAnswer } from '../src/wire/close-after-answer.js';
import { pairsFromRaw, type ClientInfo } from '../src/wire/forwarded-headers.js';
import { answerRefusal, negotiateClientProtocol, switchingProtocolsHead } from './reverse-spdy-server.js';
import { openUpstreamWebSocket, relayRefusal } from './reverse-upstream-websocket.js';
import { UpstreamWebSocket } from './reverse-websocket.js';
import { TUNNEL_MAX_MESSAGE_BYTES, type StreamTunnelOptions, type TunnelOutcome } from './stream-tunnel.js';
import { TUNNELING_PORT_FORWARD_PROTOCOL } from './stream-tunnel-protocol.js';
import { relayTunnel, type TunnelEnd, type TunnelRelay } from './stream-tunnel-relay.js';

/** Tunnels reverse port-forward requests; one instance serves the whole server. */
export class ReverseStreamTunnelProxy {
  readonly #options: StreamTunnelOptions;

  constructor(options: StreamTunnelOptions) {
    this.#options = options;
  }

  /** The settings this proxy runs with. */
  get options(): Readonly<StreamTunnelOptions> {
    return this.#options;
  }

  /**
   * Tunnel a SPDY port-forward request whose client socket the caller has hijacked (nothing written
   * yet). `head` holds the client's bytes read past its request head (SPDY frames). Never throws.
   * `recording` (a port-forward record) counts the tunnelled bytes once tunneled; the caller closes
   * it otherwise. `tunnelCode` is the tunnel counter's label: 101, the upstream's status, or ours.
   */
  async tryTunnel(req: IncomingMessage, socket: Duplex, head: Buffer, client: ClientInfo, recording?: BegunRecording): Promise<TunnelOutcome> {
    const negotiated = negotiateClientProtocol(req, [PortForwardProtocolV1Name]);
    if (!('protocol' in negotiated)) {
      const statusCode = negotiated.status.code ?? 400;
      answerRefusal(socket, negotiated);
      return { kind: 'error', statusCode, tunnelCode: statusCode, error: new Error(negotiated.status.message) };
    }
    // Nothing the client sends is read until the upstream has said 101 (the relay resumes it).
    socket.pause();
    const o = this.#options;
    const opening = await openUpstreamWebSocket({
      upstream: routeOf(req, o.upstream),
      url: req.url ?? '/',
      clientHeaders: pairsFromRaw(req.rawHeaders),
      client,
      protocols: [TUNNELING_PORT_FORWARD_PROTOCOL],
      responseTimeoutMs: o.responseTimeoutMs,
      ...(o.maxResponseHeadBytes !== undefined ? { maxResponseHeadBytes: o.maxResponseHeadBytes } : {}),
      clientSocket: socket,
    });
    switch (opening.kind) {
      case 'client-gone':
        return { kind: 'client-gone', statusCode: 499 };
      case 'refused': {
        const statusCode = relayRefusal(socket, opening);
        return { kind: 'forwarded', statusCode, tunnelCode: statusCode };
      }
      case 'failed': {
        const status = statusForError(opening.error);
        closeAfterAnswer(socket, status);
        const code = status.code ?? 500;
        return { kind: 'error', statusCode: code, tunnelCode: code, error: opening.error };
      }
      case 'upgraded':
        break;
    }
    if (socket.destroyed) {
      opening.socket.destroy();
      return { kind: 'client-gone', statusCode: 499 };
    }
    socket.write(switchingProtocolsHead(negotiated.protocol));
    const ws = UpstreamWebSocket.over(opening.socket, opening.head, { maxPayload: TUNNEL_MAX_MESSAGE_BYTES, closeTimeoutMs: FLUSH_DEADLINE_MS });
    // The relay's WebSocket side is the upstream here, its byte side the client.
    const relay = relayTunnel(ws, socket, head, {
      maxBytesPerSec: o.maxBytesPerSec,
      pingPeriodMs: o.pingPeriodMs ?? 0,
      clientSocket: opening.socket,
      ...(recording ? { observer: reversedObserver(relayObserverFor(recording, { kind: 'spdy', subprotocol: PortForwardProtocolV1Name })) } : {}),
    });
    const goAway = (reason: string): void => ws.close(1001, reason);
    return { kind: 'tunneled', statusCode: 101, tunnelCode: 101, protocol: negotiated.protocol, relay: reversedRelay(relay), goAway };
  }
}

/** `bytes` with the directions exchanged. */
function swapped(bytes: RelayedBytes): RelayedBytes {
  return { toUpstream: bytes.toClient, toClient: bytes.toUpstream };
}

/** The relay as the caller sees it: the client is the SPDY side (`closeCode` is then the upstream's). */
function reversedRelay(relay: TunnelRelay): TunnelRelay {
  return {
    done: relay.done.then((end): TunnelEnd => ({ ...end, side: end.side === 'client' ? 'upstream' : 'client' })),
    get bytes() {
      return swapped(relay.bytes);
    },
  };
}

/**
 * The recording's observer with the relay's directions turned back (it reads the client's SPDY
 * frames). The client's chunks are handed over as copies: the relay masks each chunk in place right
 * after this call, and the SPDY tap keeps views of what it has not parsed yet (an incomplete frame, a
 * header block still being inflated). A copy per chunk only while a port-forward is recorded.
 */
function reversedObserver(o: RelayObserver): RelayObserver {
  return {
    get fatal() {
      return o.fatal;
    },
    fromClient: (chunk) => o.fromUpstream(chunk),
    fromUpstream: (chunk) => o.fromClient(Buffer.from(chunk)),
    close: (bytes) => o.close(bytes && swapped(bytes)),
    terminate: (status) => o.terminate(status),
  };
}
