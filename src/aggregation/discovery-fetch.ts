/**
 * Fetching one server's discovery, as kube-aggregator's discovery manager does for each backend
 * (`handler_discovery.go`), through an injected {@link DiscoveryFetch} so the transport (TLS, the
 * backend's identity headers such as `system:kube-aggregator`, the upstream's credentials) stays
 * with the caller:
 *
 * 1. `GET /apis` asking for aggregated discovery (`Accept`: v2, then v2beta1, then JSON), with
 *    `If-None-Match` when an earlier answer had an ETag; a 304 keeps the earlier result, current.
 * 2. The format is read from the answer's Content-Type, as client-go does: an aggregated document is
 *    used as is. A 406, or a plain `APIGroupList` (servers without aggregated discovery, such as the
 *    dev cluster, answer that way), falls back to legacy `GET /apis/<g>/<v>` per group-version,
 *    each fetched on its own and never reused for another group-version (k/k#115559), converted
 *    with `apiResourceListToVersionDiscovery`.
 * 3. Any other answer, a transport error, bad JSON or the 5 s timeout makes the group-version
 *    `Stale`, keeping the last known resources.
 *
 * {@link fetchBackendDiscovery} reads the group-versions of one backend's APIServices;
 * {@link fetchUpstreamDiscovery} reads a whole `/apis` (the primary upstream's), legacy or not.
 */
import type { BackendGroupVersion } from './discovery-aggregated.js';
import { apiResourceListToVersionDiscovery } from './discovery-convert.js';
import { AGGREGATED_CONTENT_TYPE_V2, AGGREGATED_CONTENT_TYPE_V2BETA1, LEGACY_CONTENT_TYPE, parseAccept } from './discovery-negotiation.js';
import { APIDISCOVERY_GROUP, type APIGroupDiscoveryList, type APIVersionDiscovery } from './discovery-types.js';

/** kube-aggregator's discovery timeout per request. */
export const DISCOVERY_TIMEOUT_MS = 5_000;

/** How many legacy group-version requests run at once against one server. */
export const LEGACY_FETCH_CONCURRENCY = 5;

/** The Accept of the aggregated request: client-go's `acceptDiscoveryFormats`. */
export const AGGREGATED_ACCEPT = `${AGGREGATED_CONTENT_TYPE_V2},${AGGREGATED_CONTENT_TYPE_V2BETA1},${LEGACY_CONTENT_TYPE}`;

/** One HTTP answer as the injected fetch returns it (header names in any case). */
export interface DiscoveryResponse {
  status: number;
  headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  body: Buffer;
}

/** A GET of `path` on the server, with these request headers; must honour `signal` (abort = timeout). */
export type DiscoveryFetch = (path: string, headers: Readonly<Record<string, string>>, signal: AbortSignal) => Promise<DiscoveryResponse>;

/** A group-version to read (`group` is `""` for the core group, read at `/api/<version>`). */
export interface GroupVersion {
  readonly group: string;
  readonly version: string;
}

/** Options of the fetch functions. */
export interface DiscoveryFetchOptions {
  /** Per-request timeout; {@link DISCOVERY_TIMEOUT_MS} by default. */
  timeoutMs?: number;
}

/** What {@link fetchBackendDiscovery} learned; pass it back as `previous` next time. */
export interface BackendDiscoveryResult {
  /** Per `<version>.<group>`: resources and freshness. */
  readonly groupVersions: ReadonlyMap<string, BackendGroupVersion>;
  /** ETag of the aggregated document, for the next conditional request. */
  readonly etag: string | undefined;
  /** How the answer was read. */
  readonly via: 'aggregated' | 'not-modified' | 'legacy' | 'failed';
  /** Why group-versions are Stale, per `<version>.<group>`. */
  readonly errors: ReadonlyMap<string, string>;
}

/** What {@link fetchUpstreamDiscovery} learned. */
export interface UpstreamDiscoveryResult {
  /** The whole `/apis` as aggregated discovery (converted from legacy if need be); `undefined` if it failed. */
  readonly document: APIGroupDiscoveryList | undefined;
  readonly etag: string | undefined;
  readonly via: 'aggregated' | 'not-modified' | 'legacy' | 'failed';
  /** The failure, when `via` is `failed`, or per-group-version legacy failures. */
  readonly errors: readonly string[];
}

const gvName = (gv: GroupVersion) => `${gv.version}.${gv.group}`;
const gvPath = (gv: GroupVersion) => (gv.group === '' ? `/api/${gv.version}` : `/apis/${gv.group}/${gv.version}`);

function header(r: DiscoveryResponse, name: string): string | undefined {
  for (const [k, v] of Object.entries(r.headers)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v[0] : (v as string | undefined);
  }
  return undefined;
}

