/**
 * The two discovery orders of APIServices, both pure:
 *
 * - {@link sortedByGroupAndVersion} is kube-aggregator's `SortedByGroupAndVersion`
 *   (`apiregistration/v1/helper/helpers.go`), used for the legacy `/apis` `APIGroupList`: groups in
 *   the order of their best APIService, which is the highest `groupPriorityMinimum`, ties broken by
 *   the APIService **name** (`v1.bar` before `v1.foo`, so `v1.b.io` before `v2.a.io`); versions by
 *   `versionPriority`, highest first, ties by Kubernetes' version order.
 * - {@link sortedForAggregatedDiscovery} is the aggregated-discovery manager's order
 *   (`apiserver/pkg/endpoints/discovery/aggregated/handler.go`): groups by the highest
 *   `groupPriorityMinimum` among their versions, ties broken by the **group** name; versions as above.
 *
 * They differ only in that tie-break, and kube-apiserver has the same difference.
 */
import { compareKubeAwareVersionStrings } from './version-order.js';

/** What the sort reads of an APIService (a real one, or a synthetic entry for an upstream group). */
export interface SortableAPIService {
  readonly metadata: { readonly name: string };
  readonly spec: {
    readonly group: string;
    readonly version: string;
    readonly groupPriorityMinimum: number;
    readonly versionPriority: number;
  };
}

/** `ByVersionPriority.Less` as a comparator: higher versionPriority first, then kube-aware version. */
export function compareByVersionPriority(a: SortableAPIService, b: SortableAPIService): number {
  if (a.spec.versionPriority !== b.spec.versionPriority) return b.spec.versionPriority - a.spec.versionPriority;
  return -compareKubeAwareVersionStrings(a.spec.version, b.spec.version);
}

/** `ByGroupPriorityMinimum.Less` as a comparator: higher groupPriorityMinimum first, then name ascending. */
export function compareByGroupPriorityMinimum(a: SortableAPIService, b: SortableAPIService): number {
  if (a.spec.groupPriorityMinimum !== b.spec.groupPriorityMinimum) return b.spec.groupPriorityMinimum - a.spec.groupPriorityMinimum;
  return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
}

/**
 * kube-aggregator's `SortedByGroupAndVersion`: one array per group, groups in discovery order, each
 * group's APIServices in version order (the first is the preferred version). The input is not changed.
 */
export function sortedByGroupAndVersion<T extends SortableAPIService>(apiServices: readonly T[]): T[][] {
  const byGroup = new Map<string, T[]>();
  for (const a of [...apiServices].sort(compareByGroupPriorityMinimum)) {
    const list = byGroup.get(a.spec.group);
    if (list) list.push(a);
    else byGroup.set(a.spec.group, [a]);
  }
  return [...byGroup.values()].map((list) => list.sort(compareByVersionPriority));
}

/**
 * The aggregated-discovery order: one array per group, groups by their highest
 * groupPriorityMinimum (highest first), ties by group name; versions as in {@link sortedByGroupAndVersion}.
 */
export function sortedForAggregatedDiscovery<T extends SortableAPIService>(apiServices: readonly T[]): T[][] {
  const byGroup = new Map<string, { priority: number; list: T[] }>();
  for (const a of apiServices) {
    const g = byGroup.get(a.spec.group);
    if (g) {
      g.list.push(a);
      g.priority = Math.max(g.priority, a.spec.groupPriorityMinimum);
    } else byGroup.set(a.spec.group, { priority: a.spec.groupPriorityMinimum, list: [a] });
  }
  return [...byGroup.entries()]
    .sort(([na, a], [nb, b]) => (a.priority !== b.priority ? b.priority - a.priority : na < nb ? -1 : na > nb ? 1 : 0))
    .map(([, g]) => g.list.sort(compareByVersionPriority));
}
