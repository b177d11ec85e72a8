/**
 * Per-request upstream routes. By default a caller's request goes to the configured upstream with
 * the caller's own credentials (passthrough). The authentication hook (impersonating identity) and
 * the kubelet locator (node address, kubelet path) attach a route to the request instead; every
 * path that talks upstream — reverse proxy, passthrough, translator, tunnel — asks {@link upstreamFor}.
 */
import type { IncomingMessage } from 'node:http';
import type { AuthHeaders, Upstream, UpstreamEndpoint } from './upstream.js';

const routes = new WeakMap<IncomingMessage, UpstreamEndpoint>();

/** Send `req` (and its upgrade) to `endpoint`. */
export function setUpstreamRoute(req: IncomingMessage, endpoint: UpstreamEndpoint): void {
  routes.set(req, endpoint);
}

/** Where `req` goes: its route, else `fallback` (the configured upstream). */
export function upstreamFor(req: IncomingMessage, fallback: UpstreamEndpoint): UpstreamEndpoint {
  return routes.get(req) ?? fallback;
}

/** Overrides of {@link routedEndpoint}. */
export interface RouteOverrides {
  /** A fixed request-target (the kubelet path) instead of the caller's. */
  target?: string;
  /** The identity lines instead of the base's (the proxy's credentials plus `Impersonate-*`). */
  authHeaders?: () => Promise<AuthHeaders>;
}

/** `base` (its connection, TLS and host) with a different request-target or identity. */
export function routedEndpoint(base: Upstream, o: RouteOverrides): UpstreamEndpoint {
  return {
    url: base.url,
    host: base.host,
    target: o.target !== undefined ? () => o.target! : (u) => base.target(u),
    callerAuthHeaders: o.authHeaders ?? (() => base.callerAuthHeaders()),
    dial: (signal) => base.dial(signal),
  };
}
