/**
 * Authenticating a caller in the `impersonate` mode, in kube-apiserver's order (its union
 * authenticator): the front-proxy request headers (with a certificate verified against the
 * request-header CA), then the client certificate (verified against `--client-ca-file`), then the
 * bearer token from `Authorization` or, for WebSocket upgrades, from the subprotocol
 * `base64url.bearer.authorization.k8s.io.<token>`. A bearer token goes to the JWT authenticators
 * first (`--authentication-config`, in file order, read per request: a reload swaps them), then to
 * TokenReview:
 * - a JWT one of them verifies is the caller (no TokenReview);
 * - a token none of them claims (not a JWT, or its `iss` is no configured issuer) goes to TokenReview;
 * - a JWT of a configured issuer that does not verify is refused (401) without a TokenReview. This
 *   departs from kube-apiserver, whose token union would still ask its webhook: the issuer's rules
 *   are the administrator's policy for that issuer, and an upstream TokenReview that trusts the same
 *   issuer more loosely must not override them; and a flood of forged tokens costs no upstream
 *   request. The refusal is logged by the JWT authenticator (reason and issuer, never the token).
 * Anonymous requests are refused (`--anonymous-auth=false`) unless `AuthenticationConfiguration`
 * enables them (`anonymous.enabled`, fixed for the process: a reload may not change it). Then, as in
 * kube-apiserver (its union wrapped in `FailOnError` with the anonymous authenticator last):
 * - a request that presents no credentials is `system:anonymous` in `system:unauthenticated` (never
 *   `system:authenticated`), when `anonymous.conditions` is empty or one condition's `path` is the
 *   request's path exactly (decoded, without the query);
 * - a request that presents credentials which fail is 401, never anonymous: a bearer token (in
 *   `Authorization` or the WebSocket subprotocol), or a client certificate that neither the front-proxy
 *   CA (with an allowed name) nor the client CA accepts, where those are configured. `Authorization`
 *   with another scheme (Basic) is no bearer token, as in kube-apiserver.
 * The anonymous user is then authorized like any other: the pod streams by SubjectAccessReview, the
 * rest by the upstream, which sees `Impersonate-User: system:anonymous`.
 */
