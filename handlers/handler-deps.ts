/**
 * What every route plugin needs from the server: the proxies, metrics, listener scheme and the
 * settings the streaming decision reads.
 */
import type { IncomingMessage } from 'node:http';
import type { ClientInfo } from '../src/wire/forwarded-headers.js';
import type { UpgradeAwareProxy } from '../proxy/upgrade-aware.js';
import type { FeatureGates } from '../src/feature-gate.js';
import type { SessionRecorder } from '../src/recording/session-recorder.js';
import type { ProxyMetrics } from '../src/metrics.js';
import type { StreamingSessions } from '../src/streaming-sessions.js';
import type { Route } from '../src/routing/route.js';
import type { UpstreamStreaming } from '../src/config.js';
import type { UpstreamStreamingMemory } from '../src/routing/upstream-streaming-memory.js';

/** Plugin options shared by every route family. */
export interface HandlerDeps {
  /** Upgrade passthrough (SPDY, WebSocket v1–v4, anything not translated). */
  upgradeProxy: UpgradeAwareProxy;
  /**
   * The primary upstream: the route of requests the router never saw (components driven directly).
   * Handlers send every request along `routeOf(req, upstream)`.
   */
  upstream: Route;
  metrics: ProxyMetrics;
  /** Every open streaming request: metrics and audit at their end, graceful shutdown. */
  sessions: StreamingSessions;
  /** Feature gates, read by the one decision of a streaming request's path (handlers/stream-path.ts). */
  featureGates: FeatureGates;
  /** `--upstream-streaming`, read by the same decision. */
  upstreamStreaming: UpstreamStreaming;
  /** Which protocol each upstream took after refusing the other, for that decision. */
  streamingMemory: UpstreamStreamingMemory;
  /** Scheme of our listener, for `X-Forwarded-Proto`. */
  proto: 'http' | 'https';
  /** `--max-connection-bytes-per-sec`: per-direction limit of every streaming session; 0 = none. */
  maxConnectionBytesPerSec: number;
  /** `--upgrade-response-timeout` in ms: dial + upstream response head deadline. */
  upgradeResponseTimeoutMs: number;
  /** `--request-timeout` in ms for plain requests that are not long-running; 0 = none. */
  requestTimeoutMs?: number;
  /** Session recording (`--session-recording-config`); absent: nothing is recorded. */
  recorder?: SessionRecorder;
}

/** The client-side facts the forwarded headers need. */
export function clientInfo(req: IncomingMessage, proto: 'http' | 'https'): ClientInfo {
  return { remoteAddress: req.socket.remoteAddress, proto, host: req.headers.host };
}

/**
 * `create` made once per server: the first call for a deps object creates, later ones reuse (the
 * translators and tunnels of a server, created on first use with its settings).
 */
export function perServer<T>(create: (deps: HandlerDeps) => T): (deps: HandlerDeps) => T {
  const made = new WeakMap<HandlerDeps, T>();
  return (deps) => {
    let value = made.get(deps);
    if (value === undefined) {
      value = create(deps);
      made.set(deps, value);
    }
    return value;
  };
}
