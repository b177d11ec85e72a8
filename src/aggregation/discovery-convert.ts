/**
 * Legacy per-group-version discovery (`metav1.APIResourceList`, what `GET /apis/<g>/<v>` answers)
 * converted to an aggregated {@link APIVersionDiscovery}, for backends (and old upstreams) that
 * answer the aggregated `/apis` with 406 or with a plain `APIGroupList`. This is apiserver's
 * `ConvertGroupVersionIntoToDiscovery` (`endpoints/installer.go`), which kube-aggregator uses for the
 * same fallback:
 *
 * - top-level entries become resources: scope from `namespaced`, `responseKind` from
 *   `group`/`version`/`kind`, verbs, shortNames, categories, `singularName`;
 * - `name/sub` entries become subresources of `name` (a parent that is not listed is created, with an
 *   empty responseKind as the apiserver does to avoid nil panics in client-go 0.26.0–0.26.3); a
 *   subresource whose scope differs from its parent's is an error;
 * - one difference: an entry's empty `group`/`version` (legacy discovery's "same as the list")
 *   is filled in with the list's group-version, so `responseKind` is always complete.
 */
import type { APIResourceDiscovery, APIVersionDiscovery, GroupVersionKind } from './discovery-types.js';

/** One entry of `metav1.APIResourceList.resources` (the fields discovery uses). */
export interface APIResource {
  name: string;
  singularName?: string;
  namespaced?: boolean;
  group?: string;
  version?: string;
  kind?: string;
  verbs?: string[] | null;
  shortNames?: string[] | null;
  categories?: string[] | null;
}

/** `metav1.APIResourceList`. */
export interface APIResourceList {
  kind?: 'APIResourceList';
  apiVersion?: string;
  groupVersion: string;
  resources: APIResource[];
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : [];
}

/**
 * Convert the legacy resource list of group `group`, version `version` into one version entry of
 * aggregated discovery (freshness `Current`). Throws on a malformed list or a scope mismatch.
 */
export function apiResourceListToVersionDiscovery(list: unknown, group: string, version: string): APIVersionDiscovery {
  const resources = (list as { resources?: unknown } | null)?.resources;
  if (typeof list !== 'object' || list === null || !Array.isArray(resources)) {
    throw new Error(`discovery for ${group ? `${group}/` : ''}${version} is not an APIResourceList`);
  }
  const gvk = (r: APIResource): GroupVersionKind => ({ group: r.group || group, version: r.version || version, kind: r.kind ?? '' });
  const out: APIResourceDiscovery[] = [];
  const parents = new Map<string, APIResourceDiscovery>();
  const entries = resources.filter((r): r is APIResource => typeof r === 'object' && r !== null && typeof (r as APIResource).name === 'string');

  for (const r of entries) {
    if (r.name.includes('/')) continue;
    const res: APIResourceDiscovery = {
      resource: r.name,
      responseKind: gvk(r),
      scope: r.namespaced ? 'Namespaced' : 'Cluster',
      singularResource: r.singularName ?? '',
      verbs: strings(r.verbs),
    };
    const shortNames = strings(r.shortNames);
    if (shortNames.length > 0) res.shortNames = shortNames;
    const categories = strings(r.categories);
    if (categories.length > 0) res.categories = categories;
    out.push(res);
    parents.set(r.name, res);
  }

  for (const r of entries) {
    const slash = r.name.indexOf('/');
    if (slash < 0) continue;
    const parentName = r.name.slice(0, slash);
    const sub = r.name.slice(slash + 1);
    const scope = r.namespaced ? 'Namespaced' : 'Cluster';
    let parent = parents.get(parentName);
    if (!parent) {
      parent = { resource: parentName, responseKind: { group: '', version: '', kind: '' }, scope, singularResource: '', verbs: [] };
      out.push(parent);
      parents.set(parentName, parent);
    }
    if (parent.scope !== scope) {
      throw new Error(`Error: Parent ${parentName} (scope: ${parent.scope}) and subresource ${sub} (scope: ${scope}) scope do not match`);
    }
    (parent.subresources ??= []).push({
      subresource: sub,
      responseKind: r.kind ? gvk(r) : { group: '', version: '', kind: '' },
      verbs: strings(r.verbs),
    });
  }

  const v: APIVersionDiscovery = { version };
  if (out.length > 0) v.resources = out;
  v.freshness = 'Current';
  return v;
}