import type { X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { AnonymousAuthConfig } from './authentication-config.js';
import { hasPeerCertificate, userFromCertificate, verifiedAgainst } from './client-certificate.js';
import { firstHeader } from './identity-headers.js';
import { isAllowedFrontProxy, userFromRequestHeaders, type RequestHeaderConfig } from './request-header.js';
import { JwtAuthenticationError } from './jwt-error.js';
import type { JwtAuthenticatorSource } from './jwt-authentication.js';
import { bearerToken, type TokenReviewer } from './token-review.js';
import { websocketBearer } from './websocket-bearer.js';
import { ALL_UNAUTHENTICATED, ANONYMOUS_USER, withAuthenticatedGroup, type AuthenticationMethod, type UserInfo } from './user-info.js';

/** An authenticated caller. */
export interface Authenticated {
  user: UserInfo;
  method: AuthenticationMethod;
  /** True when the caller is a verified front proxy (its X-Remote-* lines were honoured). */
  frontProxy: boolean;
}

/** What the authenticator checks against. */
export interface AuthenticatorConfig {
  /** `--client-ca-file`, parsed; absent = no client-certificate authentication. */
  clientCa?: X509Certificate[];
  /** `--requestheader-*`; absent = no front-proxy authentication. */
  requestHeader?: RequestHeaderConfig;
  /** The proxy's JWT authenticators (`authenticator` read per request), shared by every cluster; absent = none. */
  jwt?: Pick<JwtAuthenticatorSource, 'authenticator'>;
  tokens: TokenReviewer;
  /** `AuthenticationConfiguration.anonymous`; absent or not `enabled` = no anonymous requests. */
  anonymous?: AnonymousAuthConfig;
}

/** The caller could not be authenticated: 401 `Unauthorized`. */
export class UnauthorizedError extends Error {
  override readonly name = 'UnauthorizedError';
}

/** `Connection: upgrade` and `Upgrade: websocket` (wsstream.IsWebSocketRequest). */
function isWebSocketRequest(req: IncomingMessage): boolean {
  const tokens = (v: string | string[] | undefined): string[] => (Array.isArray(v) ? v.join(',') : (v ?? '')).split(',').map((t) => t.trim().toLowerCase());
  return tokens(req.headers.connection).includes('upgrade') && tokens(req.headers.upgrade).includes('websocket');
}

/**
 * kube-apiserver's anonymous authenticator: allowed with no conditions, or when one condition's
 * `path` equals the request's path (`req.URL.Path`: percent-decoded, no query).
 */
export function anonymousAllowed(config: AnonymousAuthConfig | undefined, url: string | undefined): boolean {
  if (!config?.enabled) return false;
  if (config.conditions.length === 0) return true;
  const raw = (url ?? '/').split('?', 1)[0]!;
  let path: string;
  try {
    path = decodeURIComponent(raw);
  } catch {
    return false;
  }
  return config.conditions.some((c) => c.path === path);
}

/** The anonymous caller. */
function anonymousCaller(): Authenticated {
  return { user: { username: ANONYMOUS_USER, groups: [ALL_UNAUTHENTICATED], extra: {} }, method: 'anonymous', frontProxy: false };
}

/** The union authenticator. */
export class Authenticator {
  readonly #c: AuthenticatorConfig;

  constructor(config: AuthenticatorConfig) {
    this.#c = config;
  }

  /** Authenticate `req` or throw {@link UnauthorizedError} (a TokenReview failure rejects as is). */
  async authenticate(req: IncomingMessage): Promise<Authenticated> {
    const socket = req.socket as Partial<TLSSocket>;
    const tls = typeof socket.getPeerCertificate === 'function' ? (socket as TLSSocket) : undefined;
    const rh = this.#c.requestHeader;
    // Credentials that were presented and failed keep a request from being anonymous.
    let frontProxyRefused = false;
    let tokenFailed = false;
    if (tls && rh) {
      const cert = verifiedAgainst(tls, rh.ca);
      if (cert && isAllowedFrontProxy(cert, rh.allowedNames)) {
        const user = userFromRequestHeaders(req.rawHeaders, rh);
        if (user) return { user: withAuthenticatedGroup(user), method: 'requestheader', frontProxy: true };
      } else frontProxyRefused = true;
    }
    if (tls && this.#c.clientCa) {
      const cert = verifiedAgainst(tls, this.#c.clientCa);
      const user = cert ? userFromCertificate(cert) : undefined;
      if (user) return { user: withAuthenticatedGroup(user), method: 'x509', frontProxy: false };
    }
    const token = bearerToken(firstHeader(req.rawHeaders, 'authorization'));
    if (token !== undefined) {
      const caller = await this.#bearer(token);
      if (caller) return caller;
      tokenFailed = true;
    } else if (isWebSocketRequest(req)) {
      const ws = websocketBearer(req.rawHeaders);
      if (ws.error !== undefined) throw new UnauthorizedError(ws.error);
      if (ws.token !== undefined) {
        const caller = await this.#bearer(ws.token);
        if (caller) return caller;
        tokenFailed = true;
      }
    }
    if (!tokenFailed && anonymousAllowed(this.#c.anonymous, req.url)) {
      // Reaching here, a certificate presented to a configured trust failed: the front-proxy CA
      // refused it, or the client CA gave no user.
      const certificateFailed = tls !== undefined && (frontProxyRefused || this.#c.clientCa !== undefined) && hasPeerCertificate(tls);
      if (!certificateFailed) return anonymousCaller();
    }
    throw new UnauthorizedError('Unauthorized');
  }

  /** The bearer-token union: the JWT authenticators, then TokenReview (see the file comment). */
  async #bearer(token: string): Promise<Authenticated | undefined> {
    const jwt = this.#c.jwt?.authenticator;
    if (jwt) {
      let verified;
      try {
        verified = await jwt.authenticateToken(token);
      } catch (e) {
        if (e instanceof JwtAuthenticationError) throw new UnauthorizedError('Unauthorized', { cause: e });
        throw e;
      }
      if (verified) return { user: withAuthenticatedGroup(verified.user), method: 'jwt', frontProxy: false };
    }
    const result = await this.#c.tokens.review(token);
    return result.authenticated ? { user: withAuthenticatedGroup(result.user), method: 'token', frontProxy: false } : undefined;
  }
}
