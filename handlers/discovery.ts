/**
 * `/api` (aggregated form), `/apis` and `/apis/<group>` served by the proxy when it aggregates APIs: the merged discovery of
 * the primary upstream and the registered APIServices (`src/aggregation/discovery-service.ts`),
 * legacy or aggregated (v2, v2beta1) as the `Accept` header asks, with the Content-Type echoed,
 * `ETag`, `Vary: Accept`, `Cache-Control: public` and `304` on a matching `If-None-Match`. A group
 * no APIService names is answered by the upstream, as kube-aggregator delegates it.
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { DiscoveryService } from '../src/aggregation/discovery-service.js';
import { etagMatches, negotiateDiscovery } from '../src/aggregation/discovery-format.js';
import { errorStatus } from '../src/status.js';
import type { HandlerDeps } from './handler-deps.js';
import { proxyPlain } from './reverse-proxy.js';
import { leaveBodiesUnread } from './raw-body.js';
import { sendStatus } from './status-reply.js';

/** Options of {@link discoveryRoutes}. */
export interface DiscoveryRouteOptions extends HandlerDeps {
  discovery: DiscoveryService;
}

/** Fastify plugin: the merged discovery routes. */
export const discoveryRoutes: FastifyPluginAsync<DiscoveryRouteOptions> = async (scope: FastifyInstance, o: DiscoveryRouteOptions) => {
  leaveBodiesUnread(scope);
  const notAcceptable = errorStatus(406, 'only the following media types are accepted: application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList', 'NotAcceptable');
  // `/api`: the core group. Legacy answers come from the upstream unchanged; the aggregated form is
  // served here, since client-go takes aggregated discovery only when both /api and /apis give it.
  scope.get('/api', async (request, reply) => {
    const format = negotiateDiscovery(request.headers.accept);
    if (!format) return sendStatus(reply, notAcceptable);
    const core = format === 'legacy' ? undefined : (await o.discovery.snapshot()).core?.[format];
    if (!core) return proxyPlain(request, reply, o);
    reply.header('Vary', 'Accept').header('ETag', core.etag).header('Cache-Control', 'public');
    if (etagMatches(request.headers['if-none-match'], core.etag)) return reply.code(304).send();
    return reply.type(core.contentType).send(core.body);
  });
  scope.get('/apis', async (request, reply) => {
    const format = negotiateDiscovery(request.headers.accept);
    if (!format) return sendStatus(reply, notAcceptable);
    const snapshot = await o.discovery.snapshot();
    const doc = format === 'legacy' ? snapshot.legacy : snapshot.aggregated[format];
    reply.header('Vary', 'Accept');
    if (format !== 'legacy') {
      reply.header('ETag', doc.etag).header('Cache-Control', 'public');
      if (etagMatches(request.headers['if-none-match'], doc.etag)) return reply.code(304).send();
    }
    return reply.type(doc.contentType).send(doc.body);
  });
  scope.get<{ Params: { group: string } }>('/apis/:group', async (request, reply) => {
    const group = await o.discovery.group(request.params.group);
    if (!group) return proxyPlain(request, reply, o);
    return reply.type('application/json').send(JSON.stringify(group));
  });
};
