/**
 * The identity-bearing request headers, as pure functions over Node's `rawHeaders` array:
 * reading a caller's `Impersonate-*` request (k8s.io/apiserver `filters/impersonation.go`), removing
 * the lines a caller must not pass upstream (its `Authorization` when the proxy authenticates, its
 * `Impersonate-*` once consumed, front-proxy `X-Remote-*` lines always), and writing the
 * `Impersonate-*` lines that carry a verified user upstream. Header values are byte strings (as Node
 * reads them); identity values are Unicode text, read from and written as their UTF-8 bytes.
 */
import { headerValueText, utf8HeaderValue } from '../wire/request-head.js';
import { InvalidIdentityError, type UserInfo } from './user-info.js';

export const IMPERSONATE_USER = 'Impersonate-User';
export const IMPERSONATE_UID = 'Impersonate-Uid';
export const IMPERSONATE_GROUP = 'Impersonate-Group';
/** Prefix of `Impersonate-Extra-<key>` lines; the key is percent-encoded on the wire. */
export const IMPERSONATE_EXTRA_PREFIX = 'Impersonate-Extra-';

/** What a caller asked to impersonate. */
export interface ImpersonationRequest {
  user?: string;
  uid?: string;
  groups: string[];
  /** Keys lower-case and percent-decoded. */
  extra: Record<string, string[]>;
}

/** Values of every line named `name` (case-insensitive), in order. */
export function headerValues(rawHeaders: readonly string[], name: string): string[] {
  const lower = name.toLowerCase();
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === lower) out.push(rawHeaders[i + 1]!);
  return out;
}

/**
 * The text of an identity-bearing header value (a byte string, as Node reads header lines): its bytes
 * read as UTF-8, as Go's string holds them. A value that is not UTF-8 is refused
 * ({@link InvalidIdentityError}, 401): there is no user it names.
 */
export function identityText(value: string, field: string): string {
  const text = headerValueText(value);
  if (text === undefined) throw new InvalidIdentityError(field, 'is not UTF-8');
  return text;
}

/** The first value of `name`, or undefined (Go's `Header.Get`). */
export function firstHeader(rawHeaders: readonly string[], name: string): string | undefined {
  return headerValues(rawHeaders, name)[0];
}

/** `url.PathUnescape`, keeping the text as is when it is not valid percent-encoding. */
function unescapeExtraKey(key: string): string {
  try {
    return decodeURIComponent(key);
  } catch {
    return key;
  }
}

/**
 * The caller's impersonation request, or undefined when it sent no `Impersonate-*` line. Throws
 * {@link ImpersonationHeaderError} when groups, extra or uid come without a user (apiserver: 400).
 */
export function parseImpersonation(rawHeaders: readonly string[]): ImpersonationRequest | undefined {
  const req: ImpersonationRequest = { groups: [], extra: {} };
  let any = false;
  const extraPrefix = IMPERSONATE_EXTRA_PREFIX.toLowerCase();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const lower = rawHeaders[i]!.toLowerCase();
    if (lower !== 'impersonate-user' && lower !== 'impersonate-uid' && lower !== 'impersonate-group' && !lower.startsWith(extraPrefix)) continue;
    const value = identityText(rawHeaders[i + 1]!, rawHeaders[i]!);
    if (lower === 'impersonate-user') {
      any = true;
      req.user ??= value;
    } else if (lower === 'impersonate-uid') {
      any = true;
      req.uid ??= value;
    } else if (lower === 'impersonate-group') {
      any = true;
      req.groups.push(value);
    } else if (lower.startsWith(extraPrefix)) {
      any = true;
      const key = unescapeExtraKey(lower.slice(extraPrefix.length));
      (req.extra[key] ??= []).push(value);
    }
  }
  if (!any) return undefined;
  if (req.user === undefined || req.user === '') {
    const asked = [...req.groups.map((g) => `group ${JSON.stringify(g)}`), ...Object.keys(req.extra).map((k) => `extra ${JSON.stringify(k)}`)];
    if (req.uid !== undefined) asked.push(`uid ${JSON.stringify(req.uid)}`);
    throw new ImpersonationHeaderError(`requested [${asked.join(' ')}] without impersonating a user`);
  }
  return req;
}

/** A malformed impersonation request (400 BadRequest). */
export class ImpersonationHeaderError extends Error {
  override readonly name = 'ImpersonationHeaderError';
}

