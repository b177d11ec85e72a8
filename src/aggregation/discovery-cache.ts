/**
 * The merged discovery documents, kept ready to serve: requests read the current bytes and ETag
 * synchronously ({@link DiscoveryCache.document}) and never cause a fetch.
 *
 * A refresh reads the primary upstream's `/apis` and each backend's discovery (through
 * `discovery-fetch.ts`), then rebuilds every document at once (legacy `APIGroupList`, aggregated v2
 * and v2beta1) into one immutable snapshot. Refreshes run at start, on change (a new APIService set,
 * an availability change or any {@link DiscoveryCache.invalidate}), and at least every
 * {@link DEFAULT_REFRESH_INTERVAL_MS}; they never overlap, and invalidations during one coalesce into
 * one more. Backends are keyed by their Service (namespace/name/port) or backend URL, so APIServices
 * on the same backend share one fetch and one ETag, as kube-aggregator shares them per Service.
 *
 * A new APIService set takes effect in the documents at once (new group-versions are `Stale` until
 * their first fetch; removed ones disappear); the fetch follows. If the upstream cannot be read, its
 * last document stays in use.
 */
import { EventEmitter } from 'node:events';
import type { APIService } from './apiservice.js';
import { encodeAPIGroupDiscoveryList, mergedAPIGroupDiscoveryList, upstreamGroupsOfDiscovery, type BackendGroupVersion } from './discovery-aggregated.js';
import type { GroupListLike } from './discovery-entries.js';
import type { APIVersionDiscovery } from './discovery-types.js';
import {
  fetchBackendDiscovery,
  fetchUpstreamDiscovery,
  type BackendDiscoveryResult,
  type DiscoveryFetch,
  type UpstreamDiscoveryResult,
} from './discovery-fetch.js';
import { mergedAPIGroup, mergedAPIGroupList } from './discovery-legacy.js';
import {
  AGGREGATED_CONTENT_TYPE_V2,
  AGGREGATED_CONTENT_TYPE_V2BETA1,
  discoveryETag,
  LEGACY_CONTENT_TYPE,
  type DiscoveryFormat,
} from './discovery-negotiation.js';

/** kube-aggregator refreshes every backend's discovery every minute. */
export const DEFAULT_REFRESH_INTERVAL_MS = 60_000;

/** One servable document: its bytes, ETag and Content-Type. */
export interface DiscoveryDocument {
  readonly body: Buffer;
  readonly etag: string;
  readonly contentType: string;
}

/** Timers the cache uses (injected so tests drive time). */
export interface DiscoveryTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Options of {@link DiscoveryCache}. */
export interface DiscoveryCacheOptions {
  /** GET on the primary upstream (with the proxy's own credentials). */
  fetchUpstream: DiscoveryFetch;
  /** GET on the backend of a non-local APIService (its transport and identity headers); called once per backend per refresh, so return a cached transport. */
  fetchBackend: (apiService: APIService) => DiscoveryFetch;
  /** The APIServices in force at start. */
  apiServices: readonly APIService[];
  /** Longest time between refreshes; {@link DEFAULT_REFRESH_INTERVAL_MS} by default. */
  refreshIntervalMs?: number;
  /** Per-request discovery timeout (see `discovery-fetch.ts`). */
  timeoutMs?: number;
  /** Defaults to the global timers, unref'd. */
  timers?: DiscoveryTimers;
  /** The proxy's own `apiregistration.k8s.io/v1` entry (its verbs); the merge's default otherwise. */
  apiregistration?: APIVersionDiscovery;
}

/** Why a group-version is Stale, and when the last refresh finished. */
export interface DiscoveryCacheStatus {
  /** Per APIService name, the last fetch error of its group-version. */
  readonly errors: ReadonlyMap<string, string>;
  /** Problems reading the upstream on the last refresh. */
  readonly upstreamErrors: readonly string[];
  /** Completed refreshes so far. */
  readonly refreshes: number;
}

/** The events of {@link DiscoveryCache}. */
export interface DiscoveryCacheEvents {
  /** New documents are in place (after a refresh or a new APIService set). */
  updated: [];
}

interface Snapshot {
  readonly documents: Readonly<Record<DiscoveryFormat, DiscoveryDocument>>;
  readonly upstreamGroups: GroupListLike;
  readonly apiServices: readonly APIService[];
  readonly groups: Map<string, DiscoveryDocument | undefined>;
}

