/**
 * The shared route plugin for `pods/{exec,attach,portforward}`: GET and POST on
 * `/api/v1/namespaces/:namespace/pods/:name/<subresource>`, names validated, upgrade required
 * (apiserver's `UpgradeRequired: true`), then UpgradeAwareProxy. The WebSocket v5 translator and the
 * port-forward tunnel will branch off here, before the passthrough, when their feature gates are on.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { UpgradeContext } from './upgrade-context.js';
import { UpgradeRequiredError, statusForError } from '../src/errors.js';
import type { HandlerLabel } from '../src/metrics.js';
import type { HandlerDeps } from './handler-deps.js';
import { validateNamespace, validatePodName } from './pod-name.js';
import { leaveBodiesUnread } from './raw-body.js';
import { sendStatus } from './status-reply.js';
import { proxyUpgrade } from './upgrade.js';
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
  /** kube-apiserver's per-request predicate plus the feature gate. */
  matches(request: FastifyRequest<{ Params: PodParams }>, deps: HandlerDeps): boolean;
  /** Serve the request; it hijacks the reply itself. Resolves once the handshake is settled. */
  serve(request: FastifyRequest<{ Params: PodParams }>, reply: FastifyReply, upgrade: UpgradeContext, deps: HandlerDeps): Promise<void>;
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
        if (delegate?.matches(request, deps)) {
          await delegate.serve(request, reply, upgrade, deps);
          return reply;
        }
        await proxyUpgrade(request, reply, upgrade, deps, subresource);
        return reply;
      },
    });
  };
}