/** Which caller lines to drop before a request goes upstream. */
export interface StripOptions {
  /** Drop `Authorization` (the proxy authenticates the caller and calls with its own credentials). */
  authorization: boolean;
  /** Drop `Impersonate-*` (consumed by the proxy). */
  impersonation: boolean;
  /** Lower-case header names and prefixes of the front-proxy headers, always dropped. */
  requestHeaderNames: readonly string[];
  requestHeaderPrefixes: readonly string[];
}

/** True when a (lower-case) header name must not go upstream under `o`. */
export function isStrippedIdentityHeader(lower: string, o: StripOptions): boolean {
  if (o.authorization && lower === 'authorization') return true;
  if (o.impersonation && (lower === 'impersonate-user' || lower === 'impersonate-uid' || lower === 'impersonate-group' || lower.startsWith('impersonate-extra-'))) return true;
  if (o.requestHeaderNames.includes(lower)) return true;
  return o.requestHeaderPrefixes.some((p) => lower.startsWith(p));
}

/** `rawHeaders` without the lines {@link isStrippedIdentityHeader} names; the names removed, lower-case. */
export function stripIdentityHeaders(rawHeaders: readonly string[], o: StripOptions): { rawHeaders: string[]; removed: string[] } {
  const kept: string[] = [];
  const removed = new Set<string>();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const lower = rawHeaders[i]!.toLowerCase();
    if (isStrippedIdentityHeader(lower, o)) removed.add(lower);
    else kept.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return { rawHeaders: kept, removed: [...removed] };
}

/** RFC 7230 token characters: what a header name may hold. */
const TOKEN_BYTE = /^[!#$&'*+\-.^_`|~0-9A-Za-z]$/;

/**
 * Percent-encode an extra key for a header name, as client-go's `headerKeyEscape` does for
 * `Impersonate-Extra-*` and `X-Remote-Extra-*`: every byte of its UTF-8 that is not a token
 * character (`/` included), and `%` itself, becomes `%XX`.
 */
function escapeExtraKey(key: string): string {
  let out = '';
  for (const byte of Buffer.from(key, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += byte < 0x80 && TOKEN_BYTE.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * The `Impersonate-*` lines that present `user` upstream, every value as its UTF-8 bytes
 * ({@link utf8HeaderValue}; the identity was checked at authentication). Every group the user has is
 * sent, `system:authenticated` included: with at least one `Impersonate-Group` line kube-apiserver
 * adds no group of its own, so a user named `system:serviceaccount:NS:NAME` by a JWT is not given the
 * service-account groups its own JWT authenticator would not give (issue 31, finding 9). The proxy's
 * RBAC allows `impersonate` on `groups` for that reason (manifests/).
 */
export function impersonationHeaders(user: UserInfo): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = { [IMPERSONATE_USER]: utf8HeaderValue(user.username) };
  if (user.uid !== undefined && user.uid !== '') out[IMPERSONATE_UID] = utf8HeaderValue(user.uid);
  if (user.groups.length > 0) out[IMPERSONATE_GROUP] = user.groups.map(utf8HeaderValue);
  for (const [key, values] of Object.entries(user.extra)) if (values.length > 0) out[IMPERSONATE_EXTRA_PREFIX + escapeExtraKey(key)] = values.map(utf8HeaderValue);
  return out;
}

/** Front-proxy (request-header) identity lines toward aggregated API servers, as kube-aggregator names them. */
export const REMOTE_USER = 'X-Remote-User';
export const REMOTE_UID = 'X-Remote-Uid';
export const REMOTE_GROUP = 'X-Remote-Group';
export const REMOTE_EXTRA_PREFIX = 'X-Remote-Extra-';

/**
 * The `X-Remote-*` lines that present `user` to an aggregated API server (client-go's
 * `SetAuthProxyHeaders`): the user, one `X-Remote-Group` line per group (all of them,
 * `system:authenticated` included, as kube-aggregator sends them), `X-Remote-Extra-<key>` with the key
 * percent-encoded, and `X-Remote-Uid` (on by default since 1.33's `RemoteRequestHeaderUID`). The
 * caller's own `X-Remote-*` lines are always removed before these are set.
 */
export function frontProxyHeaders(user: UserInfo): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = { [REMOTE_USER]: utf8HeaderValue(user.username) };
  if (user.uid !== undefined && user.uid !== '') out[REMOTE_UID] = utf8HeaderValue(user.uid);
  if (user.groups.length > 0) out[REMOTE_GROUP] = user.groups.map(utf8HeaderValue);
  for (const [key, values] of Object.entries(user.extra)) if (values.length > 0) out[REMOTE_EXTRA_PREFIX + escapeExtraKey(key)] = values.map(utf8HeaderValue);
  return out;
}
