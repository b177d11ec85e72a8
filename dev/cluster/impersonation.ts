/**
 * User impersonation as kube-apiserver's `WithImpersonation` filter does it
 * (k8s.io/apiserver `pkg/endpoints/filters/impersonation.go`): `Impersonate-User`,
 * `Impersonate-Group` (repeatable), `Impersonate-Extra-<key>` (key lower-cased and percent-decoded)
 * and `Impersonate-Uid`. Each requested item is authorized for the REQUESTER with verb
 * `impersonate` (users, groups, `userextras/<key>` and uids; a `system:serviceaccount:NS:NAME` user
 * is the serviceaccount NAME in NS); the first denial is the answer.
 */
import { errorStatus, type V1Status } from '../../src/status.js';
import type { Authorizer } from './policy.js';
import { forbiddenStatus, type AuthorizerAttributes } from './request-attributes.js';
import { ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, type UserInfo } from './token-auth.js';

/** Header names (lower-case, as Node gives them). */
export const IMPERSONATE_USER = 'impersonate-user';
export const IMPERSONATE_GROUP = 'impersonate-group';
export const IMPERSONATE_UID = 'impersonate-uid';
export const IMPERSONATE_EXTRA_PREFIX = 'impersonate-extra-';

/** `system:anonymous`, whose impersonation adds `system:unauthenticated` instead. */
const ANONYMOUS = 'system:anonymous';
const SERVICE_ACCOUNT_PREFIX = 'system:serviceaccount:';
/** DNS-1123 label (namespace) and subdomain (service account name), as `serviceaccount.SplitUsername` validates. */
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** One thing to impersonate, in the order the apiserver checks them. */
export type ImpersonationRequest =
  | { kind: 'User'; name: string }
  | { kind: 'ServiceAccount'; namespace: string; name: string }
  | { kind: 'Group'; name: string }
  | { kind: 'UserExtra'; key: string; value: string }
  | { kind: 'UID'; uid: string };

/** Headers as `IncomingMessage.headersDistinct` gives them. */
export type DistinctHeaders = Record<string, string[] | undefined>;

/** `serviceaccount.SplitUsername`: namespace and name of a service-account user name, if it is one. */
export function splitServiceAccountUsername(user: string): { namespace: string; name: string } | undefined {
  if (!user.startsWith(SERVICE_ACCOUNT_PREFIX)) return undefined;
  const parts = user.slice(SERVICE_ACCOUNT_PREFIX.length).split(':');
  if (parts.length !== 2) return undefined;
  const [namespace, name] = parts as [string, string];
  if (namespace.length > 63 || !DNS1123_LABEL.test(namespace)) return undefined;
  if (name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) return undefined;
  return { namespace, name };
}

function unescapeExtraKey(key: string): string {
  try {
    return decodeURIComponent(key);
  } catch {
    return key; // the apiserver keeps a malformed key as it is
  }
}

/**
 * `buildImpersonationRequests`: the requested items, or an error text when groups, extras or a uid
 * come without a user. Extras are ordered by key (the apiserver iterates a Go map).
 */
export function impersonationRequests(headers: DistinctHeaders): { ok: true; value: ImpersonationRequest[] } | { ok: false; message: string } {
  const requests: ImpersonationRequest[] = [];
  const user = headers[IMPERSONATE_USER]?.[0] ?? '';
  if (user !== '') {
    const sa = splitServiceAccountUsername(user);
    requests.push(sa ? { kind: 'ServiceAccount', ...sa } : { kind: 'User', name: user });
  }
  const groups = headers[IMPERSONATE_GROUP] ?? [];
  for (const name of groups) requests.push({ kind: 'Group', name });
  const extraHeaders = Object.keys(headers)
    .filter((h) => h.startsWith(IMPERSONATE_EXTRA_PREFIX))
    .sort();
  for (const header of extraHeaders) {
    const key = unescapeExtraKey(header.slice(IMPERSONATE_EXTRA_PREFIX.length).toLowerCase());
    for (const value of headers[header] ?? []) requests.push({ kind: 'UserExtra', key, value });
  }
  const uid = headers[IMPERSONATE_UID]?.[0] ?? '';
  if (uid !== '') requests.push({ kind: 'UID', uid });
  if ((groups.length > 0 || extraHeaders.length > 0 || uid !== '') && user === '') {
    const what = requests.map(describe).join(' ');
    return { ok: false, message: `requested [${what}] without impersonating a user` };
  }
  return { ok: true, value: requests };
}