/** True when a Content-Type names the aggregated list (parameters in any order, extra ones allowed). */
export function isAggregatedContentType(contentType: string | undefined): boolean {
  const [c] = parseAccept(contentType ?? '');
  return !!c && c.type === 'application' && c.subType === 'json' && c.params.g === APIDISCOVERY_GROUP &&
    c.params.as === 'APIGroupDiscoveryList' && (c.params.v === 'v2' || c.params.v === 'v2beta1');
}

async function get(fetch: DiscoveryFetch, path: string, headers: Record<string, string>, timeoutMs: number): Promise<DiscoveryResponse> {
  const ac = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      // Reject first, so the race reports the timeout and not the fetch's own abort error.
      reject(new Error(`GET ${path}: timed out after ${timeoutMs} ms`));
      ac.abort();
    }, timeoutMs);
  });
  try {
    return await Promise.race([fetch(path, headers, ac.signal), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function parseJSON(body: Buffer, what: string): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new Error(`${what}: invalid JSON: ${describe(e)}`);
  }
}

/** One legacy group-version, fetched on its own. */
async function fetchLegacyGroupVersion(fetch: DiscoveryFetch, gv: GroupVersion, timeoutMs: number): Promise<APIVersionDiscovery> {
  const path = gvPath(gv);
  const r = await get(fetch, path, { accept: LEGACY_CONTENT_TYPE }, timeoutMs);
  if (r.status !== 200) throw new Error(`GET ${path}: HTTP ${r.status}: ${r.body.toString('utf8').slice(0, 200)}`);
  return apiResourceListToVersionDiscovery(parseJSON(r.body, `GET ${path}`), gv.group, gv.version);
}

/** Run `fn` over `items`, at most `limit` at a time, results in order. */
async function pool<T, R>(items: readonly T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

type AggregatedAnswer =
  | { kind: 'aggregated'; document: APIGroupDiscoveryList; etag: string | undefined }
  | { kind: 'not-modified' }
  | { kind: 'legacy'; groupList: unknown }
  | { kind: 'failed'; error: string };

async function fetchAggregated(fetch: DiscoveryFetch, etag: string | undefined, timeoutMs: number): Promise<AggregatedAnswer> {
  const headers: Record<string, string> = { accept: AGGREGATED_ACCEPT };
  if (etag) headers['if-none-match'] = etag;
  try {
    const r = await get(fetch, '/apis', headers, timeoutMs);
    if (r.status === 304 && etag) return { kind: 'not-modified' };
    if (r.status === 406) return { kind: 'legacy', groupList: undefined };
    if (r.status !== 200) return { kind: 'failed', error: `GET /apis: HTTP ${r.status}: ${r.body.toString('utf8').slice(0, 200)}` };
    const body = parseJSON(r.body, 'GET /apis');
    if (!isAggregatedContentType(header(r, 'content-type'))) return { kind: 'legacy', groupList: body };
    const items = (body as { items?: unknown }).items;
    if (!Array.isArray(items)) return { kind: 'failed', error: 'GET /apis: the aggregated document has no items' };
    return { kind: 'aggregated', document: body as APIGroupDiscoveryList, etag: header(r, 'etag') };
  } catch (e) {
    return { kind: 'failed', error: describe(e) };
  }
}

/**
 * Read the discovery of `groupVersions` (one backend's APIServices) from that backend. `previous`
 * is the last result for the same backend: its ETag is sent and its resources are kept when the
 * backend cannot answer.
 */
export async function fetchBackendDiscovery(fetch: DiscoveryFetch, groupVersions: readonly GroupVersion[], previous?: BackendDiscoveryResult, options: DiscoveryFetchOptions = {}): Promise<BackendDiscoveryResult> {
  const timeoutMs = options.timeoutMs ?? DISCOVERY_TIMEOUT_MS;
  const stale = (gv: GroupVersion): BackendGroupVersion => ({ resources: previous?.groupVersions.get(gvName(gv))?.resources ?? [], freshness: 'Stale' });
  const errors = new Map<string, string>();
  const result = new Map<string, BackendGroupVersion>();
  const answer = await fetchAggregated(fetch, previous?.via === 'aggregated' || previous?.via === 'not-modified' ? previous.etag : undefined, timeoutMs);

  switch (answer.kind) {
    case 'not-modified':
      for (const gv of groupVersions) {
        const prior = previous?.groupVersions.get(gvName(gv));
        if (prior && !previous?.errors.has(gvName(gv))) result.set(gvName(gv), { resources: prior.resources, freshness: 'Current' });
        else {
          result.set(gvName(gv), stale(gv));
          errors.set(gvName(gv), previous?.errors.get(gvName(gv)) ?? `the backend's discovery does not list ${gvPath(gv)}`);
        }
      }
      return { groupVersions: result, etag: previous?.etag, via: 'not-modified', errors };
    case 'aggregated':
      for (const gv of groupVersions) {
        const item = answer.document.items.find((g) => g?.metadata?.name === gv.group);
        const v = Array.isArray(item?.versions) ? item.versions.find((x) => x?.version === gv.version) : undefined;
        if (v) result.set(gvName(gv), { resources: Array.isArray(v.resources) ? v.resources : [], freshness: v.freshness === 'Stale' ? 'Stale' : 'Current' });
        else {
          result.set(gvName(gv), stale(gv));
          errors.set(gvName(gv), `the backend's discovery does not list ${gvPath(gv)}`);
        }
      }
      return { groupVersions: result, etag: answer.etag, via: 'aggregated', errors };
    case 'legacy':
      await pool(groupVersions, LEGACY_FETCH_CONCURRENCY, async (gv) => {
        try {
          const v = await fetchLegacyGroupVersion(fetch, gv, timeoutMs);
          result.set(gvName(gv), { resources: v.resources ?? [], freshness: 'Current' });
        } catch (e) {
          result.set(gvName(gv), stale(gv));
          errors.set(gvName(gv), describe(e));
        }
      });
      return { groupVersions: result, etag: undefined, via: 'legacy', errors };
    case 'failed':
      for (const gv of groupVersions) {
        result.set(gvName(gv), stale(gv));
        errors.set(gvName(gv), answer.error);
      }
      return { groupVersions: result, etag: previous?.etag, via: 'failed', errors };
  }
}

/**
 * Read a server's whole `/apis` as aggregated discovery: the document itself, or, from a server
 * that has none, its `APIGroupList` with each group-version read through legacy discovery (a
 * group-version that fails is listed `Stale` with its last known resources from `previous`).
 */
export async function fetchUpstreamDiscovery(fetch: DiscoveryFetch, previous?: UpstreamDiscoveryResult, options: DiscoveryFetchOptions = {}): Promise<UpstreamDiscoveryResult> {
  const timeoutMs = options.timeoutMs ?? DISCOVERY_TIMEOUT_MS;
  const answer = await fetchAggregated(fetch, previous?.via === 'aggregated' || previous?.via === 'not-modified' ? previous.etag : undefined, timeoutMs);
  if (answer.kind === 'not-modified') return { document: previous?.document, etag: previous?.etag, via: 'not-modified', errors: [] };
  if (answer.kind === 'aggregated') return { document: answer.document, etag: answer.etag, via: 'aggregated', errors: [] };
  if (answer.kind === 'failed') return { document: undefined, etag: undefined, via: 'failed', errors: [answer.error] };

  let groupList = answer.groupList;
  if (groupList === undefined) {
    try {
      const r = await get(fetch, '/apis', { accept: LEGACY_CONTENT_TYPE }, timeoutMs);
      if (r.status !== 200) throw new Error(`GET /apis: HTTP ${r.status}`);
      groupList = parseJSON(r.body, 'GET /apis');
    } catch (e) {
      return { document: undefined, etag: undefined, via: 'failed', errors: [describe(e)] };
    }
  }
  const groups = (groupList as { groups?: unknown }).groups;
  if (!Array.isArray(groups)) return { document: undefined, etag: undefined, via: 'failed', errors: ['GET /apis: not an APIGroupList'] };
  const gvs: GroupVersion[] = [];
  for (const g of groups as Array<{ name?: unknown; versions?: Array<{ version?: unknown }> }>) {
    if (typeof g?.name !== 'string' || !Array.isArray(g.versions)) continue;
    for (const v of g.versions) if (typeof v?.version === 'string') gvs.push({ group: g.name, version: v.version });
  }
  const errors: string[] = [];
  const known = (gv: GroupVersion) => previous?.document?.items.find((i) => i.metadata.name === gv.group)?.versions?.find((v) => v.version === gv.version);
  const versions = await pool(gvs, LEGACY_FETCH_CONCURRENCY, async (gv): Promise<APIVersionDiscovery> => {
    try {
      return await fetchLegacyGroupVersion(fetch, gv, timeoutMs);
    } catch (e) {
      errors.push(`${gvPath(gv)}: ${describe(e)}`);
      const prior = known(gv);
      return prior?.resources ? { version: gv.version, resources: prior.resources, freshness: 'Stale' } : { version: gv.version, freshness: 'Stale' };
    }
  });
  const items: APIGroupDiscoveryList['items'] = [];
  gvs.forEach((gv, i) => {
    const last = items.at(-1);
    if (last?.metadata.name === gv.group) last.versions!.push(versions[i]!);
    else items.push({ metadata: { name: gv.group }, versions: [versions[i]!] });
  });
  return { document: { kind: 'APIGroupDiscoveryList', apiVersion: `${APIDISCOVERY_GROUP}/v2`, metadata: {}, items }, etag: undefined, via: 'legacy', errors };
}
