/**
 * The aggregation layer (kube-aggregator's role): the registered APIServices, their backends and
 * availability, and the router's resolver for aggregated APIs. `/apis/<group>/<version>/…` of a
 * registered, non-local APIService goes to one ready endpoint of its backend — plain requests,
 * watches and every upgrade alike, since the route is all the proxy paths consume — with the
 * front-proxy identity in impersonate mode (`X-Remote-*` plus the proxy's client certificate) or
 * the caller's own credentials in passthrough. An unavailable APIService is answered with
 * kube-aggregator's 503 `service unavailable`; backend redirects are refused (502).
 */
import type { IncomingMessage } from 'node:http';
import { frontProxyHeaders } from '../auth/identity-headers.js';
import type { AuthnMode } from '../auth/request-auth.js';
import type { UserInfo } from '../auth/user-info.js';
import { apiGroupVersionOf } from '../routing/request-path.js';
import { routeVia } from '../routing/route.js';
import type { RouteDecision, RouteResolver } from '../routing/router.js';
import { errorStatus } from '../status.js';
import { isLocal, type APIService } from './apiservice.js';
import { APIServiceBackend, backendKey, type BackendTransportOptions } from './apiservice-backend.js';
import { AvailabilityController, type AvailabilityOptions } from './availability.js';

/** Options of {@link Aggregator}. */
export interface AggregatorOptions extends AvailabilityOptions {
  authn: AuthnMode;
  transport: BackendTransportOptions;
}

/** The registered APIServices and everything derived from them. */
export class Aggregator implements RouteResolver {
  readonly #o: AggregatorOptions;
  #apiServices = new Map<string, APIService>();
  #backends = new Map<string, APIServiceBackend>();
  /** When each name was first registered: its `creationTimestamp`. */
  readonly #registeredAt = new Map<string, string>();
  readonly availability: AvailabilityController;

  constructor(o: AggregatorOptions) {
    this.#o = o;
    this.availability = new AvailabilityController(o);
  }

  /**
   * Replace the registrations (start-up and every reload). Backends whose transport is unchanged
   * are kept, so their pools and availability carry over; removed ones are retired without
   * cutting requests or sessions in flight.
   */
  setAPIServices(apiServices: readonly APIService[]): void {
    const next = new Map(apiServices.map((a) => [a.metadata.name, a]));
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    for (const name of next.keys()) if (!this.#registeredAt.has(name)) this.#registeredAt.set(name, now);
    for (const name of this.#registeredAt.keys()) if (!next.has(name)) this.#registeredAt.delete(name);
    const backends = new Map<string, APIServiceBackend>();
    for (const a of apiServices) {
      if (isLocal(a)) continue;
      const existing = this.#backends.get(a.metadata.name);
      const keep = existing && existing.key === backendKey(a) && existing.apiService.spec.group === a.spec.group && existing.apiService.spec.version === a.spec.version;
      backends.set(a.metadata.name, keep ? existing : new APIServiceBackend(a, this.#o.transport));
    }
    for (const [name, backend] of this.#backends) if (backends.get(name) !== backend) backend.close();
    this.#apiServices = next;
    this.#backends = backends;
    this.availability.update(apiServices.filter(isLocal).map((a) => a.metadata.name), backends);
  }

  /** The registrations, each with its live `status.conditions`. */
  list(): APIService[] {
    return [...this.#apiServices.values()].map((a) => this.#withStatus(a));
  }

  /** One registration with its live status, or undefined. */
  get(name: string): APIService | undefined {
    const a = this.#apiServices.get(name);
    return a ? this.#withStatus(a) : undefined;
  }

  #withStatus(a: APIService): APIService {
    const condition = this.availability.condition(a.metadata.name);
    const creationTimestamp = this.#registeredAt.get(a.metadata.name);
    return { ...a, metadata: { ...a.metadata, ...(creationTimestamp ? { creationTimestamp } : {}) }, status: { conditions: condition ? [condition] : [] } };
  }

  /** The backend of a non-local APIService (discovery reads through it). */
  backend(name: string): APIServiceBackend | undefined {
    return this.#backends.get(name);
  }

  /** The router's resolver: aggregated group-versions go to their backend. */
  resolve(req: IncomingMessage, caller: UserInfo | undefined): RouteDecision | undefined {
    const gv = apiGroupVersionOf(req.url ?? '/');
    if (!gv) return undefined;
    const name = `${gv.version}.${gv.group}`;
    const apiService = this.#apiServices.get(name);
    if (!apiService || isLocal(apiService)) return undefined;
    // kube-aggregator's proxy handler: anything but Available=True is 503, naming no Service.
    if (!this.availability.isAvailable(name)) return { refuse: errorStatus(503, 'service unavailable', 'ServiceUnavailable') };
    const upstream = this.#backends.get(name)?.pick();
    if (!upstream) {
      const svc = apiService.spec.service;
      return { refuse: errorStatus(503, `no endpoints available for service "${svc?.name ?? name}"`, 'ServiceUnavailable') };
    }
    const identity = this.#o.authn === 'impersonate' && caller ? frontProxyHeaders(caller) : undefined;
    return {
      route: routeVia(upstream, {
        name: `apiservice/${name}`,
        authHeaders: async () => identity ?? {},
        rejectRedirects: true,
        observe: (code) => this.#o.metrics.incRequest(name, code),
      }),
    };
  }

  /** Stop the controller and drop the pools. */
  close(): void {
    this.availability.close();
    for (const b of this.#backends.values()) b.close();
  }
}
