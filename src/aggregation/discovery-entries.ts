/**
 * The group-versions that the proxy's discovery lists, each with the priorities it sorts by: the
 * registered APIServices, plus every group-version the primary upstream serves without one.
 *
 * In kube-apiserver every group-version has an APIService: built-in groups get fixed priorities
 * (`apiVersionPriorities` in `cmd/kube-apiserver/app/aggregator.go` and
 * `DefaultGenericAPIServicePriorities` in `pkg/controlplane/apiserver/aggregator.go`), CRDs get
 * `groupPriorityMinimum: 1000, versionPriority: 100` (`crdregistration_controller.go`). The proxy's
 * upstream publishes only its `/apis` list, so an upstream group-version becomes a synthetic local
 * entry, with priorities from, in order:
 *
 * 1. a local APIService (`service: null`) in `--apiservice-config` for that group-version (which is
 *    how an operator places an upstream group);
 * 2. kube-apiserver's built-in table below;
 * 3. otherwise the upstream's own order: a version missing from the table takes its group's table
 *    priority and a version priority that keeps its place in the upstream's list; a group with no
 *    table entry at all gets the CRD rule, group 1000 and version 100 plus the version's distance
 *    from the end of the list. Either way a group keeps the upstream's version order (its preferred
 *    version stays first), even where that is not Kubernetes' version order.
 *
 * A registered APIService wins over the upstream for the same group-version. Groups served by both
 * list the union of their versions. `apiregistration.k8s.io` is left out: the proxy serves it
 * itself and pins it first. The core group (`""`, served at `/api`) is not part of `/apis`.
 */
import type { APIService } from './apiservice.js';
import type { SortableAPIService } from './apiservice-sort.js';

/** The group the proxy serves itself (its registrations and their status). */
export const APIREGISTRATION_GROUP = 'apiregistration.k8s.io';

/** Where `apiregistration.k8s.io` sorts in aggregated discovery: above anything an APIService can say. */
export const APIREGISTRATION_GROUP_PRIORITY = 20001;

/** kube-apiserver's fixed priorities of its built-in group-versions: `group/version` → [group, version]. */
export const BUILTIN_PRIORITIES: Readonly<Record<string, readonly [number, number]>> = {
  'apps/v1': [17800, 15],
  'events.k8s.io/v1': [17750, 15],
  'events.k8s.io/v1beta1': [17750, 5],
  'authentication.k8s.io/v1': [17700, 15],
  'authentication.k8s.io/v1beta1': [17700, 9],
  'authentication.k8s.io/v1alpha1': [17700, 1],
  'authorization.k8s.io/v1': [17600, 15],
  'autoscaling/v2': [17500, 30],
  'autoscaling/v1': [17500, 15],
  'autoscaling/v2beta1': [17500, 9],
  'autoscaling/v2beta2': [17500, 1],
  'batch/v1': [17400, 15],
  'batch/v1beta1': [17400, 9],
  'batch/v2alpha1': [17400, 9],
  'certificates.k8s.io/v1': [17300, 15],
  'certificates.k8s.io/v1beta1': [17300, 9],
  'certificates.k8s.io/v1alpha1': [17300, 1],
  'networking.k8s.io/v1': [17200, 15],
  'networking.k8s.io/v1beta1': [17200, 9],
  'policy/v1': [17100, 15],
  'policy/v1beta1': [17100, 9],
  'rbac.authorization.k8s.io/v1': [17000, 15],
  'storage.k8s.io/v1': [16800, 15],
  'storage.k8s.io/v1beta1': [16800, 9],
  'storage.k8s.io/v1alpha1': [16800, 1],
  'apiextensions.k8s.io/v1': [16700, 15],
  'admissionregistration.k8s.io/v1': [16700, 15],
  'admissionregistration.k8s.io/v1beta1': [16700, 12],
  'admissionregistration.k8s.io/v1alpha1': [16700, 9],
  'scheduling.k8s.io/v1': [16600, 15],
  'coordination.k8s.io/v1': [16500, 15],
  'coordination.k8s.io/v1beta1': [16500, 13],
  'coordination.k8s.io/v1alpha2': [16500, 12],
  'node.k8s.io/v1': [16300, 15],
  'node.k8s.io/v1beta1': [16300, 9],
  'node.k8s.io/v1alpha1': [16300, 1],
  'discovery.k8s.io/v1': [16200, 15],
  'discovery.k8s.io/v1beta1': [16200, 12],
  'resource.k8s.io/v1beta2': [16200, 15],
  'resource.k8s.io/v1beta1': [16200, 9],
  'resource.k8s.io/v1alpha3': [16200, 1],
  'flowcontrol.apiserver.k8s.io/v1': [16100, 21],
  'flowcontrol.apiserver.k8s.io/v1beta3': [16100, 18],
  'flowcontrol.apiserver.k8s.io/v1beta2': [16100, 15],
  'flowcontrol.apiserver.k8s.io/v1beta1': [16100, 12],
  'flowcontrol.apiserver.k8s.io/v1alpha1': [16100, 9],
  'internal.apiserver.k8s.io/v1alpha1': [16000, 9],
  'storagemigration.k8s.io/v1beta1': [15800, 9],
};

