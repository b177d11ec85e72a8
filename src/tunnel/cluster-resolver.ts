/**
 * The router's resolver for `/clusters/NAME/…` requests (the prefix already stripped by
 * `rewriteClusterUrl`): the cluster's agent tunnel, or a 503 Status naming the cluster at once when
 * no agent of it is connected (no waiting: kubectl retries, and the rest of the proxy is unaffected).
 * In `--authn impersonate` the caller is reviewed by that cluster too ({@link ClusterResolver.reviews}).
 */
import type { IncomingMessage } from 'node:http';
import type { ReviewApi } from '../api-client.js';
import { impersonationHeaders } from '../auth/identity-headers.js';
import type { AuthnMode } from '../auth/request-auth.js';
import type { UserInfo } from '../auth/user-info.js';
import type { TunnelMetrics } from '../metrics.js';
import { reviewApiOver } from '../routing/route-reviews.js';
import type { ReviewDecision, RouteDecision, RouteResolver } from '../routing/router.js';
import { errorStatus, type V1Status } from '../status.js';
import type { AgentRegistry } from './agent-registry.js';
import { clusterOf } from './cluster-path.js';
import { ClusterTunnelRoute, type ClusterTunnelRouteOptions } from './tunnel-route.js';

/** Options of {@link ClusterResolver}. */
export interface ClusterResolverOptions {
  registry: AgentRegistry;
  metrics?: TunnelMetrics;
  /**
   * `--authn`: in impersonate the verified caller goes as `Impersonate-*` on every request of the
   * cluster's route, and the caller is reviewed by that cluster (its {@link Route.reviews}).
   */
  authn?: AuthnMode;
}

/** Places requests that name a cluster on that cluster's tunnel. */
export class ClusterResolver implements RouteResolver {
  readonly #o: ClusterResolverOptions;
  /** One review client per cluster (so TokenReview answers are cached per cluster). */
  readonly #reviews = new Map<string, ReviewApi>();

  constructor(o: ClusterResolverOptions) {
    this.#o = o;
  }

  /** The tunnel route, a 503 refusal, or undefined for requests without a cluster prefix. */
  resolve(req: IncomingMessage, caller?: UserInfo): RouteDecision | undefined {
    const placed = this.#place(req);
    if (!placed || 'refuse' in placed) return placed;
    const impersonate = this.#o.authn === 'impersonate';
    return {
      route: new ClusterTunnelRoute({
        ...this.#routeOptions(placed.cluster, placed.upstreamHost),
        ...(impersonate && caller ? { identity: impersonationHeaders(caller) } : {}),
        ...(impersonate ? { reviews: this.#reviewsOf(placed.cluster, placed.upstreamHost) } : {}),
      }),
    };
  }

  /** impersonate: the cluster's reviews, through its tunnel with the agent's credentials. */
  reviews(req: IncomingMessage): ReviewDecision | undefined {
    if (this.#o.authn !== 'impersonate') return undefined;
    const placed = this.#place(req);
    if (!placed || 'refuse' in placed) return placed;
    return { reviews: this.#reviewsOf(placed.cluster, placed.upstreamHost) };
  }

  #place(req: IncomingMessage): { cluster: string; upstreamHost: string } | { refuse: V1Status } | undefined {
    const cluster = clusterOf(req);
    if (cluster === undefined) return undefined;
    const tunnel = this.#o.registry.pick(cluster);
    if (!tunnel) {
      return {
        refuse: errorStatus(503, `cluster "${cluster}" is not available: no agent of it is connected to this proxy`, 'ServiceUnavailable', {
          name: cluster,
          kind: 'clusters',
        }),
      };
    }
    return { cluster, upstreamHost: tunnel.upstreamHost };
  }

  #routeOptions(cluster: string, upstreamHost: string): ClusterTunnelRouteOptions {
    return { cluster, registry: this.#o.registry, upstreamHost, ...(this.#o.metrics ? { metrics: this.#o.metrics } : {}) };
  }

  #reviewsOf(cluster: string, upstreamHost: string): ReviewApi {
    let reviews = this.#reviews.get(cluster);
    if (!reviews) {
      // The review route carries no caller identity: the agent adds its own credentials.
      reviews = reviewApiOver(new ClusterTunnelRoute(this.#routeOptions(cluster, upstreamHost)));
      this.#reviews.set(cluster, reviews);
    }
    return reviews;
  }
}
