/**
 * The availability controller, after kube-aggregator's `remote_available_controller.go`: each
 * non-local APIService is checked on an interval and whenever the registrations change — its
 * Service and ready endpoints (`ServiceNotFound`, `ServicePortError`, `EndpointsNotFound`,
 * `MissingEndpoints`, `ServiceAccessError`), then a real discovery request `GET /apis/<g>/<v>` to
 * every ready endpoint (5 s each; any 2xx or 3xx passes, else `FailedDiscoveryCheck`) — and its
 * `Available` condition is set (`Passed` when all checks pass, `Local` for local APIServices). The
 * probe presents the proxy's front-proxy certificate as `system:kube-aggregator` in
 * `system:masters`, as kube-aggregator does.
 *
 * Unlike kube-aggregator's fixed 30 s resync, an unavailable APIService is re-checked quickly
 * (`retryMs`, a few seconds), so a restarted backend is back well within 30 s.
 */
import { EventEmitter } from 'node:events';
import type { ProxyApiClient } from '../api-client.js';
import { REMOTE_GROUP, REMOTE_USER } from '../auth/identity-headers.js';
import type { APIService, APIServiceCondition } from './apiservice.js';
import type { APIServiceBackend } from './apiservice-backend.js';
import type { AggregatorMetrics } from './aggregator-metrics.js';

/** Interval between checks of an available APIService (kube-aggregator resyncs every 30 s). */
export const AVAILABLE_RECHECK_MS = 30_000;
/** Interval between checks of an unavailable one. */
export const UNAVAILABLE_RETRY_MS = 3_000;
/** Client timeout of one discovery probe (kube-aggregator: 5 s). */
export const PROBE_TIMEOUT_MS = 5_000;

/** Options of {@link AvailabilityController}. */
export interface AvailabilityOptions {
  /** For Service and EndpointSlice reads; without it only backend-URL APIServices resolve. */
  api?: Pick<ProxyApiClient, 'readService' | 'listEndpointSlices'>;
  metrics: AggregatorMetrics;
  log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  recheckMs?: number;
  retryMs?: number;
  probeTimeoutMs?: number;
}

/** The `Available` condition of a local APIService. */
export function localCondition(now: Date): APIServiceCondition {
  return { type: 'Available', status: 'True', reason: 'Local', message: 'Local APIServices are always available', lastTransitionTime: now.toISOString() };
}

/** The discovery path probed for an APIService (`/api/v1` for the core group). */
export function discoveryPath(a: APIService): string {
  return a.spec.group === '' ? `/api/${a.spec.version}` : `/apis/${a.spec.group}/${a.spec.version}`;
}

/**
 * Probe one endpoint's discovery: resolves with undefined when it passes (2xx/3xx), else the
 * reason text kube-aggregator puts after `failing or missing response from <url>: `.
 */
async function probe(backend: APIServiceBackend, timeoutMs: number): Promise<string | undefined> {
  const endpoints = backend.endpoints ?? [];
  const path = discoveryPath(backend.apiService);
  const failures = await Promise.all(
    endpoints.map(
      (endpoint) =>
        new Promise<string | undefined>((resolve) => {
          const upstream = backend.upstreamAt(endpoint, true);
          const url = `${upstream.url.origin}${path}`;
          const req = upstream.request({
            method: 'GET',
            path,
            headers: { Host: upstream.host, Accept: 'application/json', [REMOTE_USER]: 'system:kube-aggregator', [REMOTE_GROUP]: 'system:masters' },
          });
          const timer = setTimeout(() => req.destroy(new Error(`Get "${url}": context deadline exceeded`)), timeoutMs);
          req.once('response', (res) => {
            res.resume();
            clearTimeout(timer);
            const code = res.statusCode ?? 0;
            resolve(code >= 200 && code < 400 ? undefined : `failing or missing response from ${url}: bad status from ${url}: ${code}`);
          });
          req.once('error', (e) => {
            clearTimeout(timer);
            resolve(`failing or missing response from ${url}: ${e.message}`);
          });
          req.end();
        }),
    ),
  );
  return failures.find((f) => f !== undefined);
}

