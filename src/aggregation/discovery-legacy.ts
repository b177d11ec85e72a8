/**
 * Legacy discovery served by the proxy: `/apis` (`APIGroupList`) and `/apis/<group>` (`APIGroup`),
 * merging the primary upstream's groups with the registered APIServices as kube-aggregator's
 * `handler_apis.go` does:
 *
 * - `apiregistration.k8s.io` (v1) is always first ("it's good to be king"); the core group is skipped;
 * - the other groups and their versions follow `SortedByGroupAndVersion` over the entries of
 *   {@link discoveryEntries} (registered APIServices plus the upstream's group-versions without one);
 * - a group's preferred version is its first version after sorting;
 * - availability plays no part: an unavailable APIService stays listed (k/k#66932), and clients get
 *   the 503 at `/apis/<g>/<v>`.
 *
 * `/apis/<group>` for a group no APIService names is not answered here ({@link mergedAPIGroup}
 * returns `undefined`): the request goes to the upstream as before, as kube-aggregator delegates it.
 */
import type { APIService } from './apiservice.js';
import { sortedByGroupAndVersion } from './apiservice-sort.js';
import { APIREGISTRATION_GROUP, discoveryEntries, upstreamGroupsOf, type DiscoveryEntry, type GroupListLike } from './discovery-entries.js';

/** `metav1.GroupVersionForDiscovery`. */
export interface GroupVersionForDiscovery {
  groupVersion: string;
  version: string;
}

/** `metav1.APIGroup` (kind/apiVersion only when served on its own, at `/apis/<group>`). */
export interface APIGroup {
  kind?: 'APIGroup';
  apiVersion?: 'v1';
  name: string;
  versions: GroupVersionForDiscovery[];
  preferredVersion: GroupVersionForDiscovery;
}

/** `metav1.APIGroupList`, the legacy `/apis` document. */
export interface APIGroupList {
  kind: 'APIGroupList';
  apiVersion: 'v1';
  groups: APIGroup[];
}

/** The proxy's own group, listed first: `apiregistration.k8s.io/v1`. */
export function apiregistrationGroup(): APIGroup {
  const v1 = { groupVersion: `${APIREGISTRATION_GROUP}/v1`, version: 'v1' };
  return { name: APIREGISTRATION_GROUP, versions: [v1], preferredVersion: { ...v1 } };
}

/** `convertToDiscoveryAPIGroup`: one sorted group's entries as an APIGroup. */
function toAPIGroup(sorted: readonly DiscoveryEntry[]): APIGroup {
  const versions = sorted.map((e) => ({ groupVersion: `${e.spec.group}/${e.spec.version}`, version: e.spec.version }));
  return { name: sorted[0]!.spec.group, versions, preferredVersion: { ...versions[0]! } };
}

/**
 * The merged `/apis` document. `upstream` is the primary upstream's `/apis` (an `APIGroupList`),
 * or `undefined` when it is not known (the registered groups are listed alone).
 */
export function mergedAPIGroupList(upstream: GroupListLike | undefined, apiServices: readonly APIService[]): APIGroupList {
  const groups = [apiregistrationGroup()];
  for (const sorted of sortedByGroupAndVersion(discoveryEntries(upstreamGroupsOf(upstream), apiServices))) {
    groups.push(toAPIGroup(sorted));
  }
  return { kind: 'APIGroupList', apiVersion: 'v1', groups };
}

/**
 * The `/apis/<group>` document for a group that has an APIService (or `apiregistration.k8s.io`),
 * with the upstream's other versions of that group; `undefined` when no APIService names the group
 * (the caller forwards the request to the upstream).
 */
export function mergedAPIGroup(group: string, upstream: GroupListLike | undefined, apiServices: readonly APIService[]): APIGroup | undefined {
  if (group === APIREGISTRATION_GROUP) return { kind: 'APIGroup', apiVersion: 'v1', ...apiregistrationGroup() };
  if (group === '' || !apiServices.some((a) => a.spec.group === group)) return undefined;
  const upstreamGroups = upstreamGroupsOf(upstream).filter((g) => g.name === group);
  const [sorted] = sortedByGroupAndVersion(discoveryEntries(upstreamGroups, apiServices.filter((a) => a.spec.group === group)));
  return sorted ? { kind: 'APIGroup', apiVersion: 'v1', ...toAPIGroup(sorted) } : undefined;
}
