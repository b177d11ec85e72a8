/**
 * StreamTranslatorProxy: WebSocket `v5.channel.k8s.io` exec/attach from the client, SPDY/3.1 to the
 * upstream, after kube-apiserver's `StreamTranslatorHandler` (`apiserver pkg/util/proxy/streamtranslator.go`).
 *
 * Order: FIRST open the upstream SPDY connection and read its answer, as the port-forward tunnel and
 * the UpgradeAwareProxy do (and KubeVirt's virt-api before upgrading its client), so an upstream
 * refusal is the answer to the client's handshake and an unauthenticated client never holds an
 * upgraded socket. THEN upgrade the client (v5 only, initial empty frame), create the SPDY streams and
 * relay. kube-apiserver upgrades first; it cannot do otherwise, as its upstream leg is a client-go
 * executor. Once upgraded, every outcome goes to the client as exactly one Status on channel 3
 * followed by close code 1000:
 *
 * | outcome                                       | answer to the client               | counter code       |
 * |-----------------------------------------------|------------------------------------|--------------------|
 * | upstream refused with ≥ 400 (401, 403, 404, …)| that HTTP answer, verbatim, no 101 | its status code    |
 * | command exited 0                              | Success on channel 3               | 200                |
 * | command exited non-zero                       | the upstream's NonZeroExitCode     | 200                |
 * | another non-101 upstream answer (e.g. 302)    | its Status body on channel 3       | its `code` (0 if unset) |
 * |   … without a Status body                     | InternalError `unable to upgrade…` | 500                |
 * | no upstream answer within the response timeout| 504 Timeout on channel 3           | 504                |
 * | anything else (dial, bad 101, lost upstream…) | InternalError on channel 3         | 500                |
 * | client WebSocket handshake failed             | (HTTP 4xx answer, no WebSocket)    | 400                |
 * | client left before the upstream answered      | (nothing)                          | not counted        |
 * | proxy shutdown after the grace period (`stop`)| 503 ServiceUnavailable on channel 3| 503                |
 *
 * Failures other than a ≥ 400 refusal still upgrade the client and report on channel 3, as before
 * (and as kube-apiserver): kubectl then reports them at once instead of retrying over SPDY.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type ServerOptions, type WebSocket } from 'ws';
import { pairsFromRaw, type ClientInfo } from '../src/wire/forwarded-headers.js';
import { closeAfterAnswer } from '../src/wire/close-after-answer.js';
import { relayErrorResponse } from '../src/wire/relay-error-response.js';
import { ShuttingDownError, UpstreamTimeoutError, UpstreamUpgradeRefusedError } from '../src/errors.js';
import type { ProxyMetrics } from '../src/metrics.js';
import { errorStatus, internalErrorStatus, successStatus, type V1Status } from '../src/status.js';
import { KUBELET_SPDY_REMOTE_COMMAND_PROTOCOLS, StreamProtocolV5Name } from '../src/stream-protocol.js';
import { routeOf, type Route } from '../src/routing/route.js';
import { openUpstreamSpdy, UPSTREAM_SPDY_PING_INTERVAL_MS, type UpstreamSpdyOpening } from '../src/upstream/upstream-spdy.js';
import type { SpdyConnection } from '../src/spdy/index.js';
import { RecordingUnavailableError } from '../src/recording/recording-errors.js';
import type { SessionRecording } from '../src/recording/session-recording.js';
import type { RemoteCommandOutcome } from '../src/wire/error-stream.js';
import type { RemoteCommandOptions } from '../src/wire/remote-command-options.js';
import { openRemoteCommandStreams, type RemoteCommandStreams } from './remote-command-streams.js';
import { runTranslatorSession, type SessionBytes, type SessionLogger } from './translator-session.js';
import { ChannelWebSocket, type InboundMessage, FINISH_CLOSE_DEADLINE_MS, STREAM_IDLE_TIMEOUT_MS, WS_MAX_PAYLOAD_BYTES } from './websocket.js';

/**
 * Protocols offered upstream, one `X-Stream-Protocol-Version` line each: v4, v3, v2, `channel.k8s.io`
 * (what kubectl ≤ 1.28 offers; a kubelet picks v4). v5 is not offered: kubelets do not speak it.
 */
export const UPSTREAM_PROTOCOLS: readonly string[] = KUBELET_SPDY_REMOTE_COMMAND_PROTOCOLS;

