/**
 * Aggregated discovery's wire format (KEP-3352, `apidiscovery.k8s.io` v2 and v2beta1, same JSON
 * shape), pure: the document types, converting a legacy `APIResourceList` into a version's
 * resources, choosing the format from an `Accept` header as kube-apiserver's aggregated wrapper
 * does, and the ETag (`"<upper-case hex SHA-512 of the JSON>"`, `aggregated/etag.go`).
 */
import { createHash } from 'node:crypto';

/** `metav1.APIResource` as a legacy `/apis/<g>/<v>` lists it. */
export interface APIResource {
  name: string;
  singularName?: string;
  namespaced: boolean;
  group?: string;
  version?: string;
  kind: string;
  verbs: string[];
  shortNames?: string[];
  categories?: string[];
}

/** `metav1.APIResourceList`. */
export interface APIResourceList {
  kind?: string;
  apiVersion?: string;
  groupVersion: string;
  resources: APIResource[];
}

/** `apidiscovery.APIResourceDiscovery`. */
export interface APIResourceDiscovery {
  resource: string;
  responseKind: { group: string; version: string; kind: string };
  scope: 'Namespaced' | 'Cluster';
  singularResource: string;
  verbs: string[];
  shortNames?: string[];
  categories?: string[];
  subresources?: { subresource: string; responseKind: { group: string; version: string; kind: string }; verbs: string[] }[];
}

/** `apidiscovery.APIVersionDiscovery`. */
export interface APIVersionDiscovery {
  version: string;
  resources: APIResourceDiscovery[];
  freshness?: 'Current' | 'Stale';
}

/** `apidiscovery.APIGroupDiscovery`. */
export interface APIGroupDiscovery {
  metadata: { name: string; creationTimestamp: null };
  versions: APIVersionDiscovery[];
}

/** The two aggregated versions kubectl asks for (1.26–1.29: v2beta1 only; ≥ 1.30: v2 first). */
export type AggregatedVersion = 'v2' | 'v2beta1';

/** The negotiated answer format. */
export type DiscoveryFormat = AggregatedVersion | 'legacy';

/** The Content-Type of an aggregated discovery answer. */
export function aggregatedContentType(v: AggregatedVersion): string {
  return `application/json;g=apidiscovery.k8s.io;v=${v};as=APIGroupDiscoveryList`;
}

/** The whole aggregated document. */
export function aggregatedDocument(v: AggregatedVersion, groups: readonly APIGroupDiscovery[]): Record<string, unknown> {
  return { kind: 'APIGroupDiscoveryList', apiVersion: `apidiscovery.k8s.io/${v}`, metadata: {}, items: groups };
}

/**
 * The format for an `Accept` header: media ranges in order of `q` (then as listed); the aggregated
 * JSON type when its `g`, `v`, `as` parameters name one we serve (any order, extra parameters such
 * as `profile=nopeer` ignored), legacy for `application/json`, `*\/*` or no header; undefined when
 * nothing listed is acceptable (406).
 */
export function negotiateDiscovery(accept: string | undefined): DiscoveryFormat | undefined {
  if (accept === undefined || accept.trim() === '') return 'legacy';
  const ranges = accept.split(',').map((raw, index) => {
    const [type = '', ...rest] = raw.split(';').map((s) => s.trim());
    const params = new Map(rest.map((p) => p.split('=').map((x) => x.trim().replace(/^"|"$/g, '')) as [string, string]));
    const q = params.has('q') ? Number(params.get('q')) : 1;
    return { type: type.toLowerCase(), params, q: Number.isFinite(q) ? q : 0, index };
  });
  ranges.sort((a, b) => b.q - a.q || a.index - b.index);
  for (const r of ranges) {
    if (r.q <= 0) continue;
    if (r.type === 'application/json' && r.params.get('g') === 'apidiscovery.k8s.io' && r.params.get('as') === 'APIGroupDiscoveryList') {
      const v = r.params.get('v');
      if (v === 'v2' || v === 'v2beta1') return v;
      continue;
    }
    if (r.params.has('as') || r.params.has('g')) continue;
    if (r.type === 'application/json' || r.type === 'application/*' || r.type === '*/*') return 'legacy';
  }
  return undefined;
}

/** True when a response Content-Type is an aggregated discovery document (any version, parameters in any order). */
export function isAggregatedContentType(contentType: string | undefined): AggregatedVersion | undefined {
  if (!contentType) return undefined;
  const [type, ...rest] = contentType.split(';').map((s) => s.trim());
  const params = new Map(rest.map((p) => p.split('=').map((x) => x.trim()) as [string, string]));
  if (type?.toLowerCase() !== 'application/json' || params.get('g') !== 'apidiscovery.k8s.io' || params.get('as') !== 'APIGroupDiscoveryList') return undefined;
  const v = params.get('v');
  return v === 'v2' || v === 'v2beta1' ? v : undefined;
}

/** kube-apiserver's discovery ETag of a serialized document. */
export function discoveryETag(body: Buffer): string {
  return `"${createHash('sha512').update(body).digest('hex').toUpperCase()}"`;
}

/** True when `If-None-Match` names `etag` (a list, weak forms and `*` included). */
export function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((t) => {
    const tag = t.trim().replace(/^W\//, '');
    return tag === '*' || tag === etag;
  });
}

/**
 * A legacy `APIResourceList` as aggregated discovery lists the version: `name/sub` entries become
 * subresources of `name`; scope from `namespaced`; `responseKind` from the entry's kind (and group and
 * version when given, else the list's).
 */
export function resourcesFromLegacy(list: APIResourceList): APIResourceDiscovery[] {
  const [group, version] = list.groupVersion.includes('/') ? (list.groupVersion.split('/') as [string, string]) : ['', list.groupVersion];
  const out = new Map<string, APIResourceDiscovery>();
  const kindOf = (r: APIResource): { group: string; version: string; kind: string } => ({ group: r.group ?? group, version: r.version ?? version, kind: r.kind });
  for (const r of list.resources ?? []) {
    if (r.name.includes('/')) continue;
    const d: APIResourceDiscovery = {
      resource: r.name,
      responseKind: kindOf(r),
      scope: r.namespaced ? 'Namespaced' : 'Cluster',
      singularResource: r.singularName ?? '',
      verbs: [...(r.verbs ?? [])],
    };
    if (r.shortNames?.length) d.shortNames = [...r.shortNames];
    if (r.categories?.length) d.categories = [...r.categories];
    out.set(r.name, d);
  }
  for (const r of list.resources ?? []) {
    const [parent, sub] = r.name.split('/', 2);
    if (sub === undefined) continue;
    const p = out.get(parent!);
    if (!p) continue;
    (p.subresources ??= []).push({ subresource: sub, responseKind: kindOf(r), verbs: [...(r.verbs ?? [])] });
  }
  return [...out.values()];
}
