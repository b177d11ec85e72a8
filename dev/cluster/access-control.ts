/**
 * The chain every API request of a dev cluster with token authentication goes through, in
 * kube-apiserver's filter order: authentication (401) → impersonation (400/403) → authorization of
 * the effective user for the request's attributes (403) → for GET on pods/exec, pods/attach and
 * pods/portforward, the extra `create` check of `AuthorizePodWebsocketUpgradeCreatePermission`
 * (kube-apiserver 1.35, k/k#133515), so a WebSocket upgrade cannot exec with only `get`.
 *
 * Authentication is kube-apiserver's union of the bearer-token header and, for WebSocket upgrades
 * only, the `base64url.bearer.authorization.k8s.io.<token>` subprotocol a browser must use
 * (`apiserver/pkg/authentication/request/websocket/protocol.go`, parsed by the proxy's own
 * `auth/websocket-bearer.ts`): unpadded base64url, valid UTF-8, one token at most, another protocol
 * required. Once that token is verified it is taken out of the request's subprotocol list.
 */
import type { IncomingMessage } from 'node:http';
import { websocketBearer } from '../../src/auth/websocket-bearer.js';
import type { V1Status } from '../../src/status.js';
import { impersonate } from './impersonation.js';
import type { Authorizer } from './policy.js';
import { forbiddenStatus, requestAttributes } from './request-attributes.js';
import { unauthorizedStatus, type StaticTokenAuthenticator, type UserInfo } from './token-auth.js';
import { isWebSocketRequest, setWebSocketProtocols } from './ws-subprotocol.js';

/** What {@link AccessControl.check} reads of a request (and rewrites: the subprotocol token). */
export type CheckedRequest = Pick<IncomingMessage, 'method' | 'url' | 'headers' | 'headersDistinct' | 'rawHeaders'>;

/** Subresources that start a session in a container: `create` is required whatever the method. */
export const CONNECT_SUBRESOURCES: ReadonlySet<string> = new Set(['exec', 'attach', 'portforward']);

/** The verdict on one request. */
export type AccessDecision =
  | { ok: true; user: UserInfo; impersonated: boolean }
  | { ok: false; status: V1Status; user?: UserInfo };

/** Authentication, impersonation and authorization of API requests. */
export class AccessControl {
  constructor(
    readonly authenticator: StaticTokenAuthenticator,
    readonly authorizer: Authorizer,
  ) {}

  /**
   * Decide `req` (plain or upgrade); the refusal Status is what the apiserver would answer. A
   * verified subprotocol token is removed from `req`'s `Sec-WebSocket-Protocol`.
   */
  check(req: CheckedRequest): AccessDecision {
    const requester = this.#authenticate(req);
    if (!requester) return { ok: false, status: unauthorizedStatus() };

    const outcome = impersonate(req.headersDistinct, requester, this.authorizer);
    if (!outcome.ok) return { ok: false, status: outcome.status, user: requester };
    const user = outcome.user;

    const attrs = requestAttributes(req.method ?? 'GET', req.url ?? '/', user);
    if (!this.authorizer.authorize(attrs).allowed) return { ok: false, status: forbiddenStatus(attrs), user };
    if (
      attrs.resourceRequest &&
      attrs.apiGroup === '' &&
      attrs.resource === 'pods' &&
      CONNECT_SUBRESOURCES.has(attrs.subresource) &&
      attrs.verb !== 'create'
    ) {
      const create = { ...attrs, verb: 'create' };
      if (!this.authorizer.authorize(create).allowed) return { ok: false, status: forbiddenStatus(create), user };
    }
    return { ok: true, user, impersonated: outcome.impersonated };
  }

  /** The union: the `Authorization` header, then (WebSocket upgrades only) the subprotocol token. */
  #authenticate(req: CheckedRequest): UserInfo | undefined {
    const byHeader = this.authenticator.authenticateHeader(req.headers.authorization);
    if (byHeader || !isWebSocketRequest(req)) return byHeader;
    const ws = websocketBearer(req.rawHeaders);
    if (ws.error !== undefined || ws.token === undefined) return undefined;
    const user = this.authenticator.authenticateToken(ws.token);
    if (user) setWebSocketProtocols(req, ws.protocols);
    return user;
  }
}
