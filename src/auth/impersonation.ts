/**
 * A verified caller's own `Impersonate-*` request, checked as kube-apiserver's impersonation filter
 * does: `impersonate` on `users` (or `serviceaccounts`), `uids`, each group and each extra value must
 * be allowed for the caller, else 403; the result is the user the request then acts as.
 */
import type { AccessAttributes } from '../api-client.js';
import type { Authorizer } from './authorizer.js';
import type { ImpersonationRequest } from './identity-headers.js';
import { ALL_AUTHENTICATED, ANONYMOUS_USER, serviceAccountOf, type UserInfo } from './user-info.js';

/** The SubjectAccessReview attributes for each part of an impersonation request. */
export function impersonationChecks(r: ImpersonationRequest): AccessAttributes[] {
  const checks: AccessAttributes[] = [];
  const sa = serviceAccountOf(r.user!);
  checks.push(
    sa
      ? { verb: 'impersonate', resource: 'serviceaccounts', namespace: sa.namespace, name: sa.name }
      : { verb: 'impersonate', resource: 'users', name: r.user! },
  );
  if (r.uid !== undefined) checks.push({ verb: 'impersonate', resource: 'uids', group: 'authentication.k8s.io', name: r.uid });
  for (const g of r.groups) checks.push({ verb: 'impersonate', resource: 'groups', name: g });
  for (const [key, values] of Object.entries(r.extra)) {
    for (const v of values) checks.push({ verb: 'impersonate', resource: 'userextras', subresource: key, group: 'authentication.k8s.io', name: v });
  }
  return checks;
}

/** The user an allowed impersonation request acts as (groups completed as the apiserver does). */
export function impersonatedUser(r: ImpersonationRequest): UserInfo {
  const groups = [...r.groups];
  const sa = serviceAccountOf(r.user!);
  if (sa && groups.length === 0) groups.push('system:serviceaccounts', `system:serviceaccounts:${sa.namespace}`);
  if (r.user !== ANONYMOUS_USER && !groups.includes(ALL_AUTHENTICATED)) groups.push(ALL_AUTHENTICATED);
  const user: UserInfo = { username: r.user!, groups, extra: r.extra };
  if (r.uid !== undefined) user.uid = r.uid;
  return user;
}

/** Check every part of `request` for `caller`; resolve with the impersonated user or throw ForbiddenError. */
export async function impersonate(caller: UserInfo, request: ImpersonationRequest, authorizer: Authorizer): Promise<UserInfo> {
  for (const check of impersonationChecks(request)) await authorizer.authorize(caller, check);
  return impersonatedUser(request);
}
