/**
 * The aggregated discovery types (`apidiscovery.k8s.io` v2; v2beta1 has the same JSON shape and
 * differs only in `apiVersion`), as in `k8s.io/api/apidiscovery/v2/types.go`. Field order and
 * omission follow the Go JSON tags, so documents built here serialise like kube-apiserver's.
 */

/** `metav1.GroupVersionKind` as JSON (all three keys always present). */
export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** `Cluster` or `Namespaced`. */
export type ResourceScope = 'Cluster' | 'Namespaced';

/** Whether a group-version's resources are up to date (`Current`) or could not be fetched (`Stale`). */
export type DiscoveryFreshness = 'Current' | 'Stale';

/** `APISubresourceDiscovery`. */
export interface APISubresourceDiscovery {
  subresource: string;
  responseKind?: GroupVersionKind;
  acceptedTypes?: GroupVersionKind[];
  verbs: string[];
}

/** `APIResourceDiscovery`. */
export interface APIResourceDiscovery {
  resource: string;
  responseKind?: GroupVersionKind;
  scope: ResourceScope;
  singularResource: string;
  verbs: string[];
  shortNames?: string[];
  categories?: string[];
  subresources?: APISubresourceDiscovery[];
}

/** `APIVersionDiscovery`: one version of a group; `resources` and `freshness` are omitted when empty. */
export interface APIVersionDiscovery {
  version: string;
  resources?: APIResourceDiscovery[];
  freshness?: DiscoveryFreshness;
}

/** `APIGroupDiscovery`: a group with its versions, preferred version first. */
export interface APIGroupDiscovery {
  metadata: { name: string; [k: string]: unknown };
  versions?: APIVersionDiscovery[];
}

/** `APIGroupDiscoveryList`, the aggregated `/apis` document. */
export interface APIGroupDiscoveryList {
  kind: 'APIGroupDiscoveryList';
  apiVersion: string;
  metadata: Record<string, unknown>;
  items: APIGroupDiscovery[];
}

/** The group of the aggregated discovery types. */
export const APIDISCOVERY_GROUP = 'apidiscovery.k8s.io';

/** The two served versions of the aggregated discovery types (v2beta1 for kubectl 1.26–1.29). */
export type AggregatedDiscoveryVersion = 'v2' | 'v2beta1';
