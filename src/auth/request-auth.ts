/**
 * The authentication and authorization step every request takes (a Fastify `onRequest` hook, so it
 * runs for upgrades as for plain requests), by `--authn` mode:
 *
 * - `passthrough`: nothing is decided here; the caller's `Authorization` and `Impersonate-*` lines go
 *   upstream unchanged and the upstream decides. Front-proxy `X-Remote-*` lines are dropped.
 * - `impersonate`: the caller is authenticated (401 otherwise, and 401 for an identity holding a
 *   control character or no UTF-8 form: `checkIdentity`), its own `Impersonate-*` request is
 *   checked (403), every pod streaming request is authorized with a SubjectAccessReview for `create`
 *   on `pods/exec|attach|portforward` — and every kubelet streaming endpoint reached through the node
 *   proxy for `create` on `nodes/proxy` (`streamReviewAttributes`) —, GET WebSocket upgrades included
 *   (403 before any upgrade); then
 *   the caller's identity lines are removed and the verified user is kept for the router
 *   (`src/routing/`), which presents it to the backend its route leads to. The reviews go where the
 *   request's route leads (`reviewersFor`): a cluster behind an agent reviews its own callers.
 *
 * The proxy's own endpoints (GET and HEAD on `/healthz`, `/livez`, `/readyz`, `/metrics`) are not
 * authenticated; every other method on those paths is, and goes upstream like any request.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendStatus } from '../wire/status-reply.js';
import { errorStatus, type V1Status } from '../status.js';
import { streamReviewAttributes } from '../routing/request-path.js';
import { UnauthorizedError, type Authenticator } from './authenticator.js';
import { AuthorizationError, ForbiddenError, type Authorizer } from './authorizer.js';
import type { Reviewers } from './reviewers.js';
import { ImpersonationHeaderError, parseImpersonation, stripIdentityHeaders, type StripOptions } from './identity-headers.js';
import { impersonate } from './impersonation.js';
import { BEARER_PROTOCOL_PREFIX, websocketBearer, withWebSocketProtocols } from './websocket-bearer.js';
import { checkWebSocketOrigin, DEFAULT_WEBSOCKET_ALLOWED_ORIGINS, type AllowedOrigins } from './websocket-origin.js';
import { checkIdentity, InvalidIdentityError, type UserInfo } from './user-info.js';

/** `--authn`. */
export type AuthnMode = 'passthrough' | 'impersonate';

/** What the hook needs. */
export interface RequestAuthOptions {
  mode: AuthnMode;
  /** Lower-case front-proxy header names and prefixes, dropped from every request. */
  requestHeaderNames: readonly string[];
  requestHeaderPrefixes: readonly string[];
  /** Requests the proxy serves itself, never authenticated (GET and HEAD on its own paths: `isOwnRequest`). */
  isOwnRequest: (req: IncomingMessage) => boolean;
  /** impersonate mode only: the reviewers of the proxy's own API. */
  authenticator?: Authenticator;
  authorizer?: Authorizer;
  /**
   * impersonate mode: the reviewers of the cluster `req` leads to when that is not the proxy's own
   * API (the route's reviews, `Router.reviewsFor`), or the Status refusing the request (that
   * cluster is unavailable); undefined = {@link authenticator} and {@link authorizer}.
   */
  reviewersFor?: (req: IncomingMessage) => Reviewers | { refuse: V1Status } | undefined;
  /**
   * `--websocket-allowed-origins` (impersonate mode): a cross-origin WebSocket upgrade whose caller was
   * authenticated by a client certificate must come from a listed origin (`websocket-origin.ts`, rule 3).
   */
  allowedOrigins?: AllowedOrigins;
  /** Gate `AuthorizePodWebsocketUpgradeCreatePermission` (default on): see `streamReviewAttributes`. */
  createForWebSocketUpgrade?: boolean;
  log?: { warn(obj: object, msg: string): void };
}

const users = new WeakMap<IncomingMessage, UserInfo>();

/** The verified user a request acts as (impersonate mode), for audit and logs. */
export function authenticatedUserOf(req: IncomingMessage): UserInfo | undefined {
  return users.get(req);
}

/** Remove caller identity lines from `req` in place (raw lines and the parsed header object). */
export function stripRequestIdentity(req: IncomingMessage, o: StripOptions): void {
  const { rawHeaders, removed } = stripIdentityHeaders(req.rawHeaders, o);
  if (removed.length === 0) return;
  req.rawHeaders.splice(0, req.rawHeaders.length, ...rawHeaders);
  for (const name of removed) delete req.headers[name];
}

