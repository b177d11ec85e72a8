/**
 * The local paths of pods/exec and pods/attach (an {@link UpgradeDelegate}): the StreamTranslatorProxy
 * (WebSocket v5 client, SPDY upstream), as kube-apiserver's `NewTranslatingHandler` does for
 * `TranslateStreamCloseWebsocketRequests`, and the ReverseStreamTranslatorProxy (SPDY client, v5
 * upstream, for an upstream that refuses SPDY). Which one runs, and when, is decided in
 * handlers/stream-path.ts. Before the hijack, a bad query is answered as a plain HTTP Status (a failed
 * handshake to a WebSocket client, which makes kubectl retry over SPDY).
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { clientInfo, perServer, type HandlerDeps } from './handler-deps.js';
import type { LocalStreamPath, UpgradeDelegate } from './pod-subresource.js';
import { sendStatus } from '../src/wire/status-reply.js';
import { closeAfterAnswer } from '../src/wire/close-after-answer.js';
import type { UpgradeContext } from './upgrade-context.js';
import { ShuttingDownError, UpstreamUpgradeRefusedError } from '../src/errors.js';
import type { HandlerLabel } from '../src/metrics.js';
import { StreamProtocolV5Name } from '../src/stream-protocol.js';
import { dialErrorReason, type SessionEnd, type StreamingSession } from '../src/streaming-sessions.js';
import { parseRemoteCommandOptions } from '../src/wire/remote-command-options.js';
import { StreamTranslatorProxy, type StreamTranslatorOptions, type TranslateRequest, type TranslatorHandle, type TranslatorResult } from '../translator/stream-translator.js';
import { ReverseStreamTranslatorProxy } from '../translator/reverse-remote-command.js';
import { abandonRecording } from './recording-start.js';
import { SessionRecording } from '../src/recording/session-recording.js';

/** What both translators offer. */
interface Translator {
  translate(t: TranslateRequest): Promise<TranslatorHandle>;
}

/** The translators' settings from the server's deps. */
function translatorOptions(deps: HandlerDeps, metrics: StreamTranslatorOptions['metrics']): StreamTranslatorOptions {
  return { upstream: deps.upstream, metrics, maxBytesPerSec: deps.maxConnectionBytesPerSec, responseTimeoutMs: deps.upgradeResponseTimeoutMs };
}

/**
 * The reverse translator's counter: none. `apiserver_stream_translator_requests_total` keeps
 * kube-apiserver's meaning (WebSocket v5 sessions translated here); reverse-translated sessions are
 * counted by `kube_stream_proxy_streaming_requests_total{path="reverse_translated"}`.
 */
const NOT_COUNTED: StreamTranslatorOptions['metrics'] = { incStreamTranslatorRequest: () => undefined };

/** The one reverse translator of a server (created on first use from its deps). */
export const reverseTranslatorFor = perServer((deps) => new ReverseStreamTranslatorProxy(translatorOptions(deps, NOT_COUNTED)));

/** The one translator of a server (created on first use from its deps). */
export const translatorFor = perServer((deps) => new StreamTranslatorProxy(translatorOptions(deps, deps.metrics)));

/** The exit code carried by a Status on channel 3: 0 for Success, the `ExitCode` cause for NonZeroExitCode. */
export function exitCodeOf(r: TranslatorResult): number | null {
  if (r.status?.status === 'Success') return 0;
  if (r.status?.reason !== 'NonZeroExitCode') return null;
  const cause = r.status.details?.causes?.find((c) => c.reason === 'ExitCode');
  const n = Number(cause?.message);
  return Number.isInteger(n) && n >= 0 ? n : null;
}

/** How a translated session's result is recorded (outcome, exit code, failure reason). */
export function translatorSessionEnd(r: TranslatorResult): SessionEnd {
  const exitCode = exitCodeOf(r);
  const end: SessionEnd = { outcome: 'error', statusCode: 101, bytes: r.bytes, exitCode, error: r.error };
  if (r.status?.status === 'Failure' && r.status.message !== undefined) end.message = r.status.message;
  if (exitCode === 0) end.outcome = 'success';
  else if (exitCode !== null) end.outcome = 'nonzero_exit';
  else if (r.error instanceof ShuttingDownError) end.outcome = 'shutdown';
  else if (r.error instanceof UpstreamUpgradeRefusedError) end.outcome = 'upstream_refused';
  else if (dialErrorReason(r.error)) end.outcome = 'upstream_unreachable';
  else if (r.clientEnd === 'client_gone') end.outcome = 'client_gone';
  else if (r.clientEnd !== undefined) end.websocketFailure = r.clientEnd;
  return end;
}

/**
 * Record the end of an upgraded session. Its own function, so the callback's closure holds the
 * logger and the session only, not the request and reply of the `serve` call.
 */
