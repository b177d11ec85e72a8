/**
 * The proxy's Prometheus metrics, in one place (after apiserver `pkg/util/proxy/metrics/metrics.go`):
 * names and help text, low-cardinality labels only (no user, IP or path), one function per counter.
 * Each server gets its own Registry so tests start from zero.
 */
import { Counter, Gauge, collectDefaultMetrics, type Registry } from 'prom-client';

/** Prefix of every metric this project defines. */
export const METRICS_NAMESPACE = 'kube_stream_proxy';

/** Route families used as the `handler` label. */
export type HandlerLabel = 'exec' | 'attach' | 'portforward' | 'proxy' | 'health' | 'metrics' | 'unknown';

/** Counter and gauge operations the proxy uses. */
export interface ProxyMetrics {
  /** A plain (non-upgrade) request finished with `code`. */
  incHttpRequest(handler: HandlerLabel, code: number): void;
  /**
   * An upgrade request got its answer: `101` upgraded, the upstream's code when relayed, our Status
   * code otherwise, `499` when the client left first.
   */
  incUpgradeRequest(handler: HandlerLabel, code: number): void;
  /** An upgraded connection started (`+1`) or ended (`-1`). */
  addUpgradedConnections(handler: HandlerLabel, delta: 1 | -1): void;
  /** Bytes copied on upgraded connections, per direction. */
  addUpgradedBytes(direction: 'to_upstream' | 'to_client', bytes: number): void;
  /**
   * `apiserver_stream_translator_requests_total{code}` (kube-apiserver semantics): `200` success,
   * including a non-zero exit; the upstream's Status code; `400` client WebSocket setup failed; `500`.
   */
  incStreamTranslatorRequest(code: number): void;
  /**
   * `apiserver_stream_tunnel_requests_total{code}` (kube-apiserver semantics): `101` success, `400` no
   * tunneling protocol offered, `500` bad upstream 101 or failed WebSocket upgrade, else upstream's code.
   */
  incStreamTunnelRequest(code: number): void;
}

/** Register the metrics on `registry` (plus Node's process metrics) and return their operations. */
export function createMetrics(registry: Registry, options: { processMetrics?: boolean } = {}): ProxyMetrics {
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const httpRequests = new Counter({
    name: `${METRICS_NAMESPACE}_http_requests_total`,
    help: 'Plain (non-upgrade) requests answered, by route family and HTTP status code.',
    labelNames: ['handler', 'code'] as const,
    registers: [registry],
  });
  const upgradeRequests = new Counter({
    name: `${METRICS_NAMESPACE}_upgrade_requests_total`,
    help: 'Upgrade requests answered, by route family and status code (101 = upgraded, 499 = client left).',
    labelNames: ['handler', 'code'] as const,
    registers: [registry],
  });
  const upgraded = new Gauge({
    name: `${METRICS_NAMESPACE}_upgraded_connections`,
    help: 'Upgraded connections currently being relayed.',
    labelNames: ['handler'] as const,
    registers: [registry],
  });
  const upgradedBytes = new Counter({
    name: `${METRICS_NAMESPACE}_upgraded_bytes_total`,
    help: 'Bytes relayed on upgraded connections, by direction.',
    labelNames: ['direction'] as const,
    registers: [registry],
  });
  // kube-apiserver's names (subsystem `apiserver`, `pkg/util/proxy/metrics/metrics.go`), so existing
  // dashboards and alerts work unchanged.
  const translatorRequests = new Counter({
    name: 'apiserver_stream_translator_requests_total',
    help: 'Total number of requests that were handled by the StreamTranslatorProxy, which processes streaming RemoteCommand/V5',
    labelNames: ['code'] as const,
    registers: [registry],
  });
  const tunnelRequests = new Counter({
    name: 'apiserver_stream_tunnel_requests_total',
    help: 'Total number of requests that were handled by the StreamTunnelProxy, which processes streaming PortForward/V2',
    labelNames: ['code'] as const,
    registers: [registry],
  });
  return {
    incStreamTranslatorRequest: (code) => translatorRequests.inc({ code: String(code) }),
    incStreamTunnelRequest: (code) => tunnelRequests.inc({ code: String(code) }),
    incHttpRequest: (handler, code) => httpRequests.inc({ handler, code: String(code) }),
    incUpgradeRequest: (handler, code) => upgradeRequests.inc({ handler, code: String(code) }),
    addUpgradedConnections: (handler, delta) => upgraded.inc({ handler }, delta),
    addUpgradedBytes: (direction, bytes) => upgradedBytes.inc({ direction }, bytes),
  };
}