/** Keeps the `Available` condition of every registered APIService. Emits `change` when one changes. */
export class AvailabilityController extends EventEmitter {
  readonly #o: AvailabilityOptions;
  #backends = new Map<string, APIServiceBackend>();
  readonly #conditions = new Map<string, APIServiceCondition>();
  readonly #timers = new Map<string, NodeJS.Timeout>();
  /** Bumped per name on every (re)registration: a probe of an older backend is discarded. */
  readonly #generation = new Map<string, number>();
  #closed = false;

  constructor(o: AvailabilityOptions) {
    super();
    this.#o = o;
  }

  /** The current condition of `name`, or undefined when it is not registered. */
  condition(name: string): APIServiceCondition | undefined {
    return this.#conditions.get(name);
  }

  /** True when `name` is registered and Available. */
  isAvailable(name: string): boolean {
    return this.#conditions.get(name)?.status === 'True';
  }

  /**
   * The registrations changed: `local` names are always available; `backends` are checked now
   * (new or changed ones start as `Unknown` until their first check). Removed names are forgotten.
   */
  update(local: readonly string[], backends: ReadonlyMap<string, APIServiceBackend>): void {
    const now = new Date();
    const names = new Set([...local, ...backends.keys()]);
    for (const name of [...this.#conditions.keys()]) {
      if (!names.has(name)) {
        this.#conditions.delete(name);
        clearTimeout(this.#timers.get(name));
        this.#timers.delete(name);
        this.#o.metrics.remove(name);
      }
    }
    for (const name of local) {
      if (this.#conditions.get(name)?.reason !== 'Local') this.#set(name, localCondition(now));
    }
    const previous = this.#backends;
    this.#backends = new Map(backends);
    for (const [name, backend] of backends) {
      if (previous.get(name) === backend && this.#conditions.has(name)) continue;
      this.#generation.set(name, (this.#generation.get(name) ?? 0) + 1);
      if (!this.#conditions.has(name) || this.#conditions.get(name)!.reason === 'Local') {
        this.#set(name, { type: 'Available', status: 'Unknown', reason: 'NoCheckYet', message: 'the APIService has not been checked yet', lastTransitionTime: now.toISOString() });
      }
      void this.check(name);
    }
  }

  /** Check `name` now (and schedule the next check). Resolves once its condition is set. */
  async check(name: string): Promise<void> {
    const backend = this.#backends.get(name);
    if (!backend || this.#closed) return;
    clearTimeout(this.#timers.get(name));
    const generation = this.#generation.get(name);
    let next: APIServiceCondition;
    const resolution = await backend.resolve(this.#o.api);
    if (!resolution.ok) {
      next = { type: 'Available', status: resolution.reason === 'ServiceAccessError' ? 'Unknown' : 'False', reason: resolution.reason, message: resolution.message };
    } else {
      const failure = await probe(backend, this.#o.probeTimeoutMs ?? PROBE_TIMEOUT_MS);
      next = failure === undefined
        ? { type: 'Available', status: 'True', reason: 'Passed', message: 'all checks passed' }
        : { type: 'Available', status: 'False', reason: 'FailedDiscoveryCheck', message: failure };
    }
    if (this.#closed || this.#backends.get(name) !== backend || this.#generation.get(name) !== generation) return;
    const current = this.#conditions.get(name);
    const changed = current?.status !== next.status || current?.reason !== next.reason || current?.message !== next.message;
    if (changed) {
      const transition = current?.status !== next.status ? new Date().toISOString() : (current?.lastTransitionTime ?? new Date().toISOString());
      this.#set(name, { ...next, lastTransitionTime: transition });
      if (next.status !== 'True') {
        this.#o.metrics.incUnavailable(name, next.reason!);
        this.#o.log?.warn({ apiservice: name, reason: next.reason, message: next.message }, 'APIService unavailable');
      } else if (current?.status !== 'True') {
        this.#o.log?.info({ apiservice: name }, 'APIService available');
      }
    }
    const delay = next.status === 'True' ? (this.#o.recheckMs ?? AVAILABLE_RECHECK_MS) : (this.#o.retryMs ?? UNAVAILABLE_RETRY_MS);
    const timer = setTimeout(() => void this.check(name), delay);
    timer.unref();
    this.#timers.set(name, timer);
  }

  #set(name: string, condition: APIServiceCondition): void {
    this.#conditions.set(name, condition);
    this.#o.metrics.setUnavailable(name, condition.status !== 'True');
    this.emit('change', name, condition);
  }

  /** Stop checking. */
  close(): void {
    this.#closed = true;
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
  }
}
