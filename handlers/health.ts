/**
 * The proxy's own endpoints on the shared listener (GET and HEAD only; see {@link isOwnRequest}): `/healthz` and `/livez` (plain `ok`: the process
 * serves requests), `/readyz` (ok only while not draining and the upstream is reachable, as
 * kube-apiserver's readyz fails during shutdown) and `/metrics` (Prometheus text from this server's
 * Registry). A failing `/readyz` answers 500 with one `[-]name failed: reason` line per failed check,
 * kube-apiserver's format.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { Registry } from 'prom-client';

/** Health paths answered here (GET and HEAD) and never proxied. */
export const HEALTH_PATHS: readonly string[] = ['/healthz', '/livez', '/readyz'];

/** Every path the proxy serves itself: the health paths and `/metrics`. */
export const OWN_PATHS: readonly string[] = [...HEALTH_PATHS, '/metrics'];

/**
 * True when the proxy answers `req` itself, unauthenticated: GET or HEAD on one of {@link OWN_PATHS}.
 * Any other method on those paths is no request of the proxy's: it is authenticated and routed like
 * every other request (a `POST /healthz` skipping authentication reached the upstream with whatever
 * headers it carried).
 */
export function isOwnRequest(req: Pick<IncomingMessage, 'method' | 'url'>): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  return OWN_PATHS.includes((req.url ?? '/').split('?')[0] ?? '/');
}

/** One readiness check's result. */
export interface ReadinessCheck {
  /** `shutdown`, `upstream`. */
  name: string;
  ok: boolean;
  /** Why it failed. */
  message?: string;
}

/** Options of {@link healthRoutes}. */
export interface HealthOptions {
  registry: Registry;
  /** Readiness checks, run on each `/readyz`. */
  readiness: () => Promise<ReadinessCheck[]>;
}

/** The `/readyz` body for failed checks: `[+]`/`[-]` lines, then `readyz check failed`. */
export function readyzFailureBody(checks: readonly ReadinessCheck[]): string {
  const lines = checks.map((c) => (c.ok ? `[+]${c.name} ok` : `[-]${c.name} failed: ${c.message ?? 'reason withheld'}`));
  return `${lines.join('\n')}\nreadyz check failed\n`;
}

/** Fastify plugin for the health and metrics endpoints. */
export const healthRoutes: FastifyPluginAsync<HealthOptions> = async (scope: FastifyInstance, options: HealthOptions) => {
  for (const path of HEALTH_PATHS) {
    scope.get(path, async (_request, reply) => {
      if (path === '/readyz') {
        const checks = await options.readiness();
        if (checks.some((c) => !c.ok)) return reply.code(500).type('text/plain; charset=utf-8').send(readyzFailureBody(checks));
      }
      return reply.type('text/plain; charset=utf-8').send('ok');
    });
  }
  scope.get('/metrics', async (_request, reply) => {
    const text = await options.registry.metrics();
    return reply.type(options.registry.contentType).send(text);
  });
};
