/**
 * The merged discovery wired to the proxy's transports: a {@link DiscoveryCache} reading the primary
 * upstream with the proxy's own credentials and each backend through one of its ready endpoints
 * with the front-proxy certificate as `system:kube-aggregator` (kube-aggregator's discovery
 * manager's identity), refreshed when the registrations or an APIService's availability change,
 * and the core group for an aggregated `/api`.
 *
 * Why `/api` too: client-go takes aggregated discovery only when BOTH `/api` and `/apis` answer it;
 * otherwise it falls back to one request per group-version. The dev cluster and older apiservers
 * answer `/api` with legacy JSON only, so the proxy serves the core group's aggregated form itself
 * (the upstream's own, or its legacy `/api/<v>` converted).
 */
import { REMOTE_GROUP, REMOTE_USER } from '../auth/identity-headers.js';
import type { Upstream } from '../routing/upstream.js';
import type { APIService } from './apiservice.js';
import type { Aggregator } from './aggregator.js';
import { apiregistrationVersionDiscovery } from './discovery-aggregated.js';
import { DiscoveryCache, type DiscoveryDocument } from './discovery-cache.js';
import { apiResourceListToVersionDiscovery } from './discovery-convert.js';
import { AGGREGATED_ACCEPT, isAggregatedContentType, type DiscoveryFetch, type DiscoveryResponse } from './discovery-fetch.js';
import { AGGREGATED_CONTENT_TYPE_V2, AGGREGATED_CONTENT_TYPE_V2BETA1, discoveryETag, type DiscoveryFormat } from './discovery-negotiation.js';
import type { AggregatedDiscoveryVersion, APIGroupDiscovery, APIVersionDiscovery } from './discovery-types.js';

/** A {@link DiscoveryFetch} on `upstream` (its pooled connections), with `extra` headers on every request. */
export function fetchOn(upstream: Upstream, extra: () => Promise<Record<string, string>>): DiscoveryFetch {
  return async (path, headers, signal) => {
    const own = await extra();
    return new Promise<DiscoveryResponse>((resolve, reject) => {
      const req = upstream.request({ method: 'GET', path: upstream.target(path), headers: { Host: upstream.host, ...headers, ...own } });
      const onAbort = (): void => void req.destroy(signal.reason instanceof Error ? signal.reason : new Error('discovery request aborted'));
      signal.addEventListener('abort', onAbort, { once: true });
      req.once('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('end', () => {
          signal.removeEventListener('abort', onAbort);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
        });
        res.once('error', reject);
      });
      req.once('error', (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      });
      req.end();
    });
  };
}

/** The identity of the proxy's own calls to aggregated API servers. */
const AGGREGATOR_IDENTITY = { [REMOTE_USER]: 'system:kube-aggregator', [REMOTE_GROUP]: 'system:masters' };

/** Discovery of one proxy: the cached `/apis` documents and the core group for `/api`. */
export class DiscoveryService {
  readonly cache: DiscoveryCache;
  readonly #upstreamFetch: DiscoveryFetch;
  readonly #log: { warn(obj: object, msg: string): void } | undefined;
  #core: Record<AggregatedDiscoveryVersion, DiscoveryDocument> | undefined;
  readonly #ready: Promise<void>;

  constructor(upstream: Upstream, aggregator: Aggregator, log?: { warn(obj: object, msg: string): void }) {
    this.#log = log;
    this.#upstreamFetch = fetchOn(upstream, () => upstream.authHeaders());
    this.cache = new DiscoveryCache({
      fetchUpstream: this.#upstreamFetch,
      fetchBackend: (a: APIService) => {
        const backend = aggregator.backend(a.metadata.name)?.pick(true);
        if (!backend) return async () => Promise.reject(new Error(`no ready endpoint for APIService ${a.metadata.name}`));
        return fetchOn(backend, async () => AGGREGATOR_IDENTITY);
      },
      apiServices: aggregator.list(),
      // `apiservices` is read-only here: no watch.
      apiregistration: apiregistrationVersionDiscovery(['get', 'list']),
    });
    this.#ready = Promise.all([this.cache.start(), this.#refreshCore()]).then(() => undefined);
    aggregator.availability.on('change', () => this.cache.invalidate());
    this.cache.on('updated', () => void this.#refreshCore());
  }

  /** Resolves once the first refresh is done (requests before it wait; none after). */
  ready(): Promise<void> {
    return this.#ready;
  }

  /** New registrations: documents change now, a refresh follows. */
  setAPIServices(apiServices: readonly APIService[]): void {
    this.cache.setAPIServices(apiServices);
  }

  /** The `/apis` document for a negotiated format. */
  document(format: DiscoveryFormat): DiscoveryDocument {
    return this.cache.document(format);
  }

  /** The core group's aggregated `/api` document, once it was read. */
  core(version: AggregatedDiscoveryVersion): DiscoveryDocument | undefined {
    return this.#core?.[version];
  }

  #coreRunning: Promise<void> | undefined;

  /** Read the upstream's core group (aggregated if it serves it, else legacy converted); keep the last good one. */
  #refreshCore(): Promise<void> {
    this.#coreRunning ??= (async () => {
      const signal = AbortSignal.timeout(5_000);
      try {
        const answer = await this.#upstreamFetch('/api', { Accept: AGGREGATED_ACCEPT }, signal);
        let group: APIGroupDiscovery | undefined;
        if (answer.status >= 200 && answer.status < 300 && isAggregatedContentType(String(answer.headers['content-type'] ?? ''))) {
          group = (JSON.parse(answer.body.toString('utf8')) as { items?: APIGroupDiscovery[] }).items?.[0];
        } else {
          const legacy = answer.status === 406 ? await this.#upstreamFetch('/api', { Accept: 'application/json' }, signal) : answer;
          if (legacy.status < 200 || legacy.status > 299) throw new Error(`upstream /api: HTTP ${legacy.status}`);
          const versions: APIVersionDiscovery[] = [];
          for (const v of (JSON.parse(legacy.body.toString('utf8')) as { versions?: string[] }).versions ?? []) {
            const list = await this.#upstreamFetch(`/api/${v}`, { Accept: 'application/json' }, signal);
            if (list.status < 200 || list.status > 299) throw new Error(`upstream /api/${v}: HTTP ${list.status}`);
            versions.push(apiResourceListToVersionDiscovery(JSON.parse(list.body.toString('utf8')), '', v));
          }
          group = { metadata: { name: '' }, versions };
        }
        if (!group) return;
        const core = {} as Record<AggregatedDiscoveryVersion, DiscoveryDocument>;
        for (const [v, contentType] of [['v2', AGGREGATED_CONTENT_TYPE_V2], ['v2beta1', AGGREGATED_CONTENT_TYPE_V2BETA1]] as const) {
          const body = Buffer.from(JSON.stringify({ kind: 'APIGroupDiscoveryList', apiVersion: `apidiscovery.k8s.io/${v}`, metadata: {}, items: [group] }));
          core[v] = { body, etag: discoveryETag(body), contentType };
        }
        this.#core = core;
      } catch (e) {
        this.#log?.warn({ err: e }, 'core group discovery failed; keeping the last known');
      } finally {
        this.#coreRunning = undefined;
      }
    })();
    return this.#coreRunning;
  }

  /** Stop refreshing. */
  close(): void {
    this.cache.close();
  }
}
