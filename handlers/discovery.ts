/**
 * `/api` (aggregated form), `/apis` and `/apis/<group>` served by the proxy when it aggregates APIs:
 * the merged discovery of the primary upstream and the registered APIServices
 * (`src/aggregation/discovery-service.ts`), legacy or aggregated (v2, v2beta1) as the `Accept` header
 * asks, with the Content-Type echoed, `ETag`, `Vary: Accept`, `Cache-Control: public` and `304` on a
 * matching `If-None-Match`. A legacy `/api` request, and a group no APIService names, are answered by
 * the upstream, as kube-aggregator delegates them.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply } from 'fastify';
import type { DiscoveryService } from '../src/aggregation/discovery-service.js';
import { discoveryReply, negotiateDiscovery, notAcceptableStatus } from '../src/aggregation/discovery-negotiation.js';
import type { HandlerDeps } from './handler-deps.js';
import { proxyPlain } from './reverse-proxy.js';
import { leaveBodiesUnread } from './raw-body.js';
import { sendStatus } from '../src/wire/status-reply.js';

/** Options of {@link discoveryRoutes}. */
export interface DiscoveryRouteOptions extends HandlerDeps {
  discovery: DiscoveryService;
}

/** Send a cached document (or 304). */
function send(reply: FastifyReply, doc: { body: Buffer; etag: string; contentType: string }, ifNoneMatch: string | undefined): FastifyReply {
  const answer = discoveryReply(doc, ifNoneMatch);
  return reply.code(answer.statusCode).headers(answer.headers).send(answer.body);
}

/** Fastify plugin: the merged discovery routes. */
export const discoveryRoutes: FastifyPluginAsync<DiscoveryRouteOptions> = async (scope: FastifyInstance, o: DiscoveryRouteOptions) => {
  leaveBodiesUnread(scope);
  scope.get('/api', async (request, reply) => {
    const negotiated = negotiateDiscovery(request.headers.accept);
    if (negotiated.format === 'none') return sendStatus(reply, notAcceptableStatus());
    if (negotiated.format === 'legacy') return proxyPlain(request, reply, o);
    await o.discovery.ready();
    const core = o.discovery.core(negotiated.format);
    return core ? send(reply, core, request.headers['if-none-match']) : proxyPlain(request, reply, o);
  });
  scope.get('/apis', async (request, reply) => {
    const negotiated = negotiateDiscovery(request.headers.accept);
    if (negotiated.format === 'none') return sendStatus(reply, notAcceptableStatus());
    await o.discovery.ready();
    return send(reply, o.discovery.document(negotiated.format), request.headers['if-none-match']);
  });
  scope.get<{ Params: { group: string } }>('/apis/:group', async (request, reply) => {
    await o.discovery.ready();
    const group = o.discovery.cache.apiGroup(request.params.group);
    return group ? send(reply, group, request.headers['if-none-match']) : proxyPlain(request, reply, o);
  });
};
