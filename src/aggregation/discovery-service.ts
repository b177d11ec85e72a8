/**
 * The merged discovery, kept ready: the primary upstream's groups and resources and every
 * registered APIService's, fetched in the background — at start, whenever the registrations or an
 * APIService's availability change, and at least every minute — and served from memory, never
 * fetched per request. Each refresh produces the three documents kubectl reads at `/apis` (legacy
 * `APIGroupList`, aggregated v2 and v2beta1, each with its ETag).
 *
 * Fetching follows kube-aggregator's discovery manager: a backend's aggregated `/apis` first (its
 * own group-version taken from it), and on 406 or a legacy answer the legacy `/apis/<g>/<v>`
 * (never shared across group-versions, k/k#115559). The proxy's own calls carry the proxy's
 * credentials: toward the upstream its token, toward backends the front-proxy certificate as
 * `system:kube-aggregator`. A backend that fails, or whose APIService is not Available, is
 * published as `freshness: Stale` with its last known resources (empty before the first success).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { REMOTE_GROUP, REMOTE_USER } from '../auth/identity-headers.js';
import type { Upstream } from '../routing/upstream.js';
import { isLocal, type APIService } from './apiservice.js';
import type { Aggregator } from './aggregator.js';
import { sortedForAggregatedDiscovery } from './apiservice-sort.js';
import { APIREGISTRATION_GROUP, discoveryEntries, upstreamGroupsOf } from './discovery-entries.js';
import {
  aggregatedContentType,
  aggregatedDocument,
  discoveryETag,
  isAggregatedContentType,
  resourcesFromLegacy,
  type AggregatedVersion,
  type APIGroupDiscovery,
  type APIResourceDiscovery,
  type APIResourceList,
  type APIVersionDiscovery,
} from './discovery-format.js';
import { mergedAPIGroup, mergedAPIGroupList, type APIGroup, type APIGroupList } from './discovery-legacy.js';

/** Longest interval between refreshes (kube-aggregator's workers refresh every minute). */
export const DISCOVERY_REFRESH_MS = 60_000;
/** Client timeout of one discovery fetch (kube-aggregator: 5 s). */
export const DISCOVERY_FETCH_TIMEOUT_MS = 5_000;

/** One document ready to send. */
export interface DiscoveryDocument {
  body: Buffer;
  contentType: string;
  etag: string;
}

/** What a refresh produced. */
export interface DiscoverySnapshot {
  legacy: DiscoveryDocument;
  aggregated: Record<AggregatedVersion, DiscoveryDocument>;
  /** The core group at `/api`, aggregated (undefined until the upstream's `/api/v1` was read). */
  core: Record<AggregatedVersion, DiscoveryDocument> | undefined;
  /** The upstream's `/apis` (for `/apis/<group>`). */
  upstreamGroups: APIGroupList | undefined;
  apiServices: readonly APIService[];
}

/** The accept line of a discovery fetch: aggregated v2, then v2beta1, then legacy. */
const FETCH_ACCEPT = `${aggregatedContentType('v2')},${aggregatedContentType('v2beta1')},application/json;q=0.9`;

/** The `apiregistration.k8s.io` group as aggregated discovery lists it. */
function apiregistrationDiscovery(): APIGroupDiscovery {
  const kind = { group: APIREGISTRATION_GROUP, version: 'v1', kind: 'APIService' };
  return {
    metadata: { name: APIREGISTRATION_GROUP, creationTimestamp: null },
    versions: [
      {
        version: 'v1',
        resources: [{ resource: 'apiservices', responseKind: kind, scope: 'Cluster', singularResource: 'apiservice', verbs: ['get', 'list'], categories: ['api-extensions'], subresources: [{ subresource: 'status', responseKind: kind, verbs: ['get'] }] }],
        freshness: 'Current',
      },
    ],
  };
}

type Fetched = { status: number; headers: IncomingHttpHeaders; body: Buffer };

/** GET `path` on `upstream` with `headers`, bounded by the fetch timeout. */
function get(upstream: Upstream, path: string, headers: Record<string, string>): Promise<Fetched> {
  return new Promise((resolve, reject) => {
    const req = upstream.request({ method: 'GET', path: upstream.target(path), headers: { Host: upstream.host, ...headers } });
    const timer = setTimeout(() => req.destroy(new Error(`GET ${path}: timeout after ${DISCOVERY_FETCH_TIMEOUT_MS} ms`)), DISCOVERY_FETCH_TIMEOUT_MS);
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
      });
      res.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    req.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.end();
  });
}

function json<T>(f: Fetched, what: string): T {
  if (f.status < 200 || f.status > 299) throw new Error(`${what}: HTTP ${f.status}`);
  return JSON.parse(f.body.toString('utf8')) as T;
}

