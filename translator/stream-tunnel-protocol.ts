/**
 * The request side of the port-forward tunnel, pure and socket-free (apiserver
 * `pkg/util/proxy/streamtunnel.go` and `wsstream.IsWebSocketRequest`): which requests the tunnel takes,
 * which SPDY protocols they offer, and the SPDY/3.1 upgrade request head sent upstream in their place.
 */
import { pairsFromRaw, type ClientInfo, type HeaderPair } from '../src/wire/forwarded-headers.js';
import { upstreamSpdyHeaders } from '../src/upstream/upstream-spdy.js';
import type { AuthHeaders } from '../src/routing/upstream.js';

/** Prefix of a tunneling WebSocket subprotocol (client-go `WebsocketsSPDYTunnelingPrefix`). */
export const TUNNELING_PROTOCOL_PREFIX = 'SPDY/3.1+';
/** Suffix every Kubernetes stream protocol name has (client-go `KubernetesSuffix`). */
export const KUBERNETES_PROTOCOL_SUFFIX = '.k8s.io';
/** What kubectl ≥ 1.30 offers for port-forward over WebSocket. */
export const TUNNELING_PORT_FORWARD_PROTOCOL = `${TUNNELING_PROTOCOL_PREFIX}portforward.k8s.io`;
/** The upgrade token sent upstream. */
export const SPDY_31 = 'SPDY/3.1';

/** The value of the first `name` line of a raw header array, or undefined (Go's `Header.Get`). */
export function firstHeaderLine(rawHeaders: readonly string[], name: string): string | undefined {
  const lower = name.toLowerCase();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === lower) return rawHeaders[i + 1]!;
  return undefined;
}

/**
 * `wsstream.IsWebSocketRequest`: the first `Connection` line names `upgrade` and the first `Upgrade`
 * line is `websocket`, both ignoring case.
 */
export function isWebSocketRequest(rawHeaders: readonly string[]): boolean {
  const connection = (firstHeaderLine(rawHeaders, 'connection') ?? '').toLowerCase();
  const upgrade = (firstHeaderLine(rawHeaders, 'upgrade') ?? '').trim().toLowerCase();
  return upgrade === 'websocket' && connection.split(',').some((t) => t.trim() === 'upgrade');
}

/**
 * The subprotocols on the FIRST `Sec-WebSocket-Protocol` line, split on commas and trimmed (gorilla's
 * `Subprotocols`, which reads only that line, as x/net/websocket does). Empty entries are dropped.
 */
export function offeredWebSocketProtocols(rawHeaders: readonly string[]): string[] {
  const line = firstHeaderLine(rawHeaders, 'sec-websocket-protocol') ?? '';
  return line.split(',').map((p) => p.trim()).filter((p) => p !== '');
}

/** `SPDY/3.1+<name>.k8s.io` (case-sensitive, as Go's `HasPrefix`/`HasSuffix`). */
export function isTunnelingProtocol(protocol: string): boolean {
  return protocol.startsWith(TUNNELING_PROTOCOL_PREFIX) && protocol.endsWith(KUBERNETES_PROTOCOL_SUFFIX);
}

/** `IsWebSocketRequestWithTunnelingProtocol`: a WebSocket upgrade whose first protocol line offers a tunneling protocol. */
export function isTunnelingRequest(rawHeaders: readonly string[]): boolean {
  return isWebSocketRequest(rawHeaders) && offeredWebSocketProtocols(rawHeaders).some(isTunnelingProtocol);
}

/** The SPDY protocols behind the offered tunneling protocols, prefix stripped, in the client's order. */
export function tunneledSpdyProtocols(rawHeaders: readonly string[]): string[] {
  return offeredWebSocketProtocols(rawHeaders)
    .filter(isTunnelingProtocol)
    .map((p) => p.slice(TUNNELING_PROTOCOL_PREFIX.length));
}

/**
 * The WebSocket subprotocol to answer for the upstream's chosen SPDY protocol: the prefix plus it,
 * only if the client offered exactly that (gorilla picks from the client's list); else undefined,
 * and the 101 carries no subprotocol, so client-go gives up on the tunnel.
 */
export function answeredSubprotocol(upstreamVersion: string | undefined, offered: readonly string[]): string | undefined {
  if (upstreamVersion === undefined || upstreamVersion.trim() === '') return undefined;
  const candidate = TUNNELING_PROTOCOL_PREFIX + upstreamVersion.trim();
  return offered.includes(candidate) ? candidate : undefined;
}

/**
 * The header lines of the SPDY/3.1 upgrade sent upstream in place of the client's WebSocket request
 * (`createSPDYRequest`), built exactly as the translator builds its upstream request
 * (`upstreamSpdyHeaders`): the client's lines without hop-by-hop headers, `Sec-WebSocket-*`,
 * `Origin`, `Upgrade` and its own `X-Stream-Protocol-Version`; X-Forwarded-* as on the passthrough;
 * `auth` (empty in passthrough: the caller's own credentials go up) set over them; then
 * `Content-Length: 0`, `Connection: Upgrade`, `Upgrade: SPDY/3.1` and one `X-Stream-Protocol-Version`
 * line per protocol.
 */
export function tunnelRequestHeaders(
  rawHeaders: readonly string[],
  protocols: readonly string[],
  client: ClientInfo,
  auth: AuthHeaders,
  upstreamHost: string,
): HeaderPair[] {
  return upstreamSpdyHeaders(pairsFromRaw(rawHeaders), client, auth, upstreamHost, protocols);
}