/** The CRD defaults (`crdregistration_controller.go`): "CRDs should have relatively low priority". */
export const UPSTREAM_DEFAULT_GROUP_PRIORITY = 1000;
/** See {@link UPSTREAM_DEFAULT_GROUP_PRIORITY}; the base of the derived version priority. */
export const UPSTREAM_DEFAULT_VERSION_PRIORITY = 100;

/** One group of the primary upstream: its name and versions, in the upstream's (preference) order. */
export interface UpstreamGroup {
  readonly name: string;
  readonly versions: readonly string[];
}

/** One listed group-version with its sort priorities and where it is served. */
export interface DiscoveryEntry extends SortableAPIService {
  /** The registration behind it; `undefined` for an upstream group-version without one. */
  readonly apiService: APIService | undefined;
  /** Local entries (and unregistered upstream ones) are served by the primary upstream. */
  readonly servedBy: 'upstream' | 'backend';
}

/**
 * A version priority for the upstream version at `i` that is not in the table, keeping the
 * upstream's order: just above the best known version listed after it, else just below the worst
 * known version listed before it, else (no version of the group is known) the CRD base plus its
 * distance from the end of the list.
 */
function derivedVersionPriority(known: ReadonlyArray<readonly [number, number] | undefined>, i: number): number {
  const after = known.slice(i + 1).flatMap((k) => (k ? [k[1]] : []));
  if (after.length > 0) return Math.min(1000, Math.max(...after) + 1);
  const before = known.slice(0, i).flatMap((k) => (k ? [k[1]] : []));
  if (before.length > 0) return Math.max(1, Math.min(...before) - 1);
  return Math.min(1000, UPSTREAM_DEFAULT_VERSION_PRIORITY + (known.length - 1 - i));
}

function entry(group: string, version: string, gpm: number, vp: number, apiService: APIService | undefined, servedBy: DiscoveryEntry['servedBy']): DiscoveryEntry {
  return { metadata: { name: `${version}.${group}` }, spec: { group, version, groupPriorityMinimum: gpm, versionPriority: vp }, apiService, servedBy };
}

/** The shape {@link upstreamGroupsOf} reads: an `APIGroupList`, or an `APIGroupDiscoveryList` mapped to it. */
export interface GroupListLike {
  readonly groups?: ReadonlyArray<{ readonly name?: unknown; readonly versions?: ReadonlyArray<{ readonly version?: unknown }> }>;
}

/** The list's groups as {@link UpstreamGroup}s (versions in the listed order; malformed entries skipped). */
export function upstreamGroupsOf(list: GroupListLike | undefined): UpstreamGroup[] {
  const out: UpstreamGroup[] = [];
  for (const g of list?.groups ?? []) {
    if (typeof g?.name !== 'string' || !Array.isArray(g.versions)) continue;
    const versions = g.versions.map((v) => v?.version).filter((v): v is string => typeof v === 'string' && v !== '');
    out.push({ name: g.name, versions });
  }
  return out;
}

/**
 * The entries discovery lists, unsorted: every registered APIService (except
 * `apiregistration.k8s.io`) and every upstream group-version without one, with the priorities of
 * the module rule. The core group is left out (it is not part of `/apis`).
 */
export function discoveryEntries(upstreamGroups: readonly UpstreamGroup[], apiServices: readonly APIService[]): DiscoveryEntry[] {
  const out: DiscoveryEntry[] = [];
  const registered = new Set<string>();
  for (const a of apiServices) {
    if (a.spec.group === '' || a.spec.group === APIREGISTRATION_GROUP) continue;
    registered.add(a.metadata.name);
    const local = a.spec.service === null && a.backendURL === null;
    out.push(entry(a.spec.group, a.spec.version, a.spec.groupPriorityMinimum, a.spec.versionPriority, a, local ? 'upstream' : 'backend'));
  }
  for (const g of upstreamGroups) {
    if (g.name === '' || g.name === APIREGISTRATION_GROUP) continue;
    const versions = [...new Set(g.versions)];
    const known = versions.map((v) => BUILTIN_PRIORITIES[`${g.name}/${v}`]);
    const groupPriority = Math.max(0, ...known.map((k) => k?.[0] ?? 0)) || UPSTREAM_DEFAULT_GROUP_PRIORITY;
    versions.forEach((version, i) => {
      if (registered.has(`${version}.${g.name}`)) return;
      out.push(entry(g.name, version, groupPriority, known[i]?.[1] ?? derivedVersionPriority(known, i), undefined, 'upstream'));
    });
  }
  return out;
}