/** Settings of a {@link StreamTranslatorProxy}. */
export interface StreamTranslatorOptions {
  upstream: Route;
  metrics: Pick<ProxyMetrics, 'incStreamTranslatorRequest'>;
  /** Per-direction bandwidth limit in bytes per second; 0 = unlimited (`--max-connection-bytes-per-sec`). */
  maxBytesPerSec: number;
  /** Deadline for dialling the upstream and receiving its response head (`--upgrade-response-timeout`). */
  responseTimeoutMs: number;
  /** Default {@link STREAM_IDLE_TIMEOUT_MS}. */
  idleTimeoutMs?: number;
  /** Default {@link FINISH_CLOSE_DEADLINE_MS}. */
  finishDeadlineMs?: number;
  /** Default {@link UPSTREAM_SPDY_PING_INTERVAL_MS}. */
  pingIntervalMs?: number;
}

/** One request to translate. */
export interface TranslateRequest {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  options: RemoteCommandOptions;
  client: ClientInfo;
  log: SessionLogger & { info(obj: object, msg: string): void };
  /**
   * The session's recording (docs/recording.md): created (`upgraded()`) once the upstream said 101 and
   * the client is upgraded, it observes the demultiplexed streams and is closed when the upgraded
   * session ends. The caller abandons it when the upstream never said 101.
   */
  recording?: SessionRecording;
}

/** How a translated request ended. */
export interface TranslatorResult {
  /** The counter code recorded (`apiserver_stream_translator_requests_total{code}`). */
  code: number;
  /** The Status sent on channel 3 (undefined when the WebSocket handshake failed). */
  status?: V1Status;
  bytes: SessionBytes;
  /** What ended the session when it was not the upstream's outcome (dial error, shutdown, …). */
  error?: unknown;
  /** Set when the client side ended it: it left, went idle, or sent a malformed CLOSE. */
  clientEnd?: 'client_gone' | 'idle_timeout' | 'protocol_error';
}

/**
 * A started translation: the handshake's result now, the end of the session later (when upgraded).
 */
export type TranslatorHandle =
  /** The client WebSocket was upgraded; the session runs. */
  | {
      kind: 'upgraded';
      /** Resolves once the session is over and the client socket is closed. */
      done: Promise<TranslatorResult>;
      /**
       * False when the upstream never said 101 (dial error, timeout, a 3xx, a bad 101: told on channel
       * 3); absent or true when it did. The decision's memory turns only on a 101 (handlers/stream-path.ts).
       */
      upstreamUpgraded?: boolean;
      /**
       * End the session now with `reason`'s Status on channel 3 (e.g. {@link ShuttingDownError}), then
       * close 1000. No-op once the outcome is known.
       */
      stop(reason: Error): void;
    }
  /** The upstream's ≥ 400 answer was relayed verbatim as the answer to the client's handshake. */
  | { kind: 'refused'; statusCode: number }
  /** The client's WebSocket handshake was refused (400, 405) with a Status. */
  | { kind: 'handshake-failed'; statusCode: number; message: string }
  /** The client left before the upstream answered; nothing was answered or counted. */
  | { kind: 'client-gone' };

/** Serves translated requests; one instance per server. */
export class StreamTranslatorProxy {
  readonly #options: StreamTranslatorOptions;
  readonly #wss: WebSocketServer;
  /** Handshake refusals by request, reported through `wsClientError`. */
  readonly #refused = new WeakMap<IncomingMessage, (statusCode: number, message: string) => void>();

