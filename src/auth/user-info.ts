/**
 * Who a caller is, as Kubernetes' `user.Info` describes it: name, uid, groups and extra values. The
 * authenticators produce it, the authorizer checks it, and the impersonating upstream leg carries it.
 */

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
