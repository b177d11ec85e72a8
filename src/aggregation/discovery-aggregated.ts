/**
 * The merged aggregated-discovery document (`APIGroupDiscoveryList`) the proxy serves at `/apis`:
 * the primary upstream's aggregated document plus each registered APIService's group-version, as
 * kube-aggregator's discovery manager (`handler_discovery.go`) and the resource manager
 * (`endpoints/discovery/aggregated/handler.go`) build it:
 *
 * - `apiregistration.k8s.io` first (pinned at priority 20001), with the proxy's `apiservices`;
 * - groups by the highest `groupPriorityMinimum` among their versions, ties by group name; versions
 *   by `versionPriority`, then Kubernetes' version order (see `apiservice-sort.ts`); the priorities
 *   of upstream group-versions without an APIService come from `discovery-entries.ts`;
 * - an upstream group-version is copied as the upstream published it (its freshness included);
 * - a non-local APIService's group-version carries what was last fetched from its backend; a backend
 *   that is down keeps its last known resources (or none) with `freshness: Stale`, and a
 *   group-version never synced is `Stale` with no resources (k/k#115303);
 * - a local APIService whose group-version the upstream does not publish is left out here (there
 *   is nothing to describe); the legacy list still names it, as kube-aggregator's does.
 *
 * The document is built once per change and serialised per version (v2, v2beta1: same shape).
 */
import type { APIService } from './apiservice.js';
import { sortedForAggregatedDiscovery } from './apiservice-sort.js';
import { APIREGISTRATION_GROUP, discoveryEntries, type UpstreamGroup } from './discovery-entries.js';
import {
  APIDISCOVERY_GROUP,
  type AggregatedDiscoveryVersion,
  type APIGroupDiscovery,
  type APIGroupDiscoveryList,
  type APIResourceDiscovery,
  type APIVersionDiscovery,
  type DiscoveryFreshness,
} from './discovery-types.js';

/** What is known of one backend group-version: its resources and whether they are current. */
export interface BackendGroupVersion {
  readonly resources: readonly APIResourceDiscovery[];
  readonly freshness: DiscoveryFreshness;
}

/** The `apiservices` resource the proxy serves itself (read-only by default: get, list, watch). */
export function apiregistrationVersionDiscovery(verbs: readonly string[] = ['get', 'list', 'watch']): APIVersionDiscovery {
  const kind = { group: APIREGISTRATION_GROUP, version: 'v1', kind: 'APIService' };
  return {
    version: 'v1',
    resources: [{
      resource: 'apiservices',
      responseKind: kind,
      scope: 'Cluster',
      singularResource: 'apiservice',
      verbs: [...verbs],
      categories: ['api-extensions'],
      subresources: [{ subresource: 'status', responseKind: { ...kind }, verbs: ['get'] }],
    }],
    freshness: 'Current',
  };
}

/** The upstream's groups from its aggregated document (malformed items skipped, core group kept out). */
export function upstreamGroupsOfDiscovery(upstream: APIGroupDiscoveryList | undefined): UpstreamGroup[] {
  const out: UpstreamGroup[] = [];
  for (const item of Array.isArray(upstream?.items) ? upstream.items : []) {
    const name = item?.metadata?.name;
    if (typeof name !== 'string' || name === '' || !Array.isArray(item.versions)) continue;
    out.push({ name, versions: item.versions.map((v) => v?.version).filter((v): v is string => typeof v === 'string' && v !== '') });
  }
  return out;
}

/** Inputs of {@link mergedAPIGroupDiscoveryList}. */
export interface AggregatedMergeInput {
  /** The upstream's aggregated `/apis` (or one converted from its legacy discovery); `undefined` if unknown. */
  readonly upstream: APIGroupDiscoveryList | undefined;
  /** The registered APIServices in force. */
  readonly apiServices: readonly APIService[];
  /** Per non-local APIService name (`v1beta1.metrics.k8s.io`): what its backend last said. */
  readonly backends: ReadonlyMap<string, BackendGroupVersion>;
  /** The proxy's own `apiregistration.k8s.io/v1` entry; {@link apiregistrationVersionDiscovery} by default. */
  readonly apiregistration?: APIVersionDiscovery;
}

/** Build the merged document (as v2; {@link encodeAPIGroupDiscoveryList} sets the served version). */
export function mergedAPIGroupDiscoveryList(input: AggregatedMergeInput): APIGroupDiscoveryList {
  const upstreamVersions = new Map<string, APIVersionDiscovery>();
  for (const item of Array.isArray(input.upstream?.items) ? input.upstream.items : []) {
    for (const v of Array.isArray(item?.versions) ? item.versions : []) {
      if (typeof v?.version === 'string') upstreamVersions.set(`${v.version}.${item.metadata?.name}`, v);
    }
  }
  const items: APIGroupDiscovery[] = [
    { metadata: { name: APIREGISTRATION_GROUP }, versions: [input.apiregistration ?? apiregistrationVersionDiscovery()] },
  ];
  const entries = discoveryEntries(upstreamGroupsOfDiscovery(input.upstream), input.apiServices);
  for (const group of sortedForAggregatedDiscovery(entries)) {
    const versions: APIVersionDiscovery[] = [];
    for (const e of group) {
      if (e.servedBy === 'upstream') {
        const v = upstreamVersions.get(e.metadata.name);
        if (v) versions.push(v);
        continue;
      }
      const known = input.backends.get(e.metadata.name);
      const v: APIVersionDiscovery = { version: e.spec.version };
      if (known && known.resources.length > 0) v.resources = known.resources.map((r) => r);
      v.freshness = known?.freshness ?? 'Stale';
      versions.push(v);
    }
    if (versions.length > 0) items.push({ metadata: { name: group[0]!.spec.group }, versions });
  }
  return { kind: 'APIGroupDiscoveryList', apiVersion: `${APIDISCOVERY_GROUP}/v2`, metadata: {}, items };
}

/** The document's bytes for one served version (`apidiscovery.k8s.io/v2` or `/v2beta1`). */
export function encodeAPIGroupDiscoveryList(list: APIGroupDiscoveryList, version: AggregatedDiscoveryVersion): Buffer {
  return Buffer.from(JSON.stringify({ kind: list.kind, apiVersion: `${APIDISCOVERY_GROUP}/${version}`, metadata: list.metadata, items: list.items }));
}