  constructor(options: StreamTranslatorOptions) {
    this.#options = options;
    const wsOptions: ServerOptions & { closeTimeout: number } = {
      noServer: true,
      clientTracking: false,
      perMessageDeflate: false,
      maxPayload: WS_MAX_PAYLOAD_BYTES,
      // ws destroys the socket this long after sending its close frame; the finish deadline bounds it.
      closeTimeout: options.finishDeadlineMs ?? FINISH_CLOSE_DEADLINE_MS,
      // v5 only; the route predicate already saw it in the first Sec-WebSocket-Protocol line.
      handleProtocols: (offered: Set<string>) => (offered.has(StreamProtocolV5Name) ? StreamProtocolV5Name : false),
    };
    // `closeTimeout` (ws ≥ 8.18) is missing from @types/ws.
    this.#wss = new WebSocketServer(wsOptions);
    this.#wss.on('wsClientError', (err: Error & { code?: string }, socket: Duplex, req: IncomingMessage) => {
      // The same answer ws would write, as a Status (400, or 405 for a non-GET).
      const code = /method/i.test(err.message) ? 405 : 400;
      this.#refused.get(req)?.(code, err.message);
      closeAfterAnswer(socket, errorStatus(code, err.message));
    });
  }

  /**
   * Open the upstream connection, then upgrade the client and run the session. Resolves once the
   * client's handshake is settled; `done` resolves when an upgraded session has ended. Never throws.
   */
  async translate(t: TranslateRequest): Promise<TranslatorHandle> {
    const o = this.#options;
    if ((t.req.headers['sec-websocket-version'] ?? '').trim() !== '13') {
      // gorilla and x/net/websocket accept version 13 only; ws would also take the hybi-08 draft.
      const message = 'Missing or invalid Sec-WebSocket-Version header';
      o.metrics.incStreamTranslatorRequest(400);
      closeAfterAnswer(t.socket, errorStatus(400, message));
      return { kind: 'handshake-failed', statusCode: 400, message };
    }
    // Nothing the client sends is read until its WebSocket is open (ws resumes the socket then).
    t.socket.pause();
    const opening = await openUpstreamSpdy({
      upstream: routeOf(t.req, o.upstream),
      url: t.req.url ?? '/',
      clientHeaders: pairsFromRaw(t.req.rawHeaders),
      client: t.client,
      protocols: UPSTREAM_PROTOCOLS,
      responseTimeoutMs: o.responseTimeoutMs,
      pingIntervalMs: o.pingIntervalMs ?? UPSTREAM_SPDY_PING_INTERVAL_MS,
      clientSocket: t.socket,
      logger: spdyLoggerOf(t.log),
    });
    if (opening.kind === 'client-gone') return opening;
    if (opening.kind === 'refused') {
      const { upstreamSocket, response } = opening;
      const raw = response.rest.length > 0 ? Buffer.concat([response.headBytes, response.rest]) : response.headBytes;
      relayErrorResponse(t.socket, upstreamSocket, raw, response, false);
      o.metrics.incStreamTranslatorRequest(response.head.statusCode);
      return { kind: 'refused', statusCode: response.head.statusCode };
    }
    const upgraded = this.#upgradeClient(t);
    if (upgraded.kind === 'handshake-failed') {
      if (opening.kind === 'upgraded') opening.session.connection.destroy();
      o.metrics.incStreamTranslatorRequest(400);
      return upgraded;
    }
    // The running session keeps only what it uses: not the request, its socket and head (ws owns the
    // socket now), nor the upstream's 101 head (docs/benchmarks.md, "Idle sessions").
    const upstream: UpstreamLeg = opening.kind === 'upgraded' ? { connection: opening.session.connection, protocol: opening.session.protocol } : { error: opening.error };
    const stopper = new SessionStopper();
    // Both handshakes are done: the session's recording is created on the sink now, not before.
    if (opening.kind === 'upgraded') t.recording?.upgraded();
    return {
      kind: 'upgraded',
      done: this.#run(t.options, t.log, upgraded.ws, upstream, stopper, t.recording),
      upstreamUpgraded: opening.kind === 'upgraded',
      stop: (reason: Error) => stopper.stop(reason),
    };
  }

  /**
   * Complete the client's WebSocket handshake. ws validates synchronously: the callback runs, or
   * 'wsClientError' fires and the refusal is answered, or the socket was already gone.
   */
  #upgradeClient(t: TranslateRequest): { kind: 'upgraded'; ws: WebSocket } | Extract<TranslatorHandle, { kind: 'handshake-failed' }> {
    let result: { kind: 'upgraded'; ws: WebSocket } | Extract<TranslatorHandle, { kind: 'handshake-failed' }> | undefined;
    this.#refused.set(t.req, (statusCode, message) => (result = { kind: 'handshake-failed', statusCode, message }));
    try {
      this.#wss.handleUpgrade(t.req, t.socket, t.head, (ws: WebSocket) => (result = { kind: 'upgraded', ws }));
    } catch (e) {
      t.socket.destroy();
      result = { kind: 'handshake-failed', statusCode: 400, message: e instanceof Error ? e.message : String(e) };
    } finally {
      this.#refused.delete(t.req);
    }
    return result ?? { kind: 'handshake-failed', statusCode: 400, message: 'client connection closed before the handshake completed' };
  }

  async #run(
    options: RemoteCommandOptions,
    log: TranslateRequest['log'],
    rawWs: WebSocket,
    upstream: UpstreamLeg,
    stopper: SessionStopper,
    recording: SessionRecording | undefined,
  ): Promise<TranslatorResult> {
    const o = this.#options;
    // An enforced recording that fails ends the session with its Status (statusOfError).
    recording?.fatal.addEventListener('abort', () => stopper.stop(recording.fatal.reason));
    const bytes: SessionBytes = { toUpstream: 0, toClient: 0 };
    const ws = new ChannelWebSocket(rawWs, {
      ...(o.idleTimeoutMs !== undefined ? { idleTimeoutMs: o.idleTimeoutMs } : {}),
      ...(o.finishDeadlineMs !== undefined ? { finishDeadlineMs: o.finishDeadlineMs } : {}),
    });
    ws.sendInitialFrame(options.stdout, options.stderr);
    // Nothing is read from the client until the upstream streams exist; what was already read waits here.
    ws.pauseInbound('upstream');
    const backlog: InboundMessage[] = [];
    const queue = (m: InboundMessage): void => void backlog.push(m);
    ws.on('message', queue);

    let result: TranslatorResult | undefined;
    let clientEnd: TranslatorResult['clientEnd'];
    const settle = (status: V1Status, code: number, error?: unknown): TranslatorResult => {
      if (!result) {
        result = { code, status, bytes };
        if (error !== undefined) result.error = error;
        if (clientEnd !== undefined) result.clientEnd = clientEnd;
        o.metrics.incStreamTranslatorRequest(code);
      }
      return result;
    };
    // Each of these is handled once (the stopper also ignores all but the first reason): plain
    // listeners with a guard, no `once` wrappers.
    let protocolError = false;
    ws.on('protocol-error', (err: Error) => {
      if (protocolError) return;
      protocolError = true;
      log.warn({ err }, 'malformed v5 CLOSE message; connection dropped');
      clientEnd ??= 'protocol_error';
      settle(internalErrorStatus(err.message), 500, err);
      stopper.stop(err);
    });
    // ws could not read the client (a frame over the payload limit, too many fragments, bad UTF-8,
    // a bad opcode): ws sent its close frame and the client socket goes within a second; the
    // upstream streams are reset and its connection closed now, not after the finish deadline.
    ws.on('receive-error', (err: Error) => {
      if (protocolError) return;
      protocolError = true;
      log.warn({ err }, 'WebSocket protocol error from the client; session ended');
      clientEnd ??= 'protocol_error';
      settle(internalErrorStatus(err.message), 500, err);
      stopper.stop(err);
    });
    ws.on('idle', () => {
      if (stopper.stopped) return;
      log.info({}, 'translated session idle timeout');
      clientEnd = 'idle_timeout';
      stopper.stop(new Error('stream idle timeout'));
    });
    ws.on('close', () => {
      if (stopper.stopped) return;
      clientEnd = 'client_gone';
      stopper.stop(new Error('client closed the connection'));
    });

    let connection: SpdyConnection | undefined;
    let outcome: { status: V1Status; code: number };
    let failure: unknown;
    let streams: RemoteCommandStreams | undefined;
    try {
      // An upstream failure before the upgrade (dial, timeout, bad 101) is reported here, on channel 3.
      if (!('connection' in upstream)) throw upstream.error;
      connection = upstream.connection;
      // The client leaving (or the idle timeout) ends the session at any point. The upstream closing
      // its connection does not by itself: after writing the status it does exactly that, possibly
      // while our stdout still holds data; the streams tell whether they were complete.
      streams = await stopper.race(openRemoteCommandStreams(connection, upstream.protocol, options));
      ws.off('message', queue);
      const running = runTranslatorSession(
        { ws, connection, protocol: upstream.protocol, streams, options, maxBytesPerSec: o.maxBytesPerSec, log, ...(recording ? { observer: recording } : {}) },
        backlog,
        bytes,
      );
      backlog.length = 0;
      ws.resumeInbound('upstream');
      const decoded = await stopper.race(running);
      if (recording) recording.exit(decoded.kind === 'error' ? { error: decoded.message } : { exitCode: decoded.kind === 'exit' ? decoded.exitCode : 0 });
      outcome = statusOf(decoded);
    } catch (e) {
      ws.off('message', queue);
      failure = e;
      outcome = statusOfError(e);
      // The recording ends with what the client was told (the upstream failed, the client left, …).
      recording?.exit({ error: outcome.status.message ?? `failure (${outcome.code})` });
    }
    settle(outcome.status, outcome.code, failure);
    // A session cut short (client gone, idle timeout, malformed CLOSE, shutdown) abandons the upstream
    // command: RST_STREAM every stream so the kubelet stops it now, not when the connection is gone.
    // (After an upstream failure the streams are already destroyed and this does nothing.)
    if (failure !== undefined && streams) {
      for (const s of [streams.stdin, streams.stdout, streams.stderr, streams.resize, streams.error]) s?.reset();
    }
    // The upstream has said all it will; end our side of it (GOAWAY, FIN) and let it close.
    const closing = connection && !connection.closed ? connection.close() : undefined;
    await ws.finish(result!.status!);
    recording?.close(bytes);
    // Let the frames just queued (RST_STREAMs, GOAWAY) leave before the socket is dropped: the SPDY
    // writer batches a turn's frames, and destroy() would discard them (the upstream would only see
    // the connection vanish). Bounded: an upstream that stopped reading gets cut.
    if (closing) await settleWithin(closing, UPSTREAM_CLOSE_DEADLINE_MS);
    connection?.destroy();
    return result!;
  }
}