/**
 * Remove every bearer-token entry from the request's subprotocol list, however the caller was
 * authenticated (by that token, kube-apiserver's ProtocolAuthenticator removes it too; by a
 * certificate or `Authorization`, the entry was never checked): the proxy acts on its own credentials
 * upstream, and a caller's token is never passed on.
 */
function stripSubprotocolTokens(req: IncomingMessage): void {
  const lines = req.headers['sec-websocket-protocol'];
  if (lines === undefined || !lines.includes(BEARER_PROTOCOL_PREFIX)) return;
  const { protocols } = websocketBearer(req.rawHeaders);
  req.rawHeaders.splice(0, req.rawHeaders.length, ...withWebSocketProtocols(req.rawHeaders, protocols));
  if (protocols.length > 0) req.headers['sec-websocket-protocol'] = protocols.join(', ');
  else delete req.headers['sec-websocket-protocol'];
}

/** Build the `onRequest` hook. */
export function createRequestAuthHook(o: RequestAuthOptions): (request: FastifyRequest, res: FastifyReply) => Promise<FastifyReply | undefined> {
  const passthroughStrip: StripOptions = { authorization: false, impersonation: false, requestHeaderNames: o.requestHeaderNames, requestHeaderPrefixes: o.requestHeaderPrefixes };
  const impersonateStrip: StripOptions = { ...passthroughStrip, authorization: true, impersonation: true };
  return async (request, res) => {
    const req = request.raw;
    if (o.isOwnRequest(req)) return undefined;
    if (o.mode === 'passthrough') {
      stripRequestIdentity(req, passthroughStrip);
      return undefined;
    }
    const placed = o.reviewersFor?.(req);
    if (placed && 'refuse' in placed) return sendStatus(res, placed.refuse);
    const authenticator = placed?.authenticator ?? o.authenticator!;
    const authorizer = placed?.authorizer ?? o.authorizer!;
    let user: UserInfo;
    try {
      const caller = await authenticator.authenticate(req);
      // An identity with a control character (or no UTF-8 form) is refused here, before any upstream
      // work: no header, log line or terminal could carry it faithfully (issue 31, finding 1).
      checkIdentity(caller.user);
      user = caller.user;
      const originRefusal = checkWebSocketOrigin(req, { allowed: o.allowedOrigins ?? DEFAULT_WEBSOCKET_ALLOWED_ORIGINS, authenticatedBy: caller.method });
      if (originRefusal) {
        request.log.info({ origin: req.headers.origin, url: req.url }, 'WebSocket upgrade refused by the Origin policy');
        return sendStatus(res, originRefusal);
      }
      const asked = parseImpersonation(req.rawHeaders);
      if (asked) {
        user = await impersonate(caller.user, asked, authorizer);
        checkIdentity(user);
      }
      // pods/exec|attach|portforward, and the kubelet's streams through nodes/proxy: `create`, whatever the
      // method (pods: a GET as `get` with AuthorizePodWebsocketUpgradeCreatePermission off).
      const review = streamReviewAttributes(req.url ?? '/', { ...(req.method !== undefined ? { method: req.method } : {}), createForWebSocketUpgrade: o.createForWebSocketUpgrade ?? true });
      if (review) await authorizer.authorize(user, review);
    } catch (e) {
      if (e instanceof ForbiddenError) return sendStatus(res, e.status);
      if (e instanceof ImpersonationHeaderError) return sendStatus(res, errorStatus(400, e.message, 'BadRequest'));
      if (e instanceof InvalidIdentityError) {
        // The field, never the value: it is what a terminal would run.
        request.log.info({ field: e.field, reason: e.message }, 'authentication refused: the identity cannot be carried');
        return sendStatus(res, errorStatus(401, 'Unauthorized', 'Unauthorized'));
      }
      if (e instanceof AuthorizationError) {
        request.log.warn({ err: e }, 'authorization failed');
        return sendStatus(res, errorStatus(500, e.message, 'InternalError'));
      }
      if (!(e instanceof UnauthorizedError)) request.log.warn({ err: e }, 'authentication failed');
      return sendStatus(res, errorStatus(401, 'Unauthorized', 'Unauthorized'));
    }
    stripRequestIdentity(req, impersonateStrip);
    stripSubprotocolTokens(req);
    users.set(req, user);
    return undefined;
  };
}
