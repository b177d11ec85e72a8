/**
 * Handling an upgrade request inside a Fastify route: hijack the reply (after onRequest hooks such as
 * logging, metrics and later authorization have run), then hand the raw socket to UpgradeAwareProxy
 * and record the outcome.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PASSTHROUGH_EXIT_CODE_UNKNOWN } from '../src/audit.js';
import type { HandlerLabel } from '../src/metrics.js';
import { dialErrorReason, type StreamingSession } from '../src/streaming-sessions.js';
import { routeOf } from '../src/routing/route.js';
import { clientInfo, type HandlerDeps } from './handler-deps.js';
import type { UpgradeContext } from './upgrade-context.js';
import { abandonRecording } from './recording-start.js';
import type { BegunRecording } from '../src/recording/session-recorder.js';
import { RecordingUnavailableError } from '../src/recording/recording-errors.js';
import type { TryUpgradeOptions, UpgradeOutcome } from '../proxy/upgrade-aware.js';

/** A passthrough attempt the upstream refused before its 101, handed back unrelayed for a fallback. */
export type RefusedBeforeUpgrade = Extract<UpgradeOutcome, { kind: 'refused-before-upgrade' }>;

/**
 * Proxy the upgrade. Resolves once the upstream has answered (not when the upgraded connection ends).
 * Hijacking comes first and is final: from here on every answer is raw bytes on the socket.
 * `session` (pod streaming subresources only) is ended here or when the connection ends;
 * `recording` is created at the upstream's 101 (an enforced one that cannot be is answered 503
 * instead) and tapped by the splice (which closes it), or abandoned here when there is no 101.
 * With `options.fallbackFrom` (a planned fallback, handlers/stream-path.ts) a refusal it takes is
 * returned unanswered and uncounted: the session, the recording and the client's socket (paused,
 * early bytes unread) go on to the next attempt.
 */
export async function proxyUpgrade(
  request: FastifyRequest,
  reply: FastifyReply,
  upgrade: UpgradeContext,
  deps: HandlerDeps,
  handler: HandlerLabel,
  session?: StreamingSession,
  recording?: BegunRecording,
  options?: TryUpgradeOptions,
): Promise<RefusedBeforeUpgrade | undefined> {
  reply.hijack();
  const outcome = await deps.upgradeProxy.tryUpgrade(request.raw, upgrade.socket, upgrade.head, clientInfo(request.raw, deps.proto), recording, options);
  if (outcome.kind === 'refused-before-upgrade') return outcome;
  // The recording was created at the upstream's 101 (by the proxy, before the client's 101); without one, nothing is stored.
  if (outcome.kind !== 'upgraded') abandonRecording(recording, outcome.statusCode, session);
  deps.metrics.incUpgradeRequest(handler, outcome.statusCode);
  routeOf(request.raw, deps.upstream).observe?.(outcome.statusCode);
  const exitCodeUnknown = PASSTHROUGH_EXIT_CODE_UNKNOWN;
  switch (outcome.kind) {
    case 'upgraded': {
      deps.metrics.addUpgradedConnections(handler, 1);
      request.log.info({ handler }, 'upgraded connection started');
      const { splice } = outcome;
      // Shutdown after the grace period: the passthrough cannot speak the protocol, only close.
      session?.established(() => upgrade.socket.destroy());
      void splice.done.then((firstEnd) => {
        deps.metrics.addUpgradedConnections(handler, -1);
        deps.metrics.addUpgradedBytes('to_upstream', splice.bytes.toUpstream);
        deps.metrics.addUpgradedBytes('to_client', splice.bytes.toClient);
        request.log.info({ handler, firstEnd, ...splice.bytes, copy: splice.mode }, 'upgraded connection closed');
        // A recorded session's tap read the exit status off the error stream: the audit line has it.
        const seen = recording && 'exitStatus' in recording ? recording.exitStatus : undefined;
        const exit = seen && 'exitCode' in seen ? { exitCode: seen.exitCode } : { exitCodeUnknown };
        session?.end({ outcome: deps.sessions.stopping ? 'shutdown' : 'success', statusCode: 101, bytes: splice.bytes, ...exit });
      });
      return undefined;
    }
    case 'forwarded':
      request.log.info({ handler, statusCode: outcome.statusCode }, 'upstream refused the upgrade; answer relayed');
      session?.end({ outcome: 'upstream_refused', statusCode: outcome.statusCode, exitCodeUnknown });
      return undefined;
    case 'error': {
      request.log.warn({ handler, statusCode: outcome.statusCode, err: outcome.error }, 'upgrade failed');
      const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
      if (!session) {
        const dial = dialErrorReason(outcome.error);
        if (dial) deps.metrics.incUpstreamDialError('passthrough', dial);
      }
      session?.end({
        outcome: outcome.error instanceof RecordingUnavailableError ? 'recording_unavailable' : dialErrorReason(outcome.error) ? 'upstream_unreachable' : 'error',
        statusCode: outcome.statusCode,
        error: outcome.error,
        message,
        exitCodeUnknown,
      });
      return undefined;
    }
    case 'client-gone':
      request.log.info({ handler }, 'client left before the upstream answered');
      session?.end({ outcome: 'client_gone', statusCode: 499, exitCodeUnknown });
      return undefined;
  }
}