/** The upstream side of an upgraded session: the SPDY connection, or why there is none. */
type UpstreamLeg = { connection: SpdyConnection; protocol: string } | { error: unknown };

/**
 * How a session is stopped (the client left, went idle or broke the protocol; shutdown): the first
 * reason wins, and what the session awaits rejects with it. Replaces an AbortController (~1 KiB
 * with its signal's listener maps, per idle session) and a per-session "aborted" promise: at most
 * one waiter is registered at a time.
 */
class SessionStopper {
  #reason: unknown;
  #stopped = false;
  #waiter: ((reason: unknown) => void) | undefined;

  /** True once {@link stop} ran. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Stop with `reason` (later calls are ignored). */
  stop(reason: unknown): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#reason = reason;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.(reason);
  }

  /** `p`'s result, or a rejection with the stop reason if stopped first (or already). */
  race<T>(p: Promise<T>): Promise<T> {
    if (this.#stopped) {
      p.catch(() => {});
      return Promise.reject(this.#reason);
    }
    return new Promise<T>((resolve, reject) => {
      this.#waiter = reject;
      p.then(
        (v) => {
          this.#waiter = undefined;
          resolve(v);
        },
        (e: unknown) => {
          this.#waiter = undefined;
          reject(e);
        },
      );
    });
  }
}

