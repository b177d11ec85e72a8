/**
 * The shared route plugin for `pods/{exec,attach,portforward}`: GET and POST on
 * `/api/v1/namespaces/:namespace/pods/:name/<subresource>`, names validated, upgrade required
 * (apiserver's `UpgradeRequired: true`), then the plan of handlers/stream-path.ts run: the passthrough
 * (UpgradeAwareProxy) or a local path of the subresource's {@link UpgradeDelegate} (translator,
 * tunnel, or their reverse), and when the upstream refuses a passthrough before its 101, once more on
 * the planned fallback. Every request that gets this far is one {@link StreamingSession}: counted,
 * audited once (with the path it took and its fallback), and known to graceful shutdown.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { UpgradeContext } from './upgrade-context.js';
import { authenticatedUserOf } from '../src/auth/request-auth.js';
import { ShuttingDownError, UpgradeRequiredError, statusForError } from '../src/errors.js';
import type { ClientProtocolLabel, HandlerLabel, SessionPathLabel } from '../src/metrics.js';
import type { SessionFacts, StreamingSession } from '../src/streaming-sessions.js';
import type { HandlerDeps } from './handler-deps.js';
import { validateNamespace, validatePodName } from '../src/routing/pod-name.js';
import { routeOf } from '../src/routing/route.js';
import { leaveBodiesUnread } from './raw-body.js';
import { sendStatus } from '../src/wire/status-reply.js';
import { proxyUpgrade } from './upgrade.js';
import { recordedSessionFacts, startRecording } from './recording-start.js';
import type { BegunRecording } from '../src/recording/session-recorder.js';
import { upgradeOf } from './upgrade-context.js';
import { isFallbackAnswer, isVerdict, planStreamRequest, type StreamAttempt, type StreamPlan } from './stream-path.js';

/** The streaming pod subresources. */
export type PodStreamSubresource = 'exec' | 'attach' | 'portforward';

/** The route path of a subresource. */
export function podSubresourcePath(subresource: PodStreamSubresource): string {
  return `/api/v1/namespaces/:namespace/pods/:name/${subresource}`;
}

/** Route parameters of a pod subresource. */
export interface PodParams {
  namespace: string;
  name: string;
}

/** What a local path's attempt came to: the decision's memory turns only on the upstream's 101. */
export interface LocalPathResult {
  upstreamUpgraded: boolean;
}

/**
 * One local path (a translator or a tunnel, forward or reverse): it serves the request and hijacks the
 * reply itself. Resolves once the handshake is settled. It must end `session` exactly once (now, or
 * when the session ends), and close `recording` (when given) once the session is over or was never
 * upgraded.
 */
export interface LocalStreamPath {
  serve(request: FastifyRequest<{ Params: PodParams }>, reply: FastifyReply, upgrade: UpgradeContext, deps: HandlerDeps, session: StreamingSession, recording?: BegunRecording): Promise<LocalPathResult>;
}

/**
 * The local paths of one subresource, as kube-apiserver's `NewTranslatingHandler` wraps its
 * passthrough: `forward` serves a WebSocket client over SPDY upstream (the StreamTranslatorProxy, the
 * port-forward tunnel), `reverse` a SPDY client over WebSocket upstream. handlers/stream-path.ts
 * decides which runs.
 */
export interface UpgradeDelegate {
  forward: LocalStreamPath;
  reverse: LocalStreamPath;
}

/** True when the client asked for a WebSocket (any `Upgrade` token `websocket`). */
export function isWebSocketUpgrade(request: FastifyRequest): boolean {
  return (request.headers.upgrade ?? '').split(',').some((t) => t.trim().toLowerCase() === 'websocket');
}

/** The audit facts of a pod streaming request (query parameters as given; names already validated). */
export function sessionFacts(
  request: FastifyRequest<{ Params: PodParams }>,
  subresource: PodStreamSubresource,
  protocol: ClientProtocolLabel,
  path: SessionPathLabel,
): SessionFacts {
  const query = new URL(request.raw.url ?? '/', 'http://request.invalid').searchParams;
  const facts: SessionFacts = { subresource, protocol, path, namespace: request.params.namespace, pod: request.params.name };
  const container = query.get('container');
  if (container !== null) facts.container = container;
  if (subresource === 'exec') facts.command = query.getAll('command');
  if (subresource === 'portforward' && query.has('ports')) facts.ports = query.getAll('ports');
  if (request.raw.socket.remoteAddress !== undefined) facts.sourceIP = request.raw.socket.remoteAddress;
  const ua = request.headers['user-agent'];
  if (ua !== undefined) facts.userAgent = ua;
  const user = authenticatedUserOf(request.raw);
  if (user) facts.user = user.username;
  return facts;
}

