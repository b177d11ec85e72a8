/**
 * A route: where ONE caller request goes and how it gets there. The {@link Router} decides it once
 * per request (before any handler runs); the reverse proxy, the UpgradeAwareProxy, the translator and
 * the port-forward tunnel consume only the route — they never ask which backend kind it is.
 *
 * A route combines a backend (something dialable: an apiserver, a kubelet, an aggregated API server,
 * later an agent's tunnel — see {@link Upstream}) with what is specific to the request: the
 * request-target upstream (a kubelet path, a prefix joined in front) and the identity lines to set
 * on it (none in passthrough, `Impersonate-*` toward an apiserver, `X-Remote-*` toward an aggregated
 * API server).
 */
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import type { Duplex } from 'node:stream';
import { request as httpRequest } from 'node:http';
import type { ReviewApi } from '../api-client.js';
import { UpstreamUnreachableError } from '../errors.js';

/**
 * Header lines that authenticate an upstream request: each name set to exactly the given value, or
 * one line per value for a list (`Impersonate-Group` repeats).
 */
export type AuthHeaders = Record<string, string | readonly string[]>;

/** What every proxy path needs of the place a caller's request goes. */
export interface Route {
  /**
   * What the route leads to, for logs and metrics: `upstream`, `kubelet/<node>`,
   * `apiservice/<name>`, `cluster/<name>`.
   */
  readonly name: string;
  /** Base URL of the backend (its origin names the backend in errors). */
  readonly url: URL;
  /** The `Host` header value. */
  readonly host: string;
  /** The request-target to send for the caller's `path?query`. */
  target(requestUrl: string): string;
  /** The identity lines set on the caller's request (none in passthrough). */
  callerAuthHeaders(): Promise<AuthHeaders>;
  /**
   * One new HTTP/1.1 connection for an upgrade (TLS with ALPN http/1.1 for https; an HTTP/2 stream
   * to a cluster's agent for a tunnel backend). A byte stream: consumers use only Duplex APIs.
   */
  dial(signal?: AbortSignal): Promise<Duplex>;
  /** A plain (non-upgrade) request on the backend's pooled connections; the caller writes the body. */
  request(options: Pick<RequestOptions, 'method' | 'path' | 'headers'>): ClientRequest;
  /**
   * Answer a backend's redirect (3xx with `Location`) with 502 instead of relaying it, as
   * kube-aggregator does for aggregated APIs (`--aggregator-reject-forwarding-redirect`). Upgrades
   * never relay a 3xx on any route (only 101 or an error answer passes).
   */
  readonly rejectRedirects?: boolean;
  /** Called once with the status answered to the caller (101 for an upgrade), for per-route request counts. */
  observe?(code: number): void;
  /**
   * Where `--authn impersonate` authenticates and authorizes a caller of this route (TokenReview,
   * SubjectAccessReview): the cluster the route leads to. Absent: the proxy's own API (the primary
   * upstream's cluster, which also fronts its kubelets and aggregated APIs). One object per cluster,
   * so review caches are per cluster.
   */
  readonly reviews?: ReviewApi;
  /** See {@link RouteStreaming}; absent for every backend but a kubelet. */
  readonly streaming?: RouteStreaming;
}

/**
 * What is known of a route's backend before a streaming upgrade is sent to it, read by the one
 * decision of a streaming request's path (handlers/stream-path.ts). A route without it is an upstream
 * that is asked in the client's protocol first (an apiserver, an agent's cluster, an APIService backend).
 */
export interface RouteStreaming {
  /**
   * The backend is the pod's kubelet (`--upstream-mode kubelet`): its node's `status.declaredFeatures`
   * decide, as kube-apiserver's pod `Connect()` does, and there is no fallback (kube-apiserver has none).
   */
  kubelet: { declaredFeatures: readonly string[] };
}

const routes = new WeakMap<IncomingMessage, Route>();

/** Send `req` (and its upgrade) along `route`. Called by the {@link Router} only. */
export function setRoute(req: IncomingMessage, route: Route): void {
  routes.set(req, route);
}

/**
 * The route of `req`. `fallback` serves requests the router never saw (a proxy component driven
 * directly, as in unit tests); in the server every request that goes upstream has a route.
 */
export function routeOf(req: IncomingMessage, fallback: Route): Route {
  return routes.get(req) ?? fallback;
}

/** Overrides of {@link routeVia}. */
export interface RouteOverrides {
  /** The route's name (default: the backend's). */
  name?: string;
  /** A fixed request-target (the kubelet path) instead of the caller's. */
  target?: string;
  /** The identity lines instead of the backend's default (none). */
  authHeaders?: () => Promise<AuthHeaders>;
  /** See {@link Route.rejectRedirects}. */
  rejectRedirects?: boolean;
  /** See {@link Route.observe}. */
  observe?: (code: number) => void;
  /** See {@link Route.streaming}. */
  streaming?: RouteStreaming;
}

/** A route through `backend` (its connection, TLS and host) with its own request-target or identity. */
export function routeVia(backend: Route, o: RouteOverrides): Route {
  return {
    name: o.name ?? backend.name,
    url: backend.url,
    host: backend.host,
    target: o.target !== undefined ? () => o.target! : (u) => backend.target(u),
    callerAuthHeaders: o.authHeaders ?? (() => backend.callerAuthHeaders()),
    dial: (signal) => backend.dial(signal),
    request: (options) => backend.request(options),
    ...(o.rejectRedirects ? { rejectRedirects: true } : {}),
    ...(o.observe ? { observe: o.observe } : {}),
    ...(o.streaming ? { streaming: o.streaming } : {}),
  };
}

/**
 * The fallback route of a proxy without a primary upstream (agents only). The router refuses every
 * request it cannot place, so this is reached only by components driven without the router; it
 * fails every dial and request with a 503.
 */
export function unavailableRoute(message: string): Route {
  const error = (): UpstreamUnreachableError => new UpstreamUnreachableError('none', new Error(message));
  return {
    name: 'none',
    url: new URL('http://none.invalid/'),
    host: 'none.invalid',
    target: (u) => u,
    callerAuthHeaders: async () => ({}),
    dial: async () => {
      throw error();
    },
    request: (options) =>
      httpRequest({
        ...options,
        createConnection: ((_o: unknown, done: (err: Error) => void) => {
          done(error());
          return undefined;
        }) as unknown as RequestOptions['createConnection'],
      }),
  };
}
