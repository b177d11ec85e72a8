/**
 * The proxy's Prometheus metrics, in one place (after apiserver `pkg/util/proxy/metrics/metrics.go`):
 * names and help text, low-cardinality labels only (no user, IP or path), one function per counter.
 * Each server gets its own Registry so tests start from zero.
 */
import { Counter, Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';
import { currentHeapFloor } from './heap-floor.js';
import type { TunnelByteTotals } from './tunnel/tunnel-bytes.js';

/** Prefix of every metric this project defines. */
export const METRICS_NAMESPACE = 'kube_stream_proxy';

/** Route families used as the `handler` label. */
export type HandlerLabel = 'exec' | 'attach' | 'portforward' | 'proxy' | 'health' | 'metrics' | 'unknown';

/** The streaming pod subresources (`subresource` label). */
export type SubresourceLabel = 'exec' | 'attach' | 'portforward';

/** The protocol the client spoke (`protocol` label). */
export type ClientProtocolLabel = 'spdy' | 'websocket' | 'tunnel';

/**
 * The path a streaming request took (`path` label): bytes relayed unchanged, WebSocket v5 translated
 * to SPDY, the port-forward WebSocket tunnel unwrapped to SPDY, or (toward an upstream that refused
 * SPDY) SPDY exec/attach translated to v5 and SPDY port-forward wrapped into the tunnel.
 */
export type SessionPathLabel = 'passthrough' | 'translated' | 'tunnel' | 'reverse_translated' | 'reverse_tunnel';

/**
 * `apiserver_websocket_streaming_requests_total{proxy_type}`: kube-apiserver's values (KEP-4006) where
 * the proxy stands in its place — `proxied_to_kubelet` (passed through to a kubelet),
 * `translated_at_apiserver` (v5 translated here), `tunneled_at_apiserver` (the tunnel unwrapped here) —
 * and the proxy's own `proxied_to_upstream`: passed through to an upstream apiserver, an agent's
 * cluster or an APIService backend, which translates or passes it on itself.
 */
export type WebSocketProxyType = 'translated_at_apiserver' | 'tunneled_at_apiserver' | 'proxied_to_kubelet' | 'proxied_to_upstream';

/** The streaming protocol of one upstream attempt (`from`/`to` labels of the fallback counter). */
export type StreamingProtocolLabel = 'websocket' | 'spdy';

/**
 * How a streaming request ended (`outcome` label), one closed set:
 * - `success`: the session ran and ended normally (exit 0 when known; passthrough: both sides closed);
 * - `nonzero_exit`: translated session whose command exited non-zero (still a success for
 *   `apiserver_stream_translator_requests_total`, as in kube-apiserver);
 * - `upstream_refused`: the upstream answered the upgrade with an error (relayed, or its Status on channel 3);
 * - `handshake_failed`: the client's WebSocket handshake was refused by us;
 * - `upstream_unreachable`: dialling the upstream failed or timed out;
 * - `client_gone`: the client left before the answer;
 * - `shutdown`: ended by the proxy's graceful shutdown after the grace period;
 * - `error`: anything else (bad 101, protocol error, lost upstream…).
 */
export type SessionOutcome =
  | 'success'
  | 'nonzero_exit'
  | 'upstream_refused'
  | 'handshake_failed'
  | 'upstream_unreachable'
  | 'client_gone'
  | 'shutdown'
  /** An enforced session recording could not be started: refused with 503 before the upgrade. */
  | 'recording_unavailable'
  | 'error';

/** Why a WebSocket streaming request failed (`reason` label of the failures counter). */
export type WebSocketFailureReason = Exclude<SessionOutcome, 'success' | 'nonzero_exit'> | 'idle_timeout' | 'protocol_error';

/** Who dialled the upstream (`caller` label of the dial-error counter). */
export type DialCaller = SessionPathLabel | 'reverse_proxy' | 'readiness';

/** Why a dial failed (`reason` label of the dial-error counter). */
export type DialErrorReason = 'unreachable' | 'timeout';

/** Why the agent listener refused a connect request. */
export type TunnelRefusalReason = 'unauthorized' | 'forbidden' | 'bad_request' | 'shutting_down';

/** Why the proxy dropped an agent tunnel it had accepted (`incTunnelDropped`). */
export type TunnelDropReason = 'no_settings' | 'ping_timeout';

/**
 * The agent tunnel's metrics (src/tunnel/). Labels are the cluster name only (names come from the
 * agent token file, so they are bounded by configuration, not by clients).
 */
export interface TunnelMetrics {
  /** `kube_stream_proxy_tunnel_agents{cluster}`: agents connected now. */
  setTunnelAgents(cluster: string, count: number): void;
  /** `kube_stream_proxy_tunnel_agent_connections_total{cluster}`: tunnels accepted (every one after the first is a reconnect). */
  incTunnelAgentConnection(cluster: string): void;
  /** `kube_stream_proxy_tunnel_agent_refusals_total{reason}`: connect requests refused. */
  incTunnelAgentRefusal(reason: TunnelRefusalReason): void;
  /** `kube_stream_proxy_tunnel_streams_opened_total{cluster}`: tunnel streams the agent accepted. */
  incTunnelStream(cluster: string): void;
  /** `kube_stream_proxy_tunnel_streams_active{cluster}`: tunnel streams open now. */
  addTunnelActiveStreams(cluster: string, delta: 1 | -1): void;
  /**
   * `kube_stream_proxy_tunnel_stream_retries_total{cluster}`: tunnel streams that failed before the
   * agent answered (nothing relayed yet) and were opened again on another tunnel of the cluster.
   */
  incTunnelStreamRetry(cluster: string): void;
  /**
   * `kube_stream_proxy_tunnel_agents_dropped_total{reason}`: tunnels dropped before they
   * were ever routable or after they stopped answering: `no_settings` (the agent got its 101 and
   * never sent its HTTP/2 SETTINGS), `ping_timeout`.
   */
  incTunnelDropped(reason: TunnelDropReason): void;
  /**
   * `kube_stream_proxy_tunnel_bytes_total{cluster,direction}`: the running byte totals of `cluster`'s
   * tunnel streams (one object per cluster, added to by `countTunnelBytes`), read into the counter at
   * every scrape.
   */
  tunnelByteTotals(cluster: string): TunnelByteTotals;
}

/** Counter, gauge and histogram operations the proxy uses. */
export interface ProxyMetrics extends TunnelMetrics {
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
  /**
   * `apiserver_websocket_streaming_requests_total{subresource,proxy_type}` (KEP-4006): one per
   * WebSocket streaming request, counted when its path is chosen.
   */
  incWebSocketStreamingRequest(subresource: SubresourceLabel, proxyType: WebSocketProxyType): void;
  /**
   * `kube_stream_proxy_upstream_streaming_fallbacks_total{from,to,code}`: the upstream refused an
   * upgrade in the client's protocol (`from`) with `code` before any 101, and it was asked again in
   * the other protocol (`to`), translated here.
   */
  incStreamingFallback(from: StreamingProtocolLabel, to: StreamingProtocolLabel, code: number): void;
  /** One streaming request ended (counted once, at its end, whatever happened). */
  incStreamingRequest(subresource: SubresourceLabel, protocol: ClientProtocolLabel, path: SessionPathLabel, outcome: SessionOutcome): void;
  /** A WebSocket streaming request (translated, tunnel or passthrough) failed. */
  incWebSocketFailure(reason: WebSocketFailureReason): void;
  /** A streaming session started (`+1`) or ended (`-1`). */
  addActiveSessions(subresource: SubresourceLabel, path: SessionPathLabel, delta: 1 | -1): void;
  /** How long an established session lasted, in seconds. */
  observeSessionDuration(subresource: SubresourceLabel, path: SessionPathLabel, seconds: number): void;
  /** Time from the request reaching its route to the client's handshake answer (101 or refusal), in seconds. */
  observeHandshakeDuration(subresource: SubresourceLabel, path: SessionPathLabel, seconds: number): void;
  /** Dialling the upstream failed. */
  incUpstreamDialError(caller: DialCaller, reason: DialErrorReason): void;
}

/** prom-client default metrics removed from the exposition (see createMetrics). */
export const PROMTOOL_UNFRIENDLY_DEFAULT_METRICS: readonly string[] = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/** Session durations: from a one-shot `exec` (well under a second) to the 4 h idle limit. */
export const SESSION_DURATION_BUCKETS = [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400];

/** Handshake latencies: loopback (a few ms) up to the 30 s upgrade response timeout. */
export const HANDSHAKE_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Register the metrics on `registry` (plus Node's process metrics) and return their operations. */
export function createMetrics(registry: Registry, options: { processMetrics?: boolean } = {}): ProxyMetrics {
  if (options.processMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    // Gauges named `_total` fail `promtool check metrics` (a `_total` suffix is for counters). Each is
    // the sum of the per-type gauge of the same name without `_total`, which stays.
    for (const name of PROMTOOL_UNFRIENDLY_DEFAULT_METRICS) registry.removeSingleMetric(name);
  }
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
  const websocketStreaming = new Counter({
    name: 'apiserver_websocket_streaming_requests_total',
    help: 'Total number of WebSocket streaming requests (exec, attach, portforward) routed by the proxy, labeled by subresource and proxy_type: proxied_to_kubelet when passed through to a kubelet, proxied_to_upstream when passed through to an upstream API server, agent cluster or APIService backend, translated_at_apiserver (exec, attach) or tunneled_at_apiserver (portforward) when translated by the proxy.',
    labelNames: ['subresource', 'proxy_type'] as const,
    registers: [registry],
  });
  const streamingFallbacks = new Counter({
    name: `${METRICS_NAMESPACE}_upstream_streaming_fallbacks_total`,
    help: 'Streaming upgrades the upstream refused before its 101 in the client\'s protocol (from) and that were asked again in the other protocol (to), translated by the proxy, by the refusal\'s status code.',
    labelNames: ['from', 'to', 'code'] as const,
    registers: [registry],
  });
  const streamingRequests = new Counter({
    name: `${METRICS_NAMESPACE}_streaming_requests_total`,
    help: 'Streaming requests (pods/exec, attach, portforward) ended, by subresource, client protocol, path taken and outcome.',
    labelNames: ['subresource', 'protocol', 'path', 'outcome'] as const,
    registers: [registry],
  });
  const websocketFailures = new Counter({
    name: `${METRICS_NAMESPACE}_websocket_failures_total`,
    help: 'WebSocket streaming requests that failed, by reason.',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const activeSessions = new Gauge({
    name: `${METRICS_NAMESPACE}_active_sessions`,
    help: 'Streaming sessions currently established, by subresource and path taken.',
    labelNames: ['subresource', 'path'] as const,
    registers: [registry],
  });
  const sessionDuration = new Histogram({
    name: `${METRICS_NAMESPACE}_session_duration_seconds`,
    help: 'Duration of established streaming sessions, by subresource and path taken.',
    labelNames: ['subresource', 'path'] as const,
    buckets: SESSION_DURATION_BUCKETS,
    registers: [registry],
  });
  const handshakeDuration = new Histogram({
    name: `${METRICS_NAMESPACE}_handshake_duration_seconds`,
    help: 'Time from a streaming request reaching its route to the handshake answer sent to the client (101 or refusal).',
    labelNames: ['subresource', 'path'] as const,
    buckets: HANDSHAKE_DURATION_BUCKETS,
    registers: [registry],
  });
  const dialErrors = new Counter({
    name: `${METRICS_NAMESPACE}_upstream_dial_errors_total`,
    help: 'Failed upstream dials, by caller and reason (unreachable or timeout).',
    labelNames: ['caller', 'reason'] as const,
    registers: [registry],
  });
  const tunnelAgents = new Gauge({
    name: `${METRICS_NAMESPACE}_tunnel_agents`,
    help: 'Agents connected to this proxy replica, by cluster.',
    labelNames: ['cluster'] as const,
    registers: [registry],
  });
  const tunnelConnections = new Counter({
    name: `${METRICS_NAMESPACE}_tunnel_agent_connections_total`,
    help: 'Agent tunnels accepted, by cluster (each one after the first is a reconnect).',
    labelNames: ['cluster'] as const,
    registers: [registry],
  });
  const tunnelRefusals = new Counter({
    name: `${METRICS_NAMESPACE}_tunnel_agent_refusals_total`,
    help: 'Agent connect requests refused, by reason.',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const tunnelStreams = new Counter({
    name: `${METRICS_NAMESPACE}_tunnel_streams_opened_total`,
    help: 'Tunnel streams opened to an agent (one per proxied connection), by cluster.',
    labelNames: ['cluster'] as const,
    registers: [registry],
  });
  const tunnelActive = new Gauge({
    name: `${METRICS_NAMESPACE}_tunnel_streams_active`,
    help: 'Tunnel streams open now, by cluster.',
    labelNames: ['cluster'] as const,
    registers: [registry],
  });
  // The process's heap floor (src/heap-floor.ts), fixed when it started: set once, here, at serve start.
  new Gauge({
    name: `${METRICS_NAMESPACE}_heap_floor_bytes`,
    help: 'The V8 old-generation floor this process started with (--initial-old-space-size; docs/operations.md), in bytes; 0 when off.',
    registers: [registry],
  }).set(currentHeapFloor().floorMb * 1024 * 1024);
  const tunnelRetries = new Counter({
    name: `${METRICS_NAMESPACE}_tunnel_stream_retries_total`,
    help: 'Tunnel streams that failed before the agent answered and were opened again on another tunnel of the cluster, by cluster.',
    labelNames: ['cluster'] as const,
    registers: [registry],
  });
  const tunnelDropped = new Counter({
    name: `${METRICS_NAMESPACE}_tunnel_agents_dropped_total`,
    help: 'Agent tunnels the proxy dropped: no_settings (no HTTP/2 SETTINGS after the 101), ping_timeout.',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  // Tunnel bytes are plain numbers the relay adds to (src/tunnel/tunnel-bytes.ts); what they gained
  // since the last scrape goes into the counter when it is collected.
  const byteTotals = new Map<string, { totals: TunnelByteTotals; reported: TunnelByteTotals }>();
  new Counter({
    name: `${METRICS_NAMESPACE}_tunnel_bytes_total`,
    help: 'Bytes relayed through agent tunnel streams, by cluster and direction (to_cluster, from_cluster), counted on the proxy side.',
    labelNames: ['cluster', 'direction'] as const,
    registers: [registry],
    collect() {
      for (const [cluster, { totals, reported }] of byteTotals) {
        this.inc({ cluster, direction: 'to_cluster' }, totals.toCluster - reported.toCluster);
        this.inc({ cluster, direction: 'from_cluster' }, totals.fromCluster - reported.fromCluster);
        reported.toCluster = totals.toCluster;
        reported.fromCluster = totals.fromCluster;
      }
    },
  });
  const tunnelByteTotals = (cluster: string): TunnelByteTotals => {
    let entry = byteTotals.get(cluster);
    if (!entry) {
      entry = { totals: { toCluster: 0, fromCluster: 0 }, reported: { toCluster: 0, fromCluster: 0 } };
      byteTotals.set(cluster, entry);
    }
    return entry.totals;
  };
  return {
    tunnelByteTotals,
    setTunnelAgents: (cluster, count) => tunnelAgents.set({ cluster }, count),
    incTunnelAgentConnection: (cluster) => tunnelConnections.inc({ cluster }),
    incTunnelAgentRefusal: (reason) => tunnelRefusals.inc({ reason }),
    incTunnelStream: (cluster) => tunnelStreams.inc({ cluster }),
    addTunnelActiveStreams: (cluster, delta) => tunnelActive.inc({ cluster }, delta),
    incTunnelStreamRetry: (cluster) => tunnelRetries.inc({ cluster }),
    incTunnelDropped: (reason) => tunnelDropped.inc({ reason }),
    incWebSocketStreamingRequest: (subresource, proxyType) => websocketStreaming.inc({ subresource, proxy_type: proxyType }),
    incStreamingFallback: (from, to, code) => streamingFallbacks.inc({ from, to, code: String(code) }),
    incStreamingRequest: (subresource, protocol, path, outcome) => streamingRequests.inc({ subresource, protocol, path, outcome }),
    incWebSocketFailure: (reason) => websocketFailures.inc({ reason }),
    addActiveSessions: (subresource, path, delta) => activeSessions.inc({ subresource, path }, delta),
    observeSessionDuration: (subresource, path, seconds) => sessionDuration.observe({ subresource, path }, seconds),
    observeHandshakeDuration: (subresource, path, seconds) => handshakeDuration.observe({ subresource, path }, seconds),
    incUpstreamDialError: (caller, reason) => dialErrors.inc({ caller, reason }),
    incStreamTranslatorRequest: (code) => translatorRequests.inc({ code: String(code) }),
    incStreamTunnelRequest: (code) => tunnelRequests.inc({ code: String(code) }),
    incHttpRequest: (handler, code) => httpRequests.inc({ handler, code: String(code) }),
    incUpgradeRequest: (handler, code) => upgradeRequests.inc({ handler, code: String(code) }),
    addUpgradedConnections: (handler, delta) => upgraded.inc({ handler }, delta),
    addUpgradedBytes: (direction, bytes) => upgradedBytes.inc({ direction }, bytes),
  };
}