const DEFAULT_TIMERS: DiscoveryTimers = {
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** The key of an APIService's backend: the Service (namespace/name:port) or the backend URL. */
export function backendKey(a: APIService): string | undefined {
  if (a.spec.service) return `service:${a.spec.service.namespace}/${a.spec.service.name}:${a.spec.service.port}`;
  if (a.backendURL) return `url:${a.backendURL.href}`;
  return undefined;
}

function documentOf(body: Buffer, contentType: string): DiscoveryDocument {
  return { body, etag: discoveryETag(body), contentType };
}

/** Merged discovery, cached and refreshed in the background. */
export class DiscoveryCache extends EventEmitter<DiscoveryCacheEvents> {
  #apiServices: readonly APIService[];
  #upstream: UpstreamDiscoveryResult | undefined;
  #backends = new Map<string, BackendDiscoveryResult>();
  #snapshot: Snapshot;
  #status: DiscoveryCacheStatus = { errors: new Map(), upstreamErrors: [], refreshes: 0 };
  #running: Promise<void> | undefined;
  #again = false;
  #timer: unknown;
  #closed = false;
  readonly #timers: DiscoveryTimers;

  constructor(private readonly options: DiscoveryCacheOptions) {
    super();
    this.#apiServices = options.apiServices;
    this.#timers = options.timers ?? DEFAULT_TIMERS;
    this.#snapshot = this.#build();
  }

  /** Run the first refresh and keep refreshing; resolves when the first one is done. */
  start(): Promise<void> {
    return this.refresh();
  }

  /** The current document for a negotiated format (synchronous; never fetches). */
  document(format: DiscoveryFormat): DiscoveryDocument {
    return this.#snapshot.documents[format];
  }

  /** The legacy `/apis/<group>` document, or `undefined` when no APIService names the group (forward it). */
  apiGroup(group: string): DiscoveryDocument | undefined {
    const s = this.#snapshot;
    if (!s.groups.has(group)) {
      const g = mergedAPIGroup(group, s.upstreamGroups, s.apiServices);
      s.groups.set(group, g ? documentOf(Buffer.from(JSON.stringify(g)), LEGACY_CONTENT_TYPE) : undefined);
    }
    return s.groups.get(group);
  }

  /** Fetch errors and refresh count, for logs and tests. */
  get status(): DiscoveryCacheStatus {
    return this.#status;
  }

  /** Replace the APIService set: documents change now, a refresh follows. */
  setAPIServices(apiServices: readonly APIService[]): void {
    this.#apiServices = apiServices;
    const keys = new Set(apiServices.map(backendKey).filter((k): k is string => k !== undefined));
    for (const k of [...this.#backends.keys()]) if (!keys.has(k)) this.#backends.delete(k);
    this.#publish();
    this.invalidate();
  }

  /** Something changed (availability, a backend restarted): refresh soon. */
  invalidate(): void {
    if (this.#closed) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#schedule(0);
  }

  /** Refresh now (or join the running refresh and run once more after it). */
  refresh(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#running = (async () => {
      try {
        do {
          this.#again = false;
          await this.#refreshOnce();
        } while (this.#again && !this.#closed);
      } finally {
        this.#running = undefined;
        this.#schedule(this.options.refreshIntervalMs ?? DEFAULT_REFRESH_INTERVAL_MS);
      }
    })();
    return this.#running;
  }

  /** Stop refreshing. */
  close(): void {
    this.#closed = true;
    this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    this.#timers.clearTimeout(this.#timer);
    this.#timer = this.#timers.setTimeout(() => {
      this.#timer = undefined;
      void this.refresh();
    }, ms);
  }

  async #refreshOnce(): Promise<void> {
    const opts = { ...(this.options.timeoutMs !== undefined ? { timeoutMs: this.options.timeoutMs } : {}) };
    const byKey = new Map<string, APIService[]>();
    for (const a of this.#apiServices) {
      const k = backendKey(a);
      if (k) byKey.set(k, [...(byKey.get(k) ?? []), a]);
    }
    const [upstream, ...backends] = await Promise.all([
      fetchUpstreamDiscovery(this.options.fetchUpstream, this.#upstream, opts),
      ...[...byKey].map(async ([key, list]) => {
        const gvs = list.map((a) => ({ group: a.spec.group, version: a.spec.version }));
        return [key, await fetchBackendDiscovery(this.options.fetchBackend(list[0]!), gvs, this.#backends.get(key), opts)] as const;
      }),
    ]);
    if (this.#closed) return;
    if (upstream.document || !this.#upstream) this.#upstream = upstream;
    for (const [key, result] of backends) if (byKey.has(key)) this.#backends.set(key, result);
    const errors = new Map<string, string>();
    for (const r of this.#backends.values()) for (const [name, e] of r.errors) errors.set(name, e);
    this.#status = { errors, upstreamErrors: upstream.errors, refreshes: this.#status.refreshes + 1 };
    this.#publish();
  }

  #publish(): void {
    this.#snapshot = this.#build();
    this.emit('updated');
  }

  #build(): Snapshot {
    const backends = new Map<string, BackendGroupVersion>();
    for (const a of this.#apiServices) {
      const k = backendKey(a);
      const known = k ? this.#backends.get(k)?.groupVersions.get(a.metadata.name) : undefined;
      if (known) backends.set(a.metadata.name, known);
    }
    const upstreamDoc = this.#upstream?.document;
    const aggregated = mergedAPIGroupDiscoveryList({ upstream: upstreamDoc, apiServices: this.#apiServices, backends, ...(this.options.apiregistration ? { apiregistration: this.options.apiregistration } : {}) });
    const upstreamGroups: GroupListLike = {
      groups: upstreamGroupsOfDiscovery(upstreamDoc).map((g) => ({ name: g.name, versions: g.versions.map((version) => ({ version })) })),
    };
    const legacy = mergedAPIGroupList(upstreamGroups, this.#apiServices);
    return {
      documents: {
        v2: documentOf(encodeAPIGroupDiscoveryList(aggregated, 'v2'), AGGREGATED_CONTENT_TYPE_V2),
        v2beta1: documentOf(encodeAPIGroupDiscoveryList(aggregated, 'v2beta1'), AGGREGATED_CONTENT_TYPE_V2BETA1),
        legacy: documentOf(Buffer.from(JSON.stringify(legacy)), LEGACY_CONTENT_TYPE),
      },
      upstreamGroups,
      apiServices: this.#apiServices,
      groups: new Map(),
    };
  }
}
