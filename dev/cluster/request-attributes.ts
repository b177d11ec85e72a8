/**
 * A request's authorization attributes, resolved from method and path as kube-apiserver's
 * `RequestInfoFactory.NewRequestInfo` does (k8s.io/apiserver `pkg/endpoints/request/requestinfo.go`),
 * and the 403 Status the apiserver writes when they are denied (`responsewriters.Forbidden`).
 */
import type { V1Status } from '../../src/status.js';
import type { UserInfo } from './token-auth.js';

/** `authorizer.Attributes`: who wants to do what. */
export interface AuthorizerAttributes {
  user: UserInfo;
  /** `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, `impersonate`…; the lower-case method for non-resource requests. */
  verb: string;
  /** False for non-resource paths (`/version`, `/api`, `/apis/g/v`, `/healthz`…). */
  resourceRequest: boolean;
  /** The URL path (non-resource requests are authorized by it). */
  path: string;
  apiGroup: string;
  apiVersion: string;
  /** `''` for cluster-scoped requests. */
  namespace: string;
  resource: string;
  subresource: string;
  name: string;
}

/** Verbs that come from the path (`/api/v1/watch/pods`) instead of the method. */
const SPECIAL_VERBS = new Set(['proxy', 'watch']);
/** Namespace subresources (`/api/v1/namespaces/x/status`) that are not resources of their own. */
const NAMESPACE_SUBRESOURCES = new Set(['status', 'finalize']);

/** The verb of a resource request's method (`requestinfo.go`). */
function methodVerb(method: string): string {
  switch (method) {
    case 'POST':
      return 'create';
    case 'GET':
    case 'HEAD':
      return 'get';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
    default:
      return '';
  }
}

/** The apiserver's bool query rule: absent, `false` or `0` is false (`Convert_Slice_string_To_bool`). */
function queryFlag(query: URLSearchParams, name: string): boolean {
  const v = query.get(name);
  return v !== null && v.toLowerCase() !== 'false' && v !== '0';
}

/** `metadata.name=X` (or `==`) as the only term naming the object in a field selector. */
function exactNameFromFieldSelector(selector: string | null): string | undefined {
  if (!selector) return undefined;
  for (const term of selector.split(',')) {
    const m = /^\s*metadata\.name\s*(?:==|=)\s*(.*?)\s*$/.exec(term);
    if (m && m[1] !== '' && m[1] !== '.' && m[1] !== '..' && !/[/%]/.test(m[1]!)) return m[1];
  }
  return undefined;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * Resolve the attributes of `method url` for `user`. `url` is the request target (path and query).
 * `/api/v1/namespaces/default/pods/demo/exec` → create (POST) or get (GET), resource pods,
 * subresource exec, name demo, namespace default; a GET without a name is list, or watch with
 * `?watch=true`; a DELETE without a name is deletecollection; fewer than 3 path parts (or 4 under
 * `/apis`) is a non-resource request.
 */
export function requestAttributes(method: string, url: string, user: UserInfo): AuthorizerAttributes {
  const parsed = new URL(url, 'http://dev-cluster');
  const path = safeDecode(parsed.pathname); // Go's URL.Path is the decoded path
  const attrs: AuthorizerAttributes = {
    user,
    verb: method.toLowerCase(),
    resourceRequest: false,
    path,
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
  };
  let parts = path
    .replace(/^\/+|\/+$/g, '')
    .split('/')
    .filter((p) => p !== '');
  if (parts.length < 3 || (parts[0] !== 'api' && parts[0] !== 'apis')) return attrs;
  const groupless = parts[0] === 'api';
  parts = parts.slice(1);
  let apiGroup = '';
  if (!groupless) {
    if (parts.length < 3) return attrs;
    apiGroup = parts[0]!;
    parts = parts.slice(1);
  }
  const apiVersion = parts[0]!;
  parts = parts.slice(1);

  let verb: string;
  let viaSpecialVerb = false;
  if (SPECIAL_VERBS.has(parts[0]!)) {
    if (parts.length < 2) return attrs; // the apiserver fails such a request; treat it as non-resource
    verb = parts[0]!;
    parts = parts.slice(1);
    viaSpecialVerb = true;
  } else {
    verb = methodVerb(method);
  }

  let namespace = '';
  if (parts[0] === 'namespaces' && parts.length > 1) {
    namespace = parts[1]!;
    if (parts.length > 2 && !NAMESPACE_SUBRESOURCES.has(parts[2]!)) parts = parts.slice(2);
  }
  const resource = parts[0] ?? '';
  let name = parts[1] ?? '';
  const subresource = parts.length >= 3 && !viaSpecialVerb ? parts[2]! : '';

  if (name === '' && verb === 'get') {
    verb = queryFlag(parsed.searchParams, 'watch') ? 'watch' : 'list';
    name = exactNameFromFieldSelector(parsed.searchParams.get('fieldSelector')) ?? '';
  }
  if (name === '' && verb === 'delete') verb = 'deletecollection';

  return { ...attrs, verb, resourceRequest: true, apiGroup, apiVersion, namespace, resource, subresource, name };
}

/**
 * The reason text of a denial, exactly as `forbiddenMessage` words it:
 * `User "bob" cannot create resource "pods/exec" in API group "" in the namespace "default"`,
 * `… at the cluster scope`, or `User "bob" cannot get path "/foo"` for non-resource requests.
 */
export function forbiddenMessage(attrs: AuthorizerAttributes): string {
  const user = JSON.stringify(attrs.user.name);
  if (!attrs.resourceRequest) return `User ${user} cannot ${attrs.verb} path ${JSON.stringify(attrs.path)}`;
  const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
  const what = `User ${user} cannot ${attrs.verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(attrs.apiGroup)}`;
  return attrs.namespace
    ? `${what} in the namespace ${JSON.stringify(attrs.namespace)}`
    : `${what} at the cluster scope`;
}

/** Go's `%q`-like quoting the apiserver uses around names (JSON quoting is close enough here). */
function quote(s: string): string {
  return JSON.stringify(s);
}

/**
 * The 403 Status of `responsewriters.Forbidden` → `apierrors.NewForbidden(groupResource, name, err)`:
 * `pods "demo" is forbidden: User …`, `tokenreviews.authentication.k8s.io is forbidden: …` (no name),
 * `forbidden: User … path …` (non-resource). A non-empty authorizer reason is appended as `: "reason"`.
 * The sanitizer (`&`, `<`, `>` as HTML entities) is applied as the apiserver does.
 */
export function forbiddenStatus(attrs: AuthorizerAttributes, reason = ''): V1Status {
  let err = forbiddenMessage(attrs).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  if (reason !== '') err += `: ${quote(reason)}`;
  const groupResource = attrs.apiGroup ? `${attrs.resource}.${attrs.apiGroup}` : attrs.resource;
  let message: string;
  if (groupResource === '') message = `forbidden: ${err}`;
  else if (attrs.name === '') message = `${groupResource} is forbidden: ${err}`;
  else message = `${groupResource} ${quote(attrs.name)} is forbidden: ${err}`;
  const details: NonNullable<V1Status['details']> = {};
  if (attrs.name) details.name = attrs.name;
  if (attrs.apiGroup) details.group = attrs.apiGroup;
  if (attrs.resource) details.kind = attrs.resource;
  // Key order of Go's metav1.Status: kind, apiVersion, metadata, status, message, reason, details, code.
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: 'Forbidden',
    details,
    code: 403,
  };
}