function whenTranslatedSessionEnds(done: Promise<TranslatorResult>, handler: HandlerLabel, deps: HandlerDeps, log: FastifyRequest['log'], session: StreamingSession, recording: SessionRecording | undefined): void {
  void done.then((r) => {
    // The client was upgraded but the upstream never said 101 (dial error, timeout, a non-101
    // answer told on channel 3): its recording was never created.
    if (recording && !recording.created) abandonRecording(recording, r.code, session);
    deps.metrics.addUpgradedConnections(handler, -1);
    deps.metrics.addUpgradedBytes('to_upstream', r.bytes.toUpstream);
    deps.metrics.addUpgradedBytes('to_client', r.bytes.toClient);
    log.info({ handler, code: r.code, ...r.bytes }, 'translated connection closed');
    session.end(translatorSessionEnd(r));
  });
}

/**
 * One translator as a local path. `reverse`: the client speaks SPDY (its handshake answered by the
 * reverse translator), else WebSocket v5. Before the hijack (the path tried first) a bad query gets its
 * 400 Status; after a refused passthrough the decision planned this path only for a good query.
 */
function translatorPath(handler: HandlerLabel & ('exec' | 'attach'), reverse: boolean): LocalStreamPath {
  const translatorOf = (deps: HandlerDeps): Translator => (reverse ? reverseTranslatorFor(deps) : translatorFor(deps));
  return {
    async serve(request, reply: FastifyReply, upgrade: UpgradeContext, deps: HandlerDeps, session: StreamingSession, begun?) {
      const query = new URL(request.raw.url ?? '/', 'http://request.invalid').searchParams;
      const parsed = parseRemoteCommandOptions(query);
      const recording = begun instanceof SessionRecording ? begun : undefined;
      if (!parsed.ok) {
        const code = parsed.status.code ?? 400;
        abandonRecording(recording, code, session);
        session.end({ outcome: 'handshake_failed', statusCode: code, ...(parsed.status.message !== undefined ? { message: parsed.status.message } : {}) });
        if (reply.sent) closeAfterAnswer(upgrade.socket, parsed.status);
        else sendStatus(reply, parsed.status);
        return { upstreamUpgraded: false };
      }
      reply.hijack();
      const handle = await translatorOf(deps).translate({
        req: request.raw,
        socket: upgrade.socket,
        head: upgrade.head,
        options: parsed.value,
        client: clientInfo(request.raw, deps.proto),
        log: request.log,
        ...(recording ? { recording } : {}),
      });
      // The translator calls `upgraded()` on the recording once the upstream's 101 is in (and the client's handshake done).
      if (handle.kind !== 'upgraded') abandonRecording(recording, handle.kind === 'client-gone' ? 499 : handle.statusCode, session);
      switch (handle.kind) {
        case 'refused':
          deps.metrics.incUpgradeRequest(handler, handle.statusCode);
          request.log.info({ handler, statusCode: handle.statusCode, reverse }, 'upstream refused the translated session; answer relayed');
          session.end({ outcome: 'upstream_refused', statusCode: handle.statusCode });
          return { upstreamUpgraded: false };
        case 'handshake-failed':
          deps.metrics.incUpgradeRequest(handler, handle.statusCode);
          request.log.info({ handler, reverse }, reverse ? 'SPDY handshake refused' : 'WebSocket handshake refused');
          session.end({ outcome: 'handshake_failed', statusCode: handle.statusCode, message: handle.message });
          return { upstreamUpgraded: false };
        case 'client-gone':
          request.log.info({ handler }, 'client left before the upstream answered');
          session.end({ outcome: 'client_gone', statusCode: 499 });
          return { upstreamUpgraded: false };
        case 'upgraded':
          break;
      }
      deps.metrics.incUpgradeRequest(handler, 101);
      deps.metrics.addUpgradedConnections(handler, 1);
      // The socket is the WebSocket's now: the ServerResponse the upgrade was routed with (and with it
      // the IncomingMessage, Fastify's request and reply and their listeners) need not live as long as
      // the session does (docs/benchmarks.md, "Idle sessions").
      const res = reply.raw as ServerResponse & { socket: unknown };
      if (res.socket === upgrade.socket) res.detachSocket(upgrade.socket as Socket);
      session.established(() => handle.stop(new ShuttingDownError()), reverse ? undefined : StreamProtocolV5Name);
      request.log.info({ handler, translated: true, reverse }, 'translated connection started');
      whenTranslatedSessionEnds(handle.done, handler, deps, request.log, session, recording);
      return { upstreamUpgraded: handle.upstreamUpgraded !== false };
    },
  };
}

/** The local paths of `pods/exec` or `pods/attach`: the translator and the reverse translator. */
export function streamTranslatorDelegate(handler: HandlerLabel & ('exec' | 'attach')): UpgradeDelegate {
  return { forward: translatorPath(handler, false), reverse: translatorPath(handler, true) };
}
