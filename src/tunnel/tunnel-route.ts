/**
 * The route to a cluster behind an agent: the tunnel is one more way to dial. `dial()` opens one
 * HTTP/2 CONNECT stream on one of the cluster's tunnels (the registry's pick; the agent connects it
 * to its apiserver), once more on another tunnel when that fails before the agent answered, and
 * `request()` sends a plain HTTP/1.1 request over such a stream — so the reverse proxy, the
 * UpgradeAwareProxy, the translator and the port-forward tunnel run unchanged on top of it.
 */
import { request as httpRequest, type ClientRequest, type RequestOptions } from 'node:http';
import type { Duplex } from 'node:stream';
import { UpstreamUnreachableError } from '../errors.js';
import type { TunnelMetrics } from '../metrics.js';
import type { ReviewApi } from '../api-client.js';
import type { Route } from '../routing/route.js';
import type { AuthHeaders } from '../routing/upstream.js';
import type { AgentRegistry, AgentTunnel } from './agent-registry.js';
import { targetInCluster } from './cluster-path.js';
import { countTunnelBytes } from './tunnel-bytes.js';
import { openTunnelStream } from './tunnel-stream.js';

/** Options of {@link ClusterTunnelRoute}. */
export interface ClusterTunnelRouteOptions {
  cluster: string;
  registry: AgentRegistry;
  /** The `Host` the cluster's apiserver expects (the agent told us at connect). */
  upstreamHost: string;
  metrics?: TunnelMetrics;
  /**
   * `--authn impersonate`: the verified caller's `Impersonate-*` lines, set on every request of the
   * route (plain, upgrade, the translator's SPDY leg, the port-forward tunnel); the agent adds its
   * own credentials. Absent in passthrough (the caller's own credentials ride through) and on the
   * review route (the reviews are the agent's own calls).
   */
  identity?: AuthHeaders;
  /** See {@link Route.reviews}: the cluster's reviews, through this same tunnel. */
  reviews?: ReviewApi;
}

/** A route through a cluster's agent tunnel. */
export class ClusterTunnelRoute implements Route {
  readonly name: string;
  readonly url: URL;
  readonly host: string;
  readonly reviews?: ReviewApi;
  readonly #o: ClusterTunnelRouteOptions;

  constructor(o: ClusterTunnelRouteOptions) {
    this.#o = o;
    if (o.reviews) this.reviews = o.reviews;
    this.name = `cluster/${o.cluster}`;
    this.host = o.upstreamHost;
    this.url = new URL(`https://${o.upstreamHost}/`);
  }

  /** The caller's target without the `/clusters/NAME` prefix (when the rewrite left it on). */
  target(requestUrl: string): string {
    return targetInCluster(requestUrl);
  }

  /** The caller's `Impersonate-*` lines in impersonate mode; none in passthrough (its own `Authorization` rides through). */
  async callerAuthHeaders(): Promise<AuthHeaders> {
    return this.#o.identity ?? {};
  }

  /**
   * One tunnel stream, connected by the agent to its apiserver. A stream that fails before the
   * agent answered (its tunnel closed or went away under it, the stream was reset or refused, the
   * agent could not reach its apiserver) has relayed nothing yet, so it is opened once more on
   * another tunnel of the cluster when there is one: a replica that flaps, or dies with streams
   * being opened on it, costs a retry, not the request (as Go's Transport retries a request that
   * never reached the server).
   */
  async dial(signal?: AbortSignal): Promise<Duplex> {
    const { cluster, registry, metrics } = this.#o;
    const tunnel = registry.pick(cluster);
    if (!tunnel) throw new UpstreamUnreachableError(this.name, new Error(`cluster "${cluster}" is not connected: no agent tunnel`));
    try {
      return await this.#open(tunnel, signal);
    } catch (err) {
      const other = signal?.aborted ? undefined : registry.pick(cluster, tunnel);
      if (other === undefined) throw err;
      metrics?.incTunnelStreamRetry(cluster);
      return this.#open(other, signal);
    }
  }

  async #open(tunnel: AgentTunnel, signal: AbortSignal | undefined): Promise<Duplex> {
    const { cluster, metrics } = this.#o;
    const stream = await openTunnelStream(tunnel.session, this.name, signal);
    if (metrics) {
      metrics.incTunnelStream(cluster);
      countTunnelBytes(stream, metrics.tunnelByteTotals(cluster));
      metrics.addTunnelActiveStreams(cluster, 1);
      stream.once('close', () => metrics.addTunnelActiveStreams(cluster, -1));
    }
    return stream;
  }

  /**
   * A plain request over its own tunnel stream (no pooling: one stream per request, closed with
   * the response, which HTTP/2 makes cheap). Without an `agent`, Node's client never reuses the
   * connection (`Connection: close`), so a stream never carries a second request; the agent
   * serves one request per stream regardless.
   */
  request(options: Pick<RequestOptions, 'method' | 'path' | 'headers'>): ClientRequest {
    return httpRequest({
      ...options,
      // No agent: Node's Agent would ignore createConnection and dial TCP itself.
      createConnection: ((_opts: unknown, done: (err: Error | null, stream?: Duplex) => void) => {
        this.dial().then(
          (stream) => done(null, stream),
          (err: Error) => done(err),
        );
        return undefined;
      }) as unknown as RequestOptions['createConnection'],
    });
  }
}
