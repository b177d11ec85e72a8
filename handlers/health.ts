/**
 * The proxy's own endpoints on the shared listener: `/healthz`, `/livez`, `/readyz` (plain `ok`, as
 * kube-apiserver answers them) and `/metrics` (Prometheus text from this server's Registry).
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { Registry } from 'prom-client';

/** Paths answered here and never proxied. */
export const HEALTH_PATHS: readonly string[] = ['/healthz', '/livez', '/readyz'];

/** Options of {@link healthRoutes}. */
export interface HealthOptions {
  registry: Registry;
  /** Readiness; false while shutting down. */
  ready: () => boolean;
}

/** Fastify plugin for the health and metrics endpoints. */
export const healthRoutes: FastifyPluginAsync<HealthOptions> = async (scope: FastifyInstance, options: HealthOptions) => {
  for (const path of HEALTH_PATHS) {
    scope.get(path, async (_request, reply) => {
      if (path === '/readyz' && !options.ready()) return reply.code(500).type('text/plain; charset=utf-8').send('shutting down');
      return reply.type('text/plain; charset=utf-8').send('ok');
    });
  }
  scope.get('/metrics', async (_request, reply) => {
    const text = await options.registry.metrics();
    return reply.type(options.registry.contentType).send(text);
  });
};