/** Build the Fastify plugin serving one pod subresource. */
export function podSubresourceRoutes(subresource: PodStreamSubresource & HandlerLabel, delegate: UpgradeDelegate): FastifyPluginAsync<HandlerDeps> {
  return async (scope: FastifyInstance, deps: HandlerDeps) => {
    leaveBodiesUnread(scope);
    scope.route<{ Params: PodParams }>({
      method: ['GET', 'POST'],
      url: podSubresourcePath(subresource),
      handler: async (request, reply) => {
        try {
          validateNamespace(request.params.namespace);
          validatePodName(request.params.name);
        } catch (e) {
          return sendStatus(reply, statusForError(e));
        }
        const upgrade = upgradeOf(request.raw);
        if (!upgrade) return sendStatus(reply, new UpgradeRequiredError().toStatus());
        const plan = planStreamRequest(request, deps, subresource);
        const protocol: ClientProtocolLabel = plan.client === 'websocket-tunnel' ? 'tunnel' : isWebSocketUpgrade(request) ? 'websocket' : 'spdy';
        const session = deps.sessions.begin(sessionFacts(request, subresource, protocol, plan.first.path), request.log);
        if (deps.sessions.draining) {
          // A request on a connection opened before the listener closed: refuse it, don't start a session.
          const error = new ShuttingDownError();
          session.end({ outcome: 'shutdown', statusCode: 503, message: error.message });
          return sendStatus(reply, error.toStatus());
        }
        // Session recording: decided, sink checked and caller named before any upgrade (an enforced one
        // whose sink is unusable is refused here); created on the sink only at the upstream's 101.
        let recording: BegunRecording | undefined;
        if (deps.recorder) {
          const started = await startRecording(deps.recorder, request, subresource);
          if (started.kind === 'refused') {
            session.end({ outcome: 'recording_unavailable', statusCode: 503, message: started.message });
            return sendStatus(reply, started.status);
          }
          if (started.kind === 'recorded') {
            recording = started.recording;
            // Its id, and who it names (passthrough: as the upstream answered the caller's SelfSubjectReview).
            Object.assign(session.facts, recordedSessionFacts(recording));
          }
        }
        await servePlan(request, reply, upgrade, deps, subresource, delegate, session, recording, plan);
        return reply;
      },
    });
  };
}

/**
 * Run a plan: its first attempt; after a passthrough the upstream refused before its 101 (not 401),
 * the fallback, whose answer the client gets. The fallback is counted and put on the session (the
 * audit line); the memory turns to its protocol for this upstream only when it got its 101 after a
 * refusal of the protocol (not after a Kubernetes verdict on the caller, `isVerdict`).
 */
async function servePlan(
  request: FastifyRequest<{ Params: PodParams }>,
  reply: FastifyReply,
  upgrade: UpgradeContext,
  deps: HandlerDeps,
  subresource: PodStreamSubresource & HandlerLabel,
  delegate: UpgradeDelegate,
  session: StreamingSession,
  recording: BegunRecording | undefined,
  plan: StreamPlan,
): Promise<void> {
  let attempt: StreamAttempt = plan.first;
  // The refusal was a verdict on this caller or pod (a Forbidden Status), not on the upstream's protocol.
  let verdict = false;
  if (attempt.path === 'passthrough') {
    const planned = plan.fallback;
    const refused = await proxyUpgrade(request, reply, upgrade, deps, subresource, session, recording, planned ? { fallbackFrom: (r) => isFallbackAnswer(r, planned) } : undefined);
    if (!refused || !plan.fallback) {
      if (attempt.proxyType) deps.metrics.incWebSocketStreamingRequest(subresource, attempt.proxyType);
      return;
    }
    const fallback: StreamAttempt = plan.fallback;
    const route = routeOf(request.raw, deps.upstream).name;
    const from = attempt.upstreamProtocol;
    const to = fallback.upstreamProtocol;
    deps.metrics.incStreamingFallback(from, to, refused.statusCode);
    verdict = isVerdict(refused.refusal);
    const reason = refused.refusal.status?.reason;
    request.log.info({ route, from, to, statusCode: refused.statusCode, ...(reason ? { reason } : {}) }, 'upstream refused the upgrade before its 101; asking again in the other protocol');
    session.facts.path = fallback.path;
    session.facts.fallback = { from, to, statusCode: refused.statusCode };
    attempt = fallback;
  }
  if (attempt.proxyType) deps.metrics.incWebSocketStreamingRequest(subresource, attempt.proxyType);
  const local = attempt.path === 'reverse_translated' || attempt.path === 'reverse_tunnel' ? delegate.reverse : delegate.forward;
  const result = await local.serve(request, reply, upgrade, deps, session, recording);
  if (attempt === plan.fallback && result.upstreamUpgraded && !verdict) deps.streamingMemory.remember(routeOf(request.raw, deps.upstream).name, attempt.upstreamProtocol);
}
