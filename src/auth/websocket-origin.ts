/**
 * The Origin policy of WebSocket upgrades (`--websocket-allowed-origins`), against cross-site
 * WebSocket hijacking. Browsers open WebSockets to any site and send the `Origin` of the page; they
 * also present a client certificate by themselves. kube-apiserver accepts every Origin (its gorilla
 * and x/net upgraders are given no origin check), which is safe while credentials are explicit (a
 * bearer token the page must hold) and unsafe when the browser supplies them (a certificate).
 *
 * Rules, in order, for WebSocket upgrades only (`Connection: upgrade`, `Upgrade: websocket`):
 * 1. No `Origin` (kubectl, client libraries): allowed.
 * 2. An explicit list: an `Origin` not in it is refused. Checked before authentication (no
 *    TokenReview, nothing upstream).
 * 3. A caller that was AUTHENTICATED BY ITS CLIENT CERTIFICATE (`x509`, decided after
 *    authentication, from how the caller actually authenticated): a cross-origin request (its
 *    `Origin`'s host differs from `Host`, gorilla's `checkSameOrigin`) is refused unless the origin is
 *    listed explicitly — `*` does not count. What else the request carries does not matter: a page
 *    can add any subprotocol, a bogus `base64url.bearer.authorization.k8s.io.…` entry included, and
 *    the certificate authenticates first (kube-apiserver's order), so such a token is never checked.
 *    A front proxy's request-header identity is the front proxy's decision and is not refused here.
 * Refusals are 403 Forbidden. Pure.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ConfigError } from '../errors.js';
import { errorStatus, type V1Status } from '../status.js';
import type { AuthenticationMethod } from './user-info.js';

/** `--websocket-allowed-origins`: `*` (any origin), or exact origins (`https://console.example.com`). */
export type AllowedOrigins = '*' | readonly string[];

/**
 * Default `*`: every origin, as kube-apiserver, so existing browser clients keep working. The
 * client-certificate rule still applies.
 */
export const DEFAULT_WEBSOCKET_ALLOWED_ORIGINS: AllowedOrigins = '*';

/** What the policy checks against. */
export interface WebSocketOriginPolicy {
  allowed: AllowedOrigins;
  /**
   * How the caller was authenticated, once it is known (impersonate mode, after the authenticator);
   * absent before authentication, when only rules 1 and 2 apply.
   */
  authenticatedBy?: AuthenticationMethod;
}

/** The request facts the policy reads. */
export interface OriginRequest {
  headers: IncomingHttpHeaders;
  rawHeaders: readonly string[];
}

/** An origin as browsers serialize it (RFC 6454): lower-case scheme and host, no trailing slash. */
function normalizeOrigin(origin: string): string {
  return origin.trim().toLowerCase().replace(/\/+$/, '');
}

/**
 * Parse the flag: `*`, or a comma-separated list of `scheme://host[:port]` origins (the literal
 * `null` origin of sandboxed pages may be listed too). Throws ConfigError.
 */
export function parseAllowedOrigins(value: string | undefined): AllowedOrigins {
  if (value === undefined) return DEFAULT_WEBSOCKET_ALLOWED_ORIGINS;
  const entries = value.split(',').map((v) => v.trim()).filter((v) => v !== '');
  if (entries.length === 0) throw new ConfigError('--websocket-allowed-origins: want * or a comma-separated list of origins, got an empty list');
  if (entries.includes('*')) {
    if (entries.length > 1) throw new ConfigError('--websocket-allowed-origins: * cannot be combined with explicit origins');
    return '*';
  }
  return entries.map((e) => {
    if (e === 'null') return e;
    if (!/^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]+\/?$/i.test(e)) {
      throw new ConfigError(`--websocket-allowed-origins: ${JSON.stringify(e)} is not an origin (scheme://host[:port], no path)`);
    }
    return normalizeOrigin(e);
  });
}

/** `Connection: upgrade` and `Upgrade: websocket` (wsstream.IsWebSocketRequest). */
function isWebSocketRequest(headers: IncomingHttpHeaders): boolean {
  const tokens = (v: string | string[] | undefined): string[] => (Array.isArray(v) ? v.join(',') : (v ?? '')).split(',').map((t) => t.trim().toLowerCase());
  return tokens(headers.connection).includes('upgrade') && tokens(headers.upgrade).includes('websocket');
}

/** True when `origin`'s host (with its port as written) is `host`, ASCII case-insensitively (gorilla's `checkSameOrigin`). */
export function isSameOrigin(origin: string, host: string | undefined): boolean {
  const at = origin.indexOf('://');
  if (at < 0 || host === undefined) return false;
  return origin.slice(at + 3).toLowerCase() === host.trim().toLowerCase();
}

/** The 403 of a refused origin. */
function refused(origin: string, why: string): V1Status {
  return errorStatus(403, `websocket: request origin ${JSON.stringify(origin)} not allowed: ${why}`, 'Forbidden');
}

/** The refusal of `req` under `policy`, or undefined when it may proceed (every non-WebSocket request does). */
export function checkWebSocketOrigin(req: OriginRequest, policy: WebSocketOriginPolicy): V1Status | undefined {
  if (!isWebSocketRequest(req.headers)) return undefined;
  const raw = req.headers.origin;
  if (raw === undefined) return undefined;
  const origin = normalizeOrigin(raw);
  const listed = policy.allowed !== '*' && policy.allowed.includes(origin);
  if (policy.allowed !== '*' && !listed) return refused(raw, 'not in --websocket-allowed-origins');
  if (policy.authenticatedBy !== 'x509' || listed || isSameOrigin(origin, req.headers.host)) return undefined;
  return refused(raw, 'a cross-origin request authenticated by a client certificate must come from an origin listed in --websocket-allowed-origins');
}
