/**
 * dev-metrics' own discovery documents, as a generic API server serving only `metrics.k8s.io/v1beta1`
 * (metrics-server) writes them: legacy `/apis` (APIGroupList), `/apis/metrics.k8s.io` (APIGroup),
 * `/apis/metrics.k8s.io/v1beta1` (APIResourceList: `nodes` and `pods`, verbs get and list, singular
 * names empty as metrics-server's `GetSingularName` returns), and the aggregated `/apis`
 * (APIGroupDiscoveryList, `apidiscovery.k8s.io` v2 and v2beta1), chosen from the Accept header as
 * kube-apiserver does, the legacy form being the fallback. Pure.
 */
import { METRICS_GROUP, METRICS_GROUP_VERSION, METRICS_VERSION } from './metrics-objects.js';

/** The aggregated discovery versions served. */
export type AggregatedDiscoveryVersion = 'v2' | 'v2beta1';

/** The Content-Type of the aggregated document of `version`. */
export function aggregatedContentType(version: AggregatedDiscoveryVersion): string {
  return `application/json;g=apidiscovery.k8s.io;v=${version};as=APIGroupDiscoveryList`;
}

const groupVersion = { groupVersion: METRICS_GROUP_VERSION, version: METRICS_VERSION };

/** Legacy `/apis`. */
export function apiGroupList(): Record<string, unknown> {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: [{ name: METRICS_GROUP, versions: [groupVersion], preferredVersion: groupVersion }] };
}

/** `/apis/metrics.k8s.io`. */
export function apiGroup(): Record<string, unknown> {
  return { kind: 'APIGroup', apiVersion: 'v1', name: METRICS_GROUP, versions: [groupVersion], preferredVersion: groupVersion };
}

const RESOURCES = [
  { name: 'nodes', namespaced: false, kind: 'NodeMetrics' },
  { name: 'pods', namespaced: true, kind: 'PodMetrics' },
] as const;
const VERBS = ['get', 'list'];

/** `/apis/metrics.k8s.io/v1beta1`. */
export function apiResourceList(): Record<string, unknown> {
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: METRICS_GROUP_VERSION,
    resources: RESOURCES.map((r) => ({ name: r.name, singularName: '', namespaced: r.namespaced, kind: r.kind, verbs: VERBS })),
  };
}

/** Aggregated `/apis` in `version`'s shape (the two share it). */
export function apiGroupDiscoveryList(version: AggregatedDiscoveryVersion): Record<string, unknown> {
  return {
    kind: 'APIGroupDiscoveryList',
    apiVersion: `apidiscovery.k8s.io/${version}`,
    metadata: {},
    items: [
      {
        metadata: { name: METRICS_GROUP, creationTimestamp: null },
        versions: [
          {
            version: METRICS_VERSION,
            resources: RESOURCES.map((r) => ({
              resource: r.name,
              responseKind: { group: METRICS_GROUP, version: METRICS_VERSION, kind: r.kind },
              scope: r.namespaced ? 'Namespaced' : 'Cluster',
              singularResource: '',
              verbs: VERBS,
            })),
            freshness: 'Current',
          },
        ],
      },
    ],
  };
}

/** One media range of an Accept header. */
interface MediaRange {
  type: string;
  params: Map<string, string>;
  q: number;
}

function parseAccept(accept: string): MediaRange[] {
  return accept
    .split(',')
    .map((part, index) => {
      const [type = '', ...rest] = part.split(';').map((s) => s.trim());
      const params = new Map<string, string>();
      for (const p of rest) {
        const eq = p.indexOf('=');
        if (eq > 0) params.set(p.slice(0, eq).trim().toLowerCase(), p.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1'));
      }
      const q = params.has('q') ? Number(params.get('q')) : 1;
      return { range: { type: type.toLowerCase(), params, q: Number.isFinite(q) ? q : 0 }, index };
    })
    .filter(({ range }) => range.type !== '' && range.q > 0)
    .sort((a, b) => b.range.q - a.range.q || a.index - b.index)
    .map(({ range }) => range);
}

/**
 * Which `/apis` document the Accept header asks for: an aggregated version, or `legacy` (the
 * APIGroupList) when the first acceptable range is plain JSON, a wildcard, or absent. Ranges of
 * aggregated versions this server does not serve are skipped, as kube-apiserver's negotiation does.
 */
export function negotiateApisDocument(accept: string | undefined): AggregatedDiscoveryVersion | 'legacy' {
  for (const r of parseAccept(accept ?? '')) {
    if (r.type !== 'application/json' && r.type !== '*/*' && r.type !== 'application/*') continue;
    const g = r.params.get('g');
    if (g === undefined) return 'legacy';
    const v = r.params.get('v');
    if (g === 'apidiscovery.k8s.io' && r.params.get('as') === 'APIGroupDiscoveryList' && (v === 'v2' || v === 'v2beta1')) return v;
  }
  return 'legacy';
}
