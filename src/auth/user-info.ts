/**
 * Who a caller is, as Kubernetes' `user.Info` describes it: name, uid, groups and extra values. The
 * authenticators produce it, the authorizer checks it, and the impersonating upstream leg carries it.
 */
import { LONE_SURROGATE } from '../wire/request-head.js';

/** The group every authenticated user belongs to (added by kube-apiserver's authenticator union). */
export const ALL_AUTHENTICATED = 'system:authenticated';

/** The user of a request without credentials, when anonymous requests are enabled (and an impersonable name). */
export const ANONYMOUS_USER = 'system:anonymous';

/** The group of {@link ANONYMOUS_USER}, who never gets `system:authenticated` added. */
export const ALL_UNAUTHENTICATED = 'system:unauthenticated';

/** Prefix of service-account user names: `system:serviceaccount:NAMESPACE:NAME`. */
export const SERVICE_ACCOUNT_PREFIX = 'system:serviceaccount:';

/** An authenticated user. */
export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  /** Extra attributes; keys lower-case, as kube-apiserver keeps them. */
  extra: Record<string, string[]>;
}

/**
 * How the user was authenticated (audit, logs and the WebSocket Origin rule): `token` by TokenReview,
 * `jwt` by the proxy's own JWT authenticators. Both are explicit bearer credentials a page must hold,
 * so the Origin rule treats them alike (only `x509` is supplied by a browser on its own). `anonymous`:
 * no credentials at all, admitted by `AuthenticationConfiguration.anonymous`.
 */
export type AuthenticationMethod = 'requestheader' | 'x509' | 'token' | 'jwt' | 'anonymous';

/** `user` with `system:authenticated` in its groups (once), as the apiserver's union authenticator adds it. */
export function withAuthenticatedGroup(user: UserInfo): UserInfo {
  return user.groups.includes(ALL_AUTHENTICATED) ? user : { ...user, groups: [...user.groups, ALL_AUTHENTICATED] };
}

/** Namespace and name of a service-account user name, or undefined for any other user. */
export function serviceAccountOf(username: string): { namespace: string; name: string } | undefined {
  if (!username.startsWith(SERVICE_ACCOUNT_PREFIX)) return undefined;
  const parts = username.slice(SERVICE_ACCOUNT_PREFIX.length).split(':');
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') return undefined;
  return { namespace: parts[0]!, name: parts[1]! };
}

/**
 * An identity the proxy will not carry (issue 31): a user name, uid, group, extra key or value that
 * holds a control character (C0, DEL or C1), begins or ends with a space (a header parser trims it
 * away), is not well-formed Unicode (a lone surrogate, from a JSON `\ud800` escape), or came in a
 * header line that is not UTF-8. Answered 401 at authentication,
 * before any upstream work: such a value has no faithful form in an HTTP header, and a terminal or a
 * log line would read it as commands.
 */
export class InvalidIdentityError extends Error {
  override readonly name = 'InvalidIdentityError';
  /** Which part of the identity is refused (`username`, `groups[2]`, `extra["k"]`, …); never the value. */
  constructor(readonly field: string, reason: string) {
    super(`the identity's ${field} ${reason}`);
  }
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Why `value` may not be part of an identity, or undefined. */
export function identityValueFault(value: string): string | undefined {
  if (CONTROL.test(value)) return 'holds a control character';
  // HTTP parsers (Go's textproto, Node's llhttp) trim spaces around a header value: " admin" would
  // arrive upstream as another user, "admin".
  if (value.startsWith(' ') || value.endsWith(' ')) return 'begins or ends with a space';
  if (LONE_SURROGATE.test(value)) return 'is not well-formed Unicode';
  return undefined;
}

/** Throw {@link InvalidIdentityError} for the first part of `user` that {@link identityValueFault} refuses. */
export function checkIdentity(user: UserInfo): void {
  const check = (field: string, value: string): void => {
    const fault = identityValueFault(value);
    if (fault !== undefined) throw new InvalidIdentityError(field, fault);
  };
  check('username', user.username);
  if (user.uid !== undefined) check('uid', user.uid);
  user.groups.forEach((g, i) => check(`groups[${i}]`, g));
  for (const [key, values] of Object.entries(user.extra)) {
    check('an extra key', key);
    values.forEach((v, i) => check(`extra[${JSON.stringify(key)}][${i}]`, v));
  }
}
