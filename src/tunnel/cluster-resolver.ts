/**
 * The router's resolver for `/clusters/NAME/…` requests (the prefix already stripped by
 * `rewriteClusterUrl`): the cluster's agent tunnel, or a 503 Status naming the cluster at once when
 * no agent of it is connected (no waiting: kubectl retries, and the rest of the proxy is unaffected).
 */
import type { IncomingMessage } from 'node:http';
import type { TunnelMetrics } from '../metrics.js';
import type { RouteDecision, RouteResolver } from '../routing/router.js';
import { errorStatus } from '../status.js';
import type { AgentRegistry } from './agent-registry.js';
import { clusterOf } from './cluster-path.js';
import { ClusterTunnelRoute } from './tunnel-route.js';

/** Places requests that name a cluster on that cluster's tunnel. */
export class ClusterResolver implements RouteResolver {
  readonly #registry: AgentRegistry;
  readonly #metrics: TunnelMetrics | undefined;

  constructor(registry: AgentRegistry, metrics?: TunnelMetrics) {
    this.#registry = registry;
    this.#metrics = metrics;
  }

  /** The tunnel route, a 503 refusal, or undefined for requests without a cluster prefix. */
  resolve(req: IncomingMessage): RouteDecision | undefined {
    const cluster = clusterOf(req);
    if (cluster === undefined) return undefined;
    const tunnel = this.#registry.pick(cluster);
    if (!tunnel) {
      return {
        refuse: errorStatus(503, `cluster "${cluster}" is not available: no agent of it is connected to this proxy`, 'ServiceUnavailable', {
          name: cluster,
          kind: 'clusters',
        }),
      };
    }
    return {
      route: new ClusterTunnelRoute({
        cluster,
        registry: this.#registry,
        upstreamHost: tunnel.upstreamHost,
        ...(this.#metrics ? { metrics: this.#metrics } : {}),
      }),
    };
  }
}

