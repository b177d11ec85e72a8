/**
 * The shared route plugin for `pods/{exec,attach,portforward}`: GET and POST on
 * `/api/v1/namespaces/:namespace/pods/:name/<subresource>`, names validated, upgrade required
 * (apiserver's `UpgradeRequired: true`), then the path: a delegate (WebSocket v5 translator,
 * port-forward tunnel) when it matches, else UpgradeAwareProxy. Every request that gets this far is
 * one {@link StreamingSession}: counted, audited once, and known to graceful shutdown.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { UpgradeContext } from './upgrade-context.js';
import { authenticatedUserOf } from '../src/auth/request-auth.js';
import { ShuttingDownError, UpgradeRequiredError, statusForError } from '../src/errors.js';
import type { ClientProtocolLabel, HandlerLabel, SessionPathLabel } from '../src/metrics.js';
import type { SessionFacts, StreamingSession } from '../src/streaming-sessions.js';
import type { HandlerDeps } from './handler-deps.js';
import { validateNamespace, validatePodName } from '../src/routing/pod-name.js';
import { leaveBodiesUnread } from './raw-body.js';
import { sendStatus } from '../src/wire/status-reply.js';
import { proxyUpgrade } from './upgrade.js';
import { recordedSessionFacts, startRecording } from './recording-start.js';
import type { BegunRecording } from '../src/recording/session-recorder.js';
import { upgradeOf } from './upgrade-context.js';


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

/**
 * A handler that takes some upgrade requests off the passthrough path, as kube-apiserver's
 * `NewTranslatingHandler` does: the StreamTranslatorProxy (WebSocket v5 exec/attach) and the
 * port-forward tunnel. Everything it does not match falls through to UpgradeAwareProxy unchanged.
 */
export interface UpgradeDelegate {
  /** The path label of what it serves. */
  readonly path: Exclude<SessionPathLabel, 'passthrough'>;
  /** The client protocol label of what it serves. */
  readonly protocol: Exclude<ClientProtocolLabel, 'spdy'>;
  /** kube-apiserver's per-request predicate plus the feature gate. */
  matches(request: FastifyRequest<{ Params: PodParams }>, deps: HandlerDeps): boolean;
  /**
   * Serve the request; it hijacks the reply itself. Resolves once the handshake is settled. It must
   * end `session` exactly once (now, or when the session ends), and close `recording` (when given)
   * once the session is over or was never upgraded.
   */
  serve(request: FastifyRequest<{ Params: PodParams }>, reply: FastifyReply, upgrade: UpgradeContext, deps: HandlerDeps, session: StreamingSession, recording?: BegunRecording): Promise<void>;
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
export function podSubresourceRoutes(
  subresource: PodStreamSubresource & HandlerLabel,
  delegate?: UpgradeDelegate,
): FastifyPluginAsync<HandlerDeps> {
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
        const websocket = isWebSocketUpgrade(request);
        const delegated = delegate?.matches(request, deps) ? delegate : undefined;
        const path = delegated?.path ?? 'passthrough';
        const protocol = delegated?.protocol ?? (websocket ? 'websocket' : 'spdy');
        const session = deps.sessions.begin(sessionFacts(request, subresource, protocol, path), request.log);
        if (deps.sessions.draining) {
          // A request on a connection opened before the listener closed: refuse it, don't start a session.
          const error = new ShuttingDownError();
          session.end({ outcome: 'shutdown', statusCode: 503, message: error.message });
          return sendStatus(reply, error.toStatus());
        }
        if (websocket) deps.metrics.incWebSocketStreamingRequest(subresource, delegated ? 'translated_at_apiserver' : 'proxied_to_kubelet');
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
        if (delegated) {
          await delegated.serve(request, reply, upgrade, deps, session, recording);
          return reply;
        }
        await proxyUpgrade(request, reply, upgrade, deps, subresource, session, recording);
        return reply;
      },
    });
  };
}
