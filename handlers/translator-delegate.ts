/**
 * The {@link UpgradeDelegate} that takes WebSocket v5 exec/attach off the passthrough path, as
 * kube-apiserver's `NewTranslatingHandler` does for `TranslateStreamCloseWebsocketRequests`.
 * Before the hijack, a bad query is answered as a plain HTTP Status (a failed handshake to a
 * WebSocket client, which makes kubectl retry over SPDY).
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { clientInfo, type HandlerDeps } from './handler-deps.js';
import type { PodParams, UpgradeDelegate } from './pod-subresource.js';
import { sendStatus } from '../src/wire/status-reply.js';
import type { UpgradeContext } from './upgrade-context.js';
import { ShuttingDownError, UpstreamUpgradeRefusedError } from '../src/errors.js';
import type { HandlerLabel } from '../src/metrics.js';
import { StreamProtocolV5Name } from '../src/stream-protocol.js';
import { dialErrorReason, type SessionEnd, type StreamingSession } from '../src/streaming-sessions.js';
import { parseRemoteCommandOptions } from '../src/wire/remote-command-options.js';
import { shouldTranslate } from '../translator/stream-close-predicate.js';
import { StreamTranslatorProxy, type TranslatorResult } from '../translator/stream-translator.js';
import { abandonRecording } from './recording-start.js';
import { SessionRecording } from '../src/recording/session-recording.js';

const proxies = new WeakMap<HandlerDeps, StreamTranslatorProxy>();

/** The one translator of a server (created on first use from its deps). */
export function translatorFor(deps: HandlerDeps): StreamTranslatorProxy {
  let proxy = proxies.get(deps);
  if (!proxy) {
    proxy = new StreamTranslatorProxy({
      upstream: deps.upstream,
      metrics: deps.metrics,
      maxBytesPerSec: deps.maxConnectionBytesPerSec,
      responseTimeoutMs: deps.upgradeResponseTimeoutMs,
    });
    proxies.set(deps, proxy);
  }
  return proxy;
}

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

/** The delegate for `pods/exec` or `pods/attach`. */
export function streamTranslatorDelegate(handler: HandlerLabel & ('exec' | 'attach')): UpgradeDelegate {
  return {
    path: 'translated',
    protocol: 'websocket',
    matches(request: FastifyRequest<{ Params: PodParams }>, deps: HandlerDeps): boolean {
      return shouldTranslate(request.raw.rawHeaders, deps.featureGates);
    },
    async serve(request, reply: FastifyReply, upgrade: UpgradeContext, deps: HandlerDeps, session: StreamingSession, begun?): Promise<void> {
      const query = new URL(request.raw.url ?? '/', 'http://request.invalid').searchParams;
      const parsed = parseRemoteCommandOptions(query);
      const recording = begun instanceof SessionRecording ? begun : undefined;
      if (!parsed.ok) {
        const code = parsed.status.code ?? 400;
        abandonRecording(recording, code, session);
        session.end({ outcome: 'handshake_failed', statusCode: code, ...(parsed.status.message !== undefined ? { message: parsed.status.message } : {}) });
        sendStatus(reply, parsed.status);
        return;
      }
      reply.hijack();
      const handle = await translatorFor(deps).translate({
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
          request.log.info({ handler, statusCode: handle.statusCode }, 'upstream refused the translated session; answer relayed');
          session.end({ outcome: 'upstream_refused', statusCode: handle.statusCode });
          return;
        case 'handshake-failed':
          deps.metrics.incUpgradeRequest(handler, handle.statusCode);
          request.log.info({ handler }, 'WebSocket handshake refused');
          session.end({ outcome: 'handshake_failed', statusCode: handle.statusCode, message: handle.message });
          return;
        case 'client-gone':
          request.log.info({ handler }, 'client left before the upstream answered');
          session.end({ outcome: 'client_gone', statusCode: 499 });
          return;
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
      session.established(() => handle.stop(new ShuttingDownError()), StreamProtocolV5Name);
      request.log.info({ handler, translated: true }, 'translated connection started');
      whenTranslatedSessionEnds(handle.done, handler, deps, request.log, session, recording);
    },
  };
}
