/**
 * The router: every request that goes upstream is given exactly one {@link Route} here, once, in an
 * `onRequest` hook that runs after authentication (so the verified caller is known) and before any
 * handler. Resolvers are asked in order; the first that claims the request decides:
 *
 * 1. a cluster behind an agent (`/clusters/NAME/…`, prefix stripped before routing) → a stream of
 *    that agent's tunnel (`src/tunnel/`);
 * 2. an aggregated API (`/apis/<group>/<version>/…` of a registered, non-local APIService) → its
 *    backend, with the front-proxy identity (`src/aggregation/`);
 * 3. `--upstream-mode=kubelet` and a pod streaming request → the pod's kubelet and its own path
 *    (`kubelet/kubelet-locator.ts`);
 * 4. everything else → the primary upstream, with the caller's identity presented as `--authn` says
 *    (the caller's own credentials, or the proxy's plus `Impersonate-*`); 404 when there is none.
 *
 * A resolver may also refuse a request with a Status (pod not found, APIService unavailable), which
 * is answered before any upgrade. Handlers and proxies then read the route with `routeOf(req)`.
 *
 * In `--authn impersonate` the caller is reviewed where its route leads: before authentication the
 * authentication hook asks {@link Router.reviewsFor}, which the resolvers of other clusters answer
 * with their route's {@link Route.reviews} (a cluster behind an agent: reviews through its tunnel).
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendStatus } from '../wire/status-reply.js';
import type { ReviewApi } from '../api-client.js';
import { authenticatedUserOf, type AuthnMode } from '../auth/request-auth.js';
import { impersonationHeaders } from '../auth/identity-headers.js';
import type { UserInfo } from '../auth/user-info.js';
import { errorStatus, type V1Status } from '../status.js';
import { routeVia, setRoute, type Route } from './route.js';
import type { Upstream } from './upstream.js';

/** A resolver's answer: the route, or the Status refusing the request. */
export type RouteDecision = { route: Route } | { refuse: V1Status };

/** Where a caller's reviews go: the route's cluster ({@link Route.reviews}), or the Status refusing the request. */
export type ReviewDecision = { reviews: ReviewApi } | { refuse: V1Status };

/** One way of placing requests. */
export interface RouteResolver {
  /**
   * The decision for `req` (whose caller, in impersonate mode, is `caller`), or undefined when this
   * resolver does not place it. Rejects only on an internal failure (answered 500).
   */
  resolve(req: IncomingMessage, caller: UserInfo | undefined): Promise<RouteDecision | undefined> | RouteDecision | undefined;
  /**
   * For a resolver whose routes lead to another cluster than the proxy's own API: that cluster's
   * {@link Route.reviews} for `req`, decided before authentication from what the request names
   * (no caller yet), or the refusal its route would get. Undefined when this resolver does not place
   * `req` (or its routes are reviewed by the proxy's own API).
   */
  reviews?(req: IncomingMessage): ReviewDecision | undefined;
}

/** What the router needs. */
export interface RouterOptions {
  /**
   * The primary upstream: where every request no resolver claims goes. Absent when the proxy only
   * fronts clusters behind agents: unclaimed requests then get a 404 Status.
   */
  upstream?: Upstream;
  /** `--authn`: how the caller is presented to the primary upstream. */
  authn: AuthnMode;
  /** Resolvers asked before the primary upstream, in order. */
  resolvers?: readonly RouteResolver[];
}

/**
 * The route to the primary upstream: the upstream itself in passthrough (the caller's request-target
 * and credentials unchanged), or the proxy's own credentials plus `Impersonate-*` for the verified
 * caller.
 */
export function primaryRoute(upstream: Upstream, authn: AuthnMode, caller: UserInfo | undefined): Route {
  if (authn === 'passthrough' || caller === undefined) return upstream;
  return routeVia(upstream, { authHeaders: async () => ({ ...(await upstream.authHeaders()), ...impersonationHeaders(caller) }) });
}

/** The 404 of a proxy without a primary upstream for a request no resolver placed. */
function noUpstreamStatus(req: IncomingMessage): V1Status {
  const path = (req.url ?? '/').split('?')[0] ?? '/';
  return errorStatus(404, `the server could not find the requested resource: this proxy has no default upstream; address a cluster as /clusters/NAME${path}`, 'NotFound');
}

/** Places requests on routes. */
export class Router {
  readonly #o: RouterOptions;

  constructor(o: RouterOptions) {
    this.#o = o;
  }

  /** Decide where `req` goes. */
  async resolve(req: IncomingMessage): Promise<RouteDecision> {
    const caller = authenticatedUserOf(req);
    for (const resolver of this.#o.resolvers ?? []) {
      const decision = await resolver.resolve(req, caller);
      if (decision) return decision;
    }
    if (!this.#o.upstream) return { refuse: noUpstreamStatus(req) };
    return { route: primaryRoute(this.#o.upstream, this.#o.authn, caller) };
  }

  /**
   * Where the caller of `req` is reviewed: the first resolver that places the request's reviews
   * (a cluster behind an agent), else undefined (the proxy's own API). The authentication hook asks
   * this before it authenticates, so a caller of `/clusters/NAME/…` is authenticated and
   * authorized by cluster NAME's apiserver, through its tunnel.
   */
  reviewsFor(req: IncomingMessage): ReviewDecision | undefined {
    for (const resolver of this.#o.resolvers ?? []) {
      const decision = resolver.reviews?.(req);
      if (decision) return decision;
    }
    // Without a primary upstream the request will get the 404 anyway: no review is made for it.
    if (!this.#o.upstream) return { refuse: noUpstreamStatus(req) };
    return undefined;
  }

  /**
   * The `onRequest` hook (add it after the authentication hook): route the request, or answer the
   * refusal. Requests the proxy serves itself (`isOwnRequest`) are never routed.
   */
  hook(isOwnRequest: (req: IncomingMessage) => boolean): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined> {
    return async (request, reply) => {
      const req = request.raw;
      if (isOwnRequest(req)) return undefined;
      const decision = await this.resolve(req);
      if ('refuse' in decision) return sendStatus(reply, decision.refuse);
      setRoute(req, decision.route);
      if (decision.route.name !== this.#o.upstream?.name) request.log.info({ route: decision.route.name }, 'request routed');
      return undefined;
    };
  }
}