/** The SPDY connection's logger: a closure over the request's logger only (not the translate call). */
function spdyLoggerOf(log: TranslateRequest['log']): { warn(msg: string): void } {
  return { warn: (msg: string) => log.warn({}, msg) };
}

/** How long the upstream connection may take to flush our last frames (GOAWAY, resets) and end. */
export const UPSTREAM_CLOSE_DEADLINE_MS = 1_000;

/** Resolves when `p` settles or after `ms`, whichever is first. */
function settleWithin(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    void p.then(
      () => (clearTimeout(timer), resolve()),
      () => (clearTimeout(timer), resolve()),
    );
  });
}

/** The Status and counter code for a decoded outcome. */
export function statusOf(outcome: RemoteCommandOutcome): { status: V1Status; code: number } {
  switch (outcome.kind) {
    case 'success':
      return { status: successStatus(), code: 200 };
    case 'exit':
      return { status: outcome.status, code: 200 };
    case 'error':
      return { status: internalErrorStatus(outcome.message), code: 500 };
  }
}

/** The Status and counter code for a failure before or during the session. */
export function statusOfError(e: unknown): { status: V1Status; code: number } {
  if (e instanceof UpstreamUpgradeRefusedError && e.isUpstreamStatus) {
    return { status: e.status, code: e.status.code ?? 0 };
  }
  if (e instanceof ShuttingDownError) {
    const { kind: _kind, apiVersion: _apiVersion, ...status } = e.toStatus();
    return { status, code: 503 };
  }
  if (e instanceof RecordingUnavailableError) {
    // An enforced recording failed mid-session: 503 "session recording unavailable".
    const { kind: _kind, apiVersion: _apiVersion, ...status } = e.toStatus();
    return { status, code: 503 };
  }
  if (e instanceof UpstreamTimeoutError) {
    // A silent upstream is 504 Timeout on every path (the passthrough and the tunnel answer it as HTTP).
    const { kind: _kind, apiVersion: _apiVersion, ...status } = e.toStatus();
    return { status, code: 504 };
  }
  return { status: internalErrorStatus(e instanceof Error ? e.message : String(e)), code: 500 };
}
