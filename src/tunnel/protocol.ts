/**
 * The agent tunnel's wire contract, shared by the proxy (`agent-listener.ts`) and the agent
 * (`agent.ts`); see docs/agent.md "Protocol".
 *
 * 1. The agent dials the proxy's agent listener (TLS; plain TCP only on loopback) and sends one
 *    HTTP/1.1 request: `GET /agent/connect` with `Connection: Upgrade`,
 *    `Upgrade: kube-stream-proxy-tunnel`, `Authorization: Bearer <agent token>` (or a TLS client
 *    certificate with CN = the cluster instead), `Kube-Stream-Proxy-Cluster: <name>` and
 *    `Kube-Stream-Proxy-Access-As: passthrough|impersonate`. The
 *    `wss://` carrier sends the same request as a WebSocket handshake (`Upgrade: websocket`,
 *    subprotocol `kube-stream-proxy-tunnel`; `websocket-carrier.ts`).
 * 2. The proxy answers `101 Switching Protocols` (credential valid for that cluster) or a
 *    Kubernetes Status (401/403/400, 503 while it shuts down) and closes.
 * 3. After the 101 the same connection (or the WebSocket's binary messages) carries HTTP/2 with
 *    the roles reversed: the agent, which dialed, is the HTTP/2 server
 *    (`http2.performServerHandshake`); the proxy is the client.
 * 4. Per proxied connection the proxy opens one stream `:method CONNECT`; the agent dials its own
 *    apiserver (never an address the proxy names) and answers `:status 200`, or `502` with a reason
 *    when that dial fails. The stream then carries ONE HTTP/1.1 request and its answer (after a
 *    101, the upgraded bytes) both ways; END_STREAM is a half-close, RST_STREAM a reset.
 */

/** The request-target of the agent's connect request. */
export const AGENT_CONNECT_PATH = '/agent/connect';

/** The `Upgrade` token of the connect request. */
export const TUNNEL_UPGRADE_PROTOCOL = 'kube-stream-proxy-tunnel';

/** The header naming the cluster the agent serves (it must match the token's cluster). */
export const CLUSTER_HEADER = 'Kube-Stream-Proxy-Cluster';

/**
 * The `:authority` of every tunnel stream. The agent ignores it and always dials its own upstream,
 * so a proxy (or anyone holding the tunnel) cannot make an agent connect anywhere else.
 */
export const TUNNEL_AUTHORITY = 'apiserver:443';

/**
 * HTTP/2 PING period on the tunnel, both ends: under the 60 s idle timeout of common L4/L7 load
 * balancers (AWS NLB 350 s, ALB 60 s, GCP 600 s) with room for one lost ping.
 */
export const TUNNEL_PING_INTERVAL_MS = 10_000;

/** A PING not acknowledged within this long means the tunnel is dead: it is destroyed. */
export const TUNNEL_PING_TIMEOUT_MS = 10_000;

/**
 * After the 101, the agent (the HTTP/2 server) must send its SETTINGS within this long, or the
 * connection is dropped; until they arrive the tunnel is not routable.
 */
export const TUNNEL_SETTINGS_TIMEOUT_MS = 10_000;

/** Longest cluster name: a DNS-1123 subdomain. */
export const MAX_CLUSTER_NAME_LENGTH = 253;

/**
 * True for a valid cluster name: a DNS-1123 subdomain (lower-case alphanumerics, `-` and `.`,
 * starting and ending alphanumeric), as Kubernetes object names are. No escaping is ever needed
 * in a path, header or metric label.
 */
export function isValidClusterName(name: string): boolean {
  return name.length > 0 && name.length <= MAX_CLUSTER_NAME_LENGTH && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name);
}

/**
 * The header stating the agent's `--access-as` (`passthrough` or `impersonate`; absent means
 * passthrough). The proxy refuses a tunnel whose mode does not match its `--authn` (400): an
 * impersonating agent behind a passthrough proxy would lend its service account to every caller,
 * and a passthrough agent behind an impersonating proxy would send requests without credentials.
 */
export const ACCESS_AS_HEADER = 'Kube-Stream-Proxy-Access-As';

/** The header carrying the `Host` the agent's apiserver expects (the proxy sends it on every request). */
export const UPSTREAM_HOST_HEADER = 'Kube-Stream-Proxy-Upstream-Host';

/**
 * HTTP/2 settings of both ends. A 1 MiB stream window (the default 64 KiB caps a stream at 64 KiB
 * per round trip) bounds what one stream buffers at the receiver; `maxSessionMemory` (MB) leaves
 * room for many busy streams before nghttp2 refuses new ones.
 */
export const TUNNEL_HTTP2_OPTIONS = {
  settings: { initialWindowSize: 1024 * 1024, maxConcurrentStreams: 10_000 },
  maxSessionMemory: 256,
} as const;

/** The session-level receive window each end sets after the handshake. */
export const TUNNEL_SESSION_WINDOW_BYTES = 32 * 1024 * 1024;
