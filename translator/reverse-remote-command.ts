/**
 * ReverseStreamTranslatorProxy: a SPDY/3.1 exec/attach client (kubectl ≤ 1.29,
 * `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`, every SPDY library) in front of an upstream that refuses
 * SPDY and speaks only WebSocket `v5.channel.k8s.io` (gateways; the direction KEP-4006 ends in). The
 * mirror of the StreamTranslatorProxy: this proxy plays the kubelet toward the client and kubectl
 * ≥ 1.30 toward the upstream. No Kubernetes component does this; the decision to try it (after the
 * upstream refused the client's own SPDY upgrade before its 101) is made in handlers/stream-path.ts.
 *
 * Order, as the forward translator: FIRST negotiate the client's protocol (v4…v1, as a kubelet; a
 * refusal is answered at once), THEN dial the upstream with a WebSocket upgrade offering v5 then v4
 * (the head written through the one serializer, translator/reverse-upstream-websocket.ts), and only on
 * its checked 101 answer the client's SPDY upgrade with 101; the client's bytes held so far (SPDY
 * frames) are read only then, by the server-role SPDY connection. Then translator/reverse-session.ts
 * relays until the upstream's Status and close, and ends the client's session as a kubelet does.
 *
 * | outcome                                         | answer to the SPDY client                     | counter code |
 * |-------------------------------------------------|-----------------------------------------------|--------------|
 * | no common protocol / no version / not SPDY      | 403 / 400 Status, no upstream dial            | 403 / 400    |
 * | upstream refused with ≥ 400 (401, 403, 404, …)  | that HTTP answer, verbatim, no 101            | its status   |
 * | upstream unreachable, timeout, bad 101, a 3xx   | a Status (503, 504, 500), no 101              | its code     |
 * | command exited 0                                | Success on the error stream                   | 200          |
 * | command exited non-zero                         | the upstream's NonZeroExitCode Status         | 200          |
 * | the upstream's error Status / connection lost   | that Status / InternalError                   | 500          |
 * | client left, idle timeout                       | (InternalError, if it is still there)         | 500          |
 * | proxy shutdown (`stop`), enforced recording lost| 503 on the error stream                       | 503          |
 * | client left before the upstream answered        | (nothing)                                     | not counted  |
 *
 * On v1–v3 the error stream carries the message as text (nothing on success), as the kubelet writes it.
 */
import { statusForError } from '../src/errors.js';
import { UPSTREAM_SPDY_PING_INTERVAL_MS } from '../src/upstream/upstream-spdy.js';
import { routeOf } from '../src/routing/route.js';
import { SpdyConnection } from '../src/spdy/index.js';
import { StreamProtocolV4Name, StreamProtocolV5Name } from '../src/stream-protocol.js';
import { closeAfterAnswer } from '../src/wire/close-after-answer.js';
import { pairsFromRaw } from '../src/wire/forwarded-headers.js';
import { answerRefusal, CLIENT_SPDY_PROTOCOLS, negotiateClientProtocol, switchingProtocolsHead } from './reverse-spdy-server.js';
import { ReverseSession } from './reverse-session.js';
import { openUpstreamWebSocket, relayRefusal } from './reverse-upstream-websocket.js';
import { UpstreamWebSocket } from './reverse-websocket.js';
import { UPSTREAM_CLOSE_DEADLINE_MS, type StreamTranslatorOptions, type TranslateRequest, type TranslatorHandle } from './stream-translator.js';
import { FINISH_CLOSE_DEADLINE_MS, STREAM_IDLE_TIMEOUT_MS, WS_MAX_PAYLOAD_BYTES } from './websocket.js';

/**
 * Subprotocols offered upstream, in this order: v5 (stdin EOF as CLOSE), then v4 (everything but the
 * stdin EOF: see translator/reverse-session.ts).
 */
export const REVERSE_UPSTREAM_PROTOCOLS: readonly string[] = [StreamProtocolV5Name, StreamProtocolV4Name];

/** Serves reverse-translated requests; one instance per server. Same options, request and handle as the StreamTranslatorProxy. */
export class ReverseStreamTranslatorProxy {
  readonly #options: StreamTranslatorOptions;

