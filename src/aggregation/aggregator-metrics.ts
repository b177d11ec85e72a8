/**
 * The aggregation layer's metrics: kube-aggregator's two availability series under their own names
 * (so existing alerts such as `aggregator_unavailable_apiservice > 0` work), and requests per
 * APIService in the project's namespace.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { METRICS_NAMESPACE } from '../metrics.js';

/** What the aggregator records. */
export interface AggregatorMetrics {
  /** `aggregator_unavailable_apiservice{name}`: 1 while the APIService is unavailable, 0 when available. */
  setUnavailable(name: string, unavailable: boolean): void;
  /** `aggregator_unavailable_apiservice_total{name,reason}`: each time an APIService becomes unavailable. */
  incUnavailable(name: string, reason: string): void;
  /** Forget an APIService that is no longer registered (its gauge series goes away). */
  remove(name: string): void;
  /** `kube_stream_proxy_apiservice_requests_total{apiservice,code}`: requests routed to an aggregated API. */
  incRequest(apiservice: string, code: number): void;
}

/** Register the aggregator's metrics on `registry`. */
export function createAggregatorMetrics(registry: Registry): AggregatorMetrics {
  const unavailable = new Gauge({
    name: 'aggregator_unavailable_apiservice',
    help: 'Gauge of APIServices which are marked as unavailable broken down by APIService name.',
    labelNames: ['name'] as const,
    registers: [registry],
  });
  const unavailableTotal = new Counter({
    name: 'aggregator_unavailable_apiservice_total',
    help: 'Counter of APIServices which are marked as unavailable broken down by APIService name and reason.',
    labelNames: ['name', 'reason'] as const,
    registers: [registry],
  });
  const requests = new Counter({
    name: `${METRICS_NAMESPACE}_apiservice_requests_total`,
    help: 'Requests routed to an aggregated API server, by APIService and status code (101 = upgraded).',
    labelNames: ['apiservice', 'code'] as const,
    registers: [registry],
  });
  return {
    setUnavailable: (name, down) => unavailable.set({ name }, down ? 1 : 0),
    incUnavailable: (name, reason) => unavailableTotal.inc({ name, reason }),
    remove: (name) => unavailable.remove({ name }),
    incRequest: (apiservice, code) => requests.inc({ apiservice, code: String(code) }),
  };
}
