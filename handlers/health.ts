/**
 * The proxy's own endpoints on the shared listener (GET and HEAD only; see {@link isOwnRequest}): `/healthz` and `/livez` (plain `ok`: the process
 * serves requests), `/readyz` (ok only while not draining and the upstream is reachable, as
 * kube-apiserver's readyz fails during shutdown) and `/metrics` (Prometheus text from this server's
 * Registry). A failing `/readyz` answers 500 with one `[+]name ok` or `[-]name failed: reason withheld`
 * line per check, kube-apiserver's format (`k8s.io/apiserver/pkg/server/healthz`): the endpoint is
 * public, so why a check failed (the upstream's address, an issuer's URL, a dial error) goes to the
 * log, never into the body. `?verbose` lists the checks of a passing `/readyz` too.
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
  /** Why it failed: logged, never answered. */
  message?: string;
}

/** Options of {@link healthRoutes}. */
export interface HealthOptions {
  registry: Registry;
  /** Readiness checks, run on each `/readyz`. */
  readiness: () => Promise<ReadinessCheck[]>;
}

/** One `[+]name ok` / `[-]name failed: reason withheld` line per check, as kube-apiserver writes them. */
function checkLines(checks: readonly ReadinessCheck[]): string {
  return checks.map((c) => (c.ok ? `[+]${c.name} ok\n` : `[-]${c.name} failed: reason withheld\n`)).join('');
}

/** The `/readyz` body for failed checks: the check lines, then `readyz check failed`. Reasons withheld. */
export function readyzFailureBody(checks: readonly ReadinessCheck[]): string {
  return `${checkLines(checks)}readyz check failed\n`;
}

/** The `/readyz?verbose` body when every check passed. */
export function readyzVerboseBody(checks: readonly ReadinessCheck[]): string {
  return `${checkLines(checks)}readyz check passed\n`;
}

/** True when the query has a `verbose` key (any value, as Go's `r.URL.Query()["verbose"]`). */
function wantsVerbose(url: string): boolean {
  const q = url.indexOf('?');
  return q >= 0 && new URLSearchParams(url.slice(q + 1)).has('verbose');
}

/** Fastify plugin for the health and metrics endpoints. */
export const healthRoutes: FastifyPluginAsync<HealthOptions> = async (scope: FastifyInstance, options: HealthOptions) => {
  for (const path of HEALTH_PATHS) {
    scope.get(path, async (request, reply) => {
      if (path === '/readyz') {
        const checks = await options.readiness();
        const failed = checks.filter((c) => !c.ok);
        if (failed.length > 0) {
          // kube-apiserver logs `<names> check failed: readyz` with each reason; the body withholds them.
          request.log.info({ checks: failed.map((c) => ({ name: c.name, reason: c.message ?? '' })) }, `readyz check failed: ${failed.map((c) => c.name).join(',')}`);
          return reply.code(500).type('text/plain; charset=utf-8').send(readyzFailureBody(checks));
        }
        if (wantsVerbose(request.url)) return reply.type('text/plain; charset=utf-8').send(readyzVerboseBody(checks));
      }
      return reply.type('text/plain; charset=utf-8').send('ok');
    });
  }
  scope.get('/metrics', async (_request, reply) => {
    const text = await options.registry.metrics();
    return reply.type(options.registry.contentType).send(text);
  });
};
