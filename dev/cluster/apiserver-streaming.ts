/**
 * Which way the dev cluster's kube-apiserver look-alike sends a pod streaming upgrade, decided per
 * request before any byte flows, as kube-apiserver's `ExecREST/AttachREST/PortForwardREST.Connect()`
 * decides it (`pkg/registry/core/pod/rest/subresources.go`; the facts in the shared
 * KUBELET-WEBSOCKETS notes, §2):
 *
 * | apiserver | node declares `ExtendWebSocketsToKubelet` | WebSocket v5 exec/attach            | tunnel `SPDY/3.1+portforward.k8s.io` | SPDY, WebSocket v1–v4 |
 * |-----------|-------------------------------------------|-------------------------------------|--------------------------------------|-----------------------|
 * | ≥ 1.36    | yes                                       | to the kubelet (`proxied_to_kubelet`)| to the kubelet (`proxied_to_kubelet`) | to the kubelet        |
 * | ≥ 1.36    | no                                        | translated here (`translated_at_apiserver`) | tunnelled here (`tunneled_at_apiserver`) | to the kubelet |
 * | 1.31–1.35 | —                                         | translated here                     | tunnelled here                       | to the kubelet        |
 * | 1.30      | —                                         | translated here                     | to the kubelet                       | to the kubelet        |
 * | ≤ 1.29    | —                                         | to the kubelet                      | to the kubelet                       | to the kubelet        |
 *
 * ("to the kubelet" is the byte passthrough: an older kubelet then refuses v5 or the tunnel itself.)
 * The label is counted only by an apiserver ≥ 1.36, where the metric exists. Before that table, two
 * refusals that make the dev cluster stand in for upstreams found in the field:
 * - `refuseWebSocketStreaming` (OpenShift ≥ 1.30 with WebSocket exec off): v5 and the tunnel get 403
 *   with an empty body before any 101 — what OpenShift's kube-apiserver relays from its kubelet, whose
 *   x/net/websocket handshake refuses a protocol it does not serve that way; SPDY and the legacy
 *   WebSocket protocols (consoles, client libraries) still work;
 * - `refuseSpdyStreaming` (a WebSocket-only gateway such as GKE's Connect Gateway or an Envoy Gateway
 *   route, which answers an upgrade it cannot carry with 403 and a line of text): every SPDY/3.1
 *   upgrade gets 403 and `text/plain`; every WebSocket goes on as the table says.
 * Neither is a Kubernetes `Status`: a `Forbidden` Status is the authorizer's verdict on the user
 * (dev/cluster/access-control.ts), which the proxy tells apart from a refusal of the protocol.
 */
import type { IncomingMessage } from 'node:http';
import { isWebSocketRequestWithStreamCloseProtocol } from '../../translator/stream-close-predicate.js';
import { isTunnelingRequest, TUNNELING_PORT_FORWARD_PROTOCOL } from '../../translator/stream-tunnel-protocol.js';
import { StreamProtocolV5Name } from '../../src/stream-protocol.js';
import { apiserverExtendsWebSocketsToKubelet, apiserverTranslates, EXTEND_WEBSOCKETS_TO_KUBELET } from './cluster-versions.js';
import type { UpgradeKind } from './kubelet-streams.js';
import type { StreamSubresource, WebSocketProxyType } from './streaming-metrics.js';

/** What a streaming upgrade carries, as the apiserver tells them apart. */
export type StreamWire = 'spdy' | 'v5' | 'tunnel' | 'websocket';

/** The apiserver's settings that decide the way. */
export interface ApiserverStreamingPolicy {
  /** The apiserver's minor version (1.N). */
  apiserverMinor: number;
  /** Answer v5 and tunnel WebSockets 403 (OpenShift-like). */
  refuseWebSocketStreaming?: boolean;
  /** Answer SPDY/3.1 upgrades 403 (a WebSocket-only gateway). */
  refuseSpdyStreaming?: boolean;
}

/** The way a request goes. */
export type StreamWay =
  | { way: 'refuse'; refusal: StreamRefusal }
  /** Byte passthrough to the kubelet (which serves or refuses it). */
  | { way: 'kubelet'; proxyType?: WebSocketProxyType }
  /** The apiserver's StreamTranslator (v5 → SPDY). */
  | { way: 'translate'; proxyType?: WebSocketProxyType }
  /** The apiserver's StreamTunnel (tunnel → SPDY). */
  | { way: 'tunnel'; proxyType?: WebSocketProxyType };

/** A refusal of a protocol, written as the upstreams in the field write it (not a Kubernetes Status). */
export interface StreamRefusal {
  statusCode: 403;
  /** Absent: an empty body. */
  contentType?: 'text/plain; charset=utf-8';
  body: string;
}

/** `refuseWebSocketStreaming`: 403, empty body (the kubelet's x/net/websocket handshake, relayed). */
export const WEBSOCKET_STREAMING_REFUSAL: StreamRefusal = { statusCode: 403, body: '' };
/** The text of `refuseSpdyStreaming`'s refusal. */
export const SPDY_STREAMING_REFUSED = `SPDY/3.1 upgrades are not supported by this gateway; use WebSockets (${StreamProtocolV5Name}, ${TUNNELING_PORT_FORWARD_PROTOCOL})`;
/** `refuseSpdyStreaming`: 403 and a line of text, as a gateway answers an upgrade it cannot carry. */
export const SPDY_STREAMING_REFUSAL: StreamRefusal = { statusCode: 403, contentType: 'text/plain; charset=utf-8', body: `${SPDY_STREAMING_REFUSED}\n` };

/** Tell the request's wire: SPDY, v5 (exec/attach only), the tunnel (portforward only) or another WebSocket. */
export function streamWire(req: Pick<IncomingMessage, 'rawHeaders'>, kind: UpgradeKind, subresource: StreamSubresource): StreamWire {
  if (kind === 'spdy') return 'spdy';
  if (subresource === 'portforward') return isTunnelingRequest(req.rawHeaders) ? 'tunnel' : 'websocket';
  return isWebSocketRequestWithStreamCloseProtocol(req.rawHeaders) ? 'v5' : 'websocket';
}

/** Decide the way of one request to a pod on a node with `declaredFeatures`. Pure. */
export function streamWay(policy: ApiserverStreamingPolicy, subresource: StreamSubresource, wire: StreamWire, declaredFeatures: readonly string[]): StreamWay {
  if (wire === 'spdy') {
    return policy.refuseSpdyStreaming ? { way: 'refuse', refusal: SPDY_STREAMING_REFUSAL } : { way: 'kubelet' };
  }
  if (wire === 'websocket') return { way: 'kubelet' };
  if (policy.refuseWebSocketStreaming) return { way: 'refuse', refusal: WEBSOCKET_STREAMING_REFUSAL };
  const counted = apiserverExtendsWebSocketsToKubelet(policy.apiserverMinor);
  if (counted && declaredFeatures.includes(EXTEND_WEBSOCKETS_TO_KUBELET)) return { way: 'kubelet', proxyType: 'proxied_to_kubelet' };
  if (!apiserverTranslates(policy.apiserverMinor, subresource)) return { way: 'kubelet' };
  if (wire === 'tunnel') return counted ? { way: 'tunnel', proxyType: 'tunneled_at_apiserver' } : { way: 'tunnel' };
  return counted ? { way: 'translate', proxyType: 'translated_at_apiserver' } : { way: 'translate' };
}