/** Keeps the merged discovery of one proxy. */
export class DiscoveryService {
  readonly #upstream: Upstream;
  readonly #aggregator: Aggregator;
  readonly #log: { warn(obj: object, msg: string): void } | undefined;
  /** Last known resources per group-version of the upstream. */
  #upstreamResources = new Map<string, APIResourceDiscovery[]>();
  /** Last known resources per non-local APIService name. */
  readonly #backendResources = new Map<string, APIResourceDiscovery[]>();
  #snapshot: DiscoverySnapshot | undefined;
  #first: Promise<void>;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #closed = false;

  constructor(upstream: Upstream, aggregator: Aggregator, log?: { warn(obj: object, msg: string): void }) {
    this.#upstream = upstream;
    this.#aggregator = aggregator;
    this.#log = log;
    this.#first = this.refresh();
    aggregator.availability.on('change', () => void this.refresh());
  }

  /** The documents; waits only for the very first refresh. */
  async snapshot(): Promise<DiscoverySnapshot> {
    if (!this.#snapshot) await this.#first;
    return this.#snapshot!;
  }

  /** The `/apis/<group>` document, or undefined when the upstream answers it. */
  async group(name: string): Promise<APIGroup | undefined> {
    const s = await this.snapshot();
    return mergedAPIGroup(name, s.upstreamGroups, s.apiServices);
  }

  /** Refresh now (coalesced with one already running). Also re-arms the every-minute timer. */
  refresh(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#running = (async () => {
      do {
        this.#again = false;
        try {
          await this.#refreshOnce();
        } catch (e) {
          this.#log?.warn({ err: e }, 'discovery refresh failed');
        }
      } while (this.#again && !this.#closed);
      this.#running = undefined;
      clearTimeout(this.#timer);
      if (!this.#closed) {
        this.#timer = setTimeout(() => void this.refresh(), DISCOVERY_REFRESH_MS);
        this.#timer.unref();
      }
    })();
    return this.#running;
  }

  async #ownUpstreamHeaders(): Promise<Record<string, string>> {
    return { Accept: 'application/json', ...(await this.#upstream.authHeaders()) };
  }

  /** The upstream's group list and resources (aggregated when it serves it, else per group-version). */
  async #fetchUpstream(): Promise<APIGroupList | undefined> {
    const headers = await this.#ownUpstreamHeaders();
    let list: APIGroupList | undefined;
    try {
      const answer = await get(this.#upstream, '/apis', { ...headers, Accept: FETCH_ACCEPT });
      if (answer.status >= 200 && answer.status < 300 && isAggregatedContentType(answer.headers['content-type'] as string | undefined)) {
        const doc = JSON.parse(answer.body.toString('utf8')) as { items?: APIGroupDiscovery[] };
        const resources = new Map<string, APIResourceDiscovery[]>();
        for (const g of doc.items ?? []) for (const v of g.versions) resources.set(`${g.metadata.name}/${v.version}`, v.resources ?? []);
        this.#upstreamResources = resources;
        return { kind: 'APIGroupList', apiVersion: 'v1', groups: (doc.items ?? []).map((g) => ({ name: g.metadata.name, versions: g.versions.map((v) => ({ groupVersion: `${g.metadata.name}/${v.version}`, version: v.version })), preferredVersion: { groupVersion: `${g.metadata.name}/${g.versions[0]?.version}`, version: g.versions[0]?.version ?? '' } })) };
      }
      list = answer.status === 406 ? json<APIGroupList>(await get(this.#upstream, '/apis', headers), 'upstream /apis') : json<APIGroupList>(answer, 'upstream /apis');
    } catch (e) {
      this.#log?.warn({ err: e }, 'upstream discovery failed; keeping the last known groups');
      return this.#snapshot?.upstreamGroups;
    }
    const resources = new Map<string, APIResourceDiscovery[]>();
    await Promise.all(
      upstreamGroupsOf(list).flatMap((g) =>
        g.versions.map(async (v) => {
          const gv = `${g.name}/${v}`;
          try {
            resources.set(gv, resourcesFromLegacy(json<APIResourceList>(await get(this.#upstream, `/apis/${gv}`, headers), `upstream /apis/${gv}`)));
          } catch {
            const known = this.#upstreamResources.get(gv);
            if (known) resources.set(gv, known);
          }
        }),
      ),
    );
    this.#upstreamResources = resources;
    return list;
  }

  /**
   * The core group for an aggregated `/api` (client-go uses aggregated discovery only when BOTH
   * `/api` and `/apis` answer it; otherwise it falls back to one request per group-version): the
   * upstream's own aggregated `/api`, or its legacy `/api` + `/api/<v>` converted.
   */
  async #fetchCore(): Promise<APIGroupDiscovery | undefined> {
    const headers = await this.#ownUpstreamHeaders();
    try {
      const answer = await get(this.#upstream, '/api', { ...headers, Accept: FETCH_ACCEPT });
      if (answer.status >= 200 && answer.status < 300 && isAggregatedContentType(answer.headers['content-type'] as string | undefined)) {
        const doc = JSON.parse(answer.body.toString('utf8')) as { items?: APIGroupDiscovery[] };
        return doc.items?.[0];
      }
      const versions = json<{ versions?: string[] }>(answer.status === 406 ? await get(this.#upstream, '/api', headers) : answer, 'upstream /api').versions ?? [];
      const out: APIVersionDiscovery[] = [];
      for (const v of versions) {
        out.push({ version: v, resources: resourcesFromLegacy(json<APIResourceList>(await get(this.#upstream, `/api/${v}`, headers), `upstream /api/${v}`)), freshness: 'Current' });
      }
      return { metadata: { name: '', creationTimestamp: null }, versions: out };
    } catch (e) {
      this.#log?.warn({ err: e }, 'upstream core discovery failed; keeping the last known');
      return undefined;
    }
  }

  /** One backend's resources for its group-version, or undefined when it could not be read. */
  async #fetchBackend(a: APIService): Promise<APIResourceDiscovery[] | undefined> {
    const upstream = this.#aggregator.backend(a.metadata.name)?.pick(true);
    if (!upstream) return undefined;
    const identity = { [REMOTE_USER]: 'system:kube-aggregator', [REMOTE_GROUP]: 'system:masters' };
    try {
      const answer = await get(upstream, '/apis', { Accept: FETCH_ACCEPT, ...identity });
      if (answer.status >= 200 && answer.status < 300 && isAggregatedContentType(answer.headers['content-type'] as string | undefined)) {
        const doc = JSON.parse(answer.body.toString('utf8')) as { items?: APIGroupDiscovery[] };
        const v = doc.items?.find((g) => g.metadata.name === a.spec.group)?.versions.find((x) => x.version === a.spec.version);
        if (v) return v.resources ?? [];
      }
      const legacy = await get(upstream, `/apis/${a.spec.group}/${a.spec.version}`, { Accept: 'application/json', ...identity });
      return resourcesFromLegacy(json<APIResourceList>(legacy, `${upstream.url.origin}/apis/${a.spec.group}/${a.spec.version}`));
    } catch (e) {
      this.#log?.warn({ err: e, apiservice: a.metadata.name }, 'aggregated discovery failed; the group-version is published as Stale');
      return undefined;
    }
  }

  async #refreshOnce(): Promise<void> {
    const apiServices = this.#aggregator.list();
    const [upstreamGroups, core, backendResults] = await Promise.all([
      this.#fetchUpstream(),
      this.#fetchCore(),
      Promise.all(apiServices.filter((a) => !isLocal(a) && a.spec.group !== '').map(async (a) => [a, this.#aggregator.availability.isAvailable(a.metadata.name) ? await this.#fetchBackend(a) : undefined] as const)),
    ]);
    const fresh = new Set<string>();
    for (const [a, resources] of backendResults) {
      if (resources) {
        this.#backendResources.set(a.metadata.name, resources);
        fresh.add(a.metadata.name);
      }
    }
    for (const name of [...this.#backendResources.keys()]) if (!apiServices.some((a) => a.metadata.name === name)) this.#backendResources.delete(name);
    const legacyBody = Buffer.from(JSON.stringify(mergedAPIGroupList(upstreamGroups, apiServices)));
    // apiregistration.k8s.io first (kube-aggregator pins it at priority 20001).
    const groups: APIGroupDiscovery[] = [apiregistrationDiscovery()];
    const entries = discoveryEntries(upstreamGroupsOf(upstreamGroups), apiServices);
    for (const sorted of sortedForAggregatedDiscovery(entries)) {
      const versions: APIVersionDiscovery[] = sorted.map((e) => {
        if (e.servedBy === 'upstream') return { version: e.spec.version, resources: this.#upstreamResources.get(`${e.spec.group}/${e.spec.version}`) ?? [], freshness: 'Current' };
        const name = e.apiService!.metadata.name;
        return { version: e.spec.version, resources: this.#backendResources.get(name) ?? [], freshness: fresh.has(name) ? 'Current' : 'Stale' };
      });
      groups.push({ metadata: { name: sorted[0]!.spec.group, creationTimestamp: null }, versions });
    }
    const aggregated = {} as Record<AggregatedVersion, DiscoveryDocument>;
    for (const v of ['v2', 'v2beta1'] as const) {
      const body = Buffer.from(JSON.stringify(aggregatedDocument(v, groups)));
      aggregated[v] = { body, contentType: aggregatedContentType(v), etag: discoveryETag(body) };
    }
    let coreDocs = this.#snapshot?.core;
    if (core) {
      coreDocs = {} as Record<AggregatedVersion, DiscoveryDocument>;
      for (const v of ['v2', 'v2beta1'] as const) {
        const body = Buffer.from(JSON.stringify(aggregatedDocument(v, [core])));
        coreDocs[v] = { body, contentType: aggregatedContentType(v), etag: discoveryETag(body) };
      }
    }
    this.#snapshot = {
      legacy: { body: legacyBody, contentType: 'application/json', etag: discoveryETag(legacyBody) },
      aggregated,
      core: coreDocs,
      upstreamGroups,
      apiServices,
    };
  }

  /** Stop refreshing. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }
}
