/**
 * What the router reads off a request's path: a pod streaming subresource, or the API group and
 * version of an `/apis/<group>/<version>/…` request. Pure functions of the URL.
 */

/** A pod streaming request's attributes, from the decoded path. */
export interface PodStreamAttributes {
  namespace: string;
  name: string;
  subresource: string;
}

/** A pod streaming request's attributes, from the decoded path; undefined for other paths. */
export function podStreamAttributes(url: string): PodStreamAttributes | undefined {
  const path = url.split('?')[0] ?? '';
  const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/(exec|attach|portforward)\/?$/.exec(path);
  if (!m) return undefined;
  try {
    return { namespace: decodeURIComponent(m[1]!), name: decodeURIComponent(m[2]!), subresource: m[3]! };
  } catch {
    return undefined;
  }
}

/** The group and version an `/apis/<group>/<version>[/…]` path names. */
export interface GroupVersion {
  group: string;
  version: string;
}

/**
 * The group/version of an `/apis/<group>/<version>[/…]` request (kube-aggregator's proxy handler
 * is registered per group-version at exactly that prefix); undefined for `/apis`, `/apis/<group>`
 * and every other path. Segments are taken as sent: group and version names need no decoding, and a
 * percent-encoded one does not match (it is not a registered name).
 */
export function apiGroupVersionOf(url: string): GroupVersion | undefined {
  const path = url.split('?')[0] ?? '';
  const m = /^\/apis\/([^/]+)\/([^/]+)(?:\/.*)?$/.exec(path);
  if (!m) return undefined;
  return { group: m[1]!, version: m[2]! };
}