  constructor(options: StreamTranslatorOptions) {
    this.#options = options;
  }

  /**
   * Negotiate with the client, open the upstream WebSocket, then upgrade the client and run the
   * session. Resolves once the client's handshake is settled; `done` when an upgraded session has
   * ended. Never throws.
   */
  async translate(t: TranslateRequest): Promise<TranslatorHandle> {
    const o = this.#options;
    const negotiated = negotiateClientProtocol(t.req, CLIENT_SPDY_PROTOCOLS);
    if (!('protocol' in negotiated)) {
      const statusCode = negotiated.status.code ?? 400;
      o.metrics.incStreamTranslatorRequest(statusCode);
      answerRefusal(t.socket, negotiated);
      return { kind: 'handshake-failed', statusCode, message: negotiated.status.message ?? '' };
    }
    // Nothing the client sends is read until the upstream has said 101 (its bytes are SPDY frames).
    t.socket.pause();
    const upstream = routeOf(t.req, o.upstream);
    const opening = await openUpstreamWebSocket({
      upstream,
      url: t.req.url ?? '/',
      clientHeaders: pairsFromRaw(t.req.rawHeaders),
      client: t.client,
      protocols: REVERSE_UPSTREAM_PROTOCOLS,
      responseTimeoutMs: o.responseTimeoutMs,
      clientSocket: t.socket,
    });
    switch (opening.kind) {
      case 'client-gone':
        return opening;
      case 'refused': {
        const statusCode = relayRefusal(t.socket, opening);
        o.metrics.incStreamTranslatorRequest(statusCode);
        return { kind: 'refused', statusCode };
      }
      case 'failed': {
        // The client is not upgraded yet: the failure is the answer to its handshake (kubectl prints it).
        const status = statusForError(opening.error);
        const statusCode = status.code ?? 500;
        o.metrics.incStreamTranslatorRequest(statusCode);
        closeAfterAnswer(t.socket, status);
        return { kind: 'handshake-failed', statusCode, message: status.message ?? '' };
      }
      case 'upgraded':
        break;
    }
    if (t.socket.destroyed) {
      opening.socket.destroy();
      return { kind: 'client-gone' };
    }
    t.socket.write(switchingProtocolsHead(negotiated.protocol));
    const ws = UpstreamWebSocket.over(opening.socket, opening.head, { maxPayload: WS_MAX_PAYLOAD_BYTES, closeTimeoutMs: UPSTREAM_CLOSE_DEADLINE_MS });
    const connection = new SpdyConnection(t.socket, { isServer: true, head: t.head, logger: spdyLoggerOf(t.log) });
    t.socket.resume();
    const session = new ReverseSession({
      connection,
      clientSocket: t.socket,
      clientProtocol: negotiated.protocol,
      ws,
      upstreamSocket: opening.socket,
      upstreamProtocol: opening.protocol,
      options: t.options,
      maxBytesPerSec: o.maxBytesPerSec,
      idleTimeoutMs: o.idleTimeoutMs ?? STREAM_IDLE_TIMEOUT_MS,
      // The forward translator's 5 s toward the upstream; kubectl's WebSocket executor pings as often.
      pingIntervalMs: o.pingIntervalMs ?? UPSTREAM_SPDY_PING_INTERVAL_MS,
      finishDeadlineMs: o.finishDeadlineMs ?? FINISH_CLOSE_DEADLINE_MS,
      log: t.log,
      ...(t.recording ? { observer: t.recording } : {}),
    });
    // Both handshakes are done: the session's recording is created on the sink now, not before.
    const recording = t.recording;
    if (recording) {
      recording.upgraded();
      // An enforced recording that fails ends the session with its Status (503).
      recording.fatal.addEventListener('abort', () => session.stop(recording.fatal.reason as Error));
    }
    const done = session.done.then((result) => {
      o.metrics.incStreamTranslatorRequest(result.code);
      return result;
    });
    return { kind: 'upgraded', done, stop: (reason: Error) => session.stop(reason) };
  }
}

/** The SPDY connection's logger: a closure over the request's logger only. */
function spdyLoggerOf(log: TranslateRequest['log']): { warn(msg: string): void } {
  return { warn: (msg: string) => log.warn({}, msg) };
}