function describe(r: ImpersonationRequest): string {
  switch (r.kind) {
    case 'User':
    case 'Group':
      return `${r.kind} ${r.name}`;
    case 'ServiceAccount':
      return `ServiceAccount ${r.namespace}/${r.name}`;
    case 'UserExtra':
      return `UserExtra ${r.key}=${r.value}`;
    case 'UID':
      return `UID ${r.uid}`;
  }
}

/** The attributes `impersonate` is checked with for one item. */
export function impersonationAttributes(requester: UserInfo, r: ImpersonationRequest): AuthorizerAttributes {
  const base: AuthorizerAttributes = {
    user: requester,
    verb: 'impersonate',
    resourceRequest: true,
    path: '',
    apiGroup: '',
    apiVersion: 'v1',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
  };
  switch (r.kind) {
    case 'User':
      return { ...base, resource: 'users', name: r.name };
    case 'ServiceAccount':
      return { ...base, resource: 'serviceaccounts', namespace: r.namespace, name: r.name };
    case 'Group':
      return { ...base, resource: 'groups', name: r.name };
    case 'UserExtra':
      return { ...base, apiGroup: 'authentication.k8s.io', resource: 'userextras', subresource: r.key, name: r.value };
    case 'UID':
      return { ...base, apiGroup: 'authentication.k8s.io', resource: 'uids', name: r.uid };
  }
}

/** The outcome: the effective user, or the Status to refuse the request with. */
export type ImpersonationOutcome = { ok: true; user: UserInfo; impersonated: boolean } | { ok: false; status: V1Status };

/**
 * Apply the impersonation headers of a request from `requester`. Without any, the requester is
 * the effective user. Groups/extras/uid without a user → 400 (see the note below); any item the
 * requester may not impersonate → 403 with the apiserver's message.
 *
 * Note: kube-apiserver answers the "without impersonating a user" case with a plain-text 500 from
 * `responsewriters.InternalError`; the dev cluster answers a 400 BadRequest Status instead.
 */
export function impersonate(headers: DistinctHeaders, requester: UserInfo, authorizer: Authorizer): ImpersonationOutcome {
  const built = impersonationRequests(headers);
  if (!built.ok) return { ok: false, status: errorStatus(400, built.message) };
  if (built.value.length === 0) return { ok: true, user: requester, impersonated: false };

  const groupsSpecified = (headers[IMPERSONATE_GROUP] ?? []).length > 0;
  let name = '';
  let uid = '';
  let groups: string[] = [];
  const extra: Record<string, string[]> = {};
  for (const r of built.value) {
    const attrs = impersonationAttributes(requester, r);
    const decision = authorizer.authorize(attrs);
    if (!decision.allowed) return { ok: false, status: forbiddenStatus(attrs) };
    switch (r.kind) {
      case 'ServiceAccount':
        name = `${SERVICE_ACCOUNT_PREFIX}${r.namespace}:${r.name}`;
        if (!groupsSpecified) groups = ['system:serviceaccounts', `system:serviceaccounts:${r.namespace}`];
        break;
      case 'User':
        name = r.name;
        break;
      case 'Group':
        groups.push(r.name);
        break;
      case 'UserExtra':
        (extra[r.key] ??= []).push(r.value);
        break;
      case 'UID':
        uid = r.uid;
        break;
    }
  }
  if (name !== ANONYMOUS) {
    if (!groups.includes(ALL_AUTHENTICATED) && !groups.includes(ALL_UNAUTHENTICATED)) groups.push(ALL_AUTHENTICATED);
  } else if (!groups.includes(ALL_UNAUTHENTICATED)) {
    groups.push(ALL_UNAUTHENTICATED);
  }
  const user: UserInfo = { name, groups };
  if (uid !== '') user.uid = uid;
  if (Object.keys(extra).length > 0) user.extra = extra;
  return { ok: true, user, impersonated: true };
}
