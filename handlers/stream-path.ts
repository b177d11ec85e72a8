/**
 * The one decision of a pod streaming request's path (issue 32): passthrough, translated (WebSocket
 * v5 → SPDY), tunnel (the port-forward WebSocket tunnel unwrapped to SPDY), reverse_translated (SPDY
 * exec/attach → v5) or reverse_tunnel (SPDY port-forward → the tunnel), and the order of attempts.
 * Nothing else in the code decides a path: the relays serve what they are handed.
 *
 * Read from the client's request head (its protocol), the route (a kubelet with its node's
 * `declaredFeatures`, or an upstream that is asked: apiserver, agent cluster, APIService backend), the
 * feature gates, `--upstream-streaming` and the per-upstream memory. The table, row by row, is
 * docs/translator.md "Which path a streaming request takes".
 *
 * - Kubelet (`--upstream-mode kubelet`), as kube-apiserver ≥ 1.36's pod `Connect()`: the node declares
 *   `ExtendWebSocketsToKubelet` and the gate is on → v5 and the tunnel pass through byte for byte;
 *   else they are translated / unwrapped here. One attempt: kube-apiserver has no fallback.
 * - An upstream that is asked (`auto`): the client's own protocol first, passed through; refused before
 *   its 101 with anything but 401 or a Kubernetes verdict (`isFallbackAnswer`) → once more in the other
 *   protocol, translated here. Unless the memory says this upstream took the other protocol after
 *   refusing the client's (never written after a verdict, `isVerdict`): then that one alone.
 * - SPDY, WebSocket v1–v4 (base64 too) and anything unknown: passed through. SPDY clients of an
 *   upstream are the exception above (reverse), as the `websocket` setting is.
 * - A fallback is planned only where the local path could serve the client: not a translation of a
 *   query it would refuse (`translatable`), not a reverse translation for a SPDY client that offers
 *   no `X-Stream-Protocol-Version` the reverse translator negotiates (`reverseNegotiable`). Then the
 *   upstream's own refusal is relayed verbatim and nothing else goes upstream.
 */
import type { FastifyRequest } from 'fastify';
import type { FeatureGates } from '../src/feature-gate.js';
import type { UpstreamStreaming } from '../src/config.js';
import type { SessionPathLabel, StreamingProtocolLabel, SubresourceLabel, WebSocketProxyType } from '../src/metrics.js';
import { routeOf, type RouteStreaming } from '../src/routing/route.js';
import { HEADER_PROTOCOL_VERSION, headerList, isUpgradeRequestFor, negotiateProtocol, PortForwardProtocolV1Name } from '../src/stream-protocol.js';
import { parseRemoteCommandOptions } from '../src/wire/remote-command-options.js';
import type { UpstreamRefusal } from '../src/wire/refusal-body.js';
import { CLIENT_SPDY_PROTOCOLS } from '../translator/reverse-spdy-server.js';
import { isWebSocketRequestWithStreamCloseProtocol } from '../translator/stream-close-predicate.js';
import { isTunnelingRequest, SPDY_31 } from '../translator/stream-tunnel-protocol.js';
import type { HandlerDeps } from './handler-deps.js';

/** The string a kubelet that passes WebSocket streams on declares (KEP-5328 `declaredFeatures`). */
export const EXTEND_WEBSOCKETS_TO_KUBELET = 'ExtendWebSocketsToKubelet';

/** What the client speaks, as the decision tells it apart. */
export type ClientStreamProtocol =
  /** `v5.channel.k8s.io` on exec/attach (kubectl ≥ 1.30), gate `TranslateStreamCloseWebsocketRequests` on. */
  | 'websocket-v5'
  /** `SPDY/3.1+portforward.k8s.io` on portforward (kubectl ≥ 1.31), gate `PortForwardWebsockets` on. */
  | 'websocket-tunnel'
  /** SPDY/3.1 (kubectl ≤ 1.29, `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`, SPDY libraries). */
  | 'spdy'
  /** Every other WebSocket: v1–v4 and base64 (client-node, browsers), v5 or the tunnel with its gate off. */
  | 'websocket-legacy'
  /** Any other upgrade. */
  | 'other';

/**
 * One way of serving a streaming request (one upgrade sent upstream), named as the session's `path`
 * label: `passthrough`, `translated` (v5 → SPDY), `tunnel` (the tunnel unwrapped to SPDY),
 * `reverse_translated` (SPDY exec/attach → v5), `reverse_tunnel` (SPDY port-forward → the tunnel).
 */
export type StreamPath = SessionPathLabel;

/** One attempt of a plan. */
export interface StreamAttempt {
  path: StreamPath;
  /** The protocol spoken upstream (the memory's and the fallback counter's value). */
  upstreamProtocol: StreamingProtocolLabel;
  /** `apiserver_websocket_streaming_requests_total{proxy_type}` when it serves a WebSocket client. */
  proxyType?: WebSocketProxyType;
}

/** The decision: one attempt, or a passthrough and what to try when it is refused before its 101. */
export interface StreamPlan {
  first: StreamAttempt;
  /** Asked when `first` (always a passthrough) was refused before its 101 as `isFallbackAnswer` says. */
  fallback?: StreamAttempt;
}

/** Everything the decision reads. */
export interface StreamDecisionInput {
  subresource: SubresourceLabel;
  client: ClientStreamProtocol;
  /** {@link RouteStreaming} of the route: present for a kubelet, absent for an upstream that is asked. */
  route?: RouteStreaming;
  gates: Pick<FeatureGates, 'ExtendWebSocketsToKubelet'>;
  upstreamStreaming: UpstreamStreaming;
  /** What the memory says this upstream took after refusing the other protocol. */
  remembered?: StreamingProtocolLabel;
  /**
   * False when the exec/attach query cannot be translated (bad stdin/stdout/stderr/tty): a translation
   * that would only refuse it is not planned behind a passthrough (the upstream judges the query);
   * planned alone, it answers the 400.
   */
  translatable: boolean;
  /**
   * For a SPDY client: false when none of its `X-Stream-Protocol-Version` offers is one the reverse
   * translator serves (exec/attach: v4 … `channel.k8s.io`; port-forward: `portforward.k8s.io`, as
   * `translator/reverse-spdy-server.ts` negotiates them), no line at all included. As `translatable`:
   * a reverse translation that would only refuse the handshake is not planned behind a passthrough
   * (the upstream's own refusal is the answer, and nothing more goes upstream); planned alone, it
   * answers the 400/403 itself as a kubelet does. True for every other client.
   */
  reverseNegotiable: boolean;
}

/** The client's protocol, read once off the request head with kube-apiserver's predicates. */
export function clientStreamProtocolOf(rawHeaders: readonly string[], headers: FastifyRequest['headers'], subresource: SubresourceLabel, gates: Pick<FeatureGates, 'TranslateStreamCloseWebsocketRequests' | 'PortForwardWebsockets'>): ClientStreamProtocol {
  if (subresource === 'portforward') {
    if (gates.PortForwardWebsockets && isTunnelingRequest(rawHeaders)) return 'websocket-tunnel';
  } else if (gates.TranslateStreamCloseWebsocketRequests && isWebSocketRequestWithStreamCloseProtocol(rawHeaders)) return 'websocket-v5';
  if (isUpgradeRequestFor(headers, 'websocket')) return 'websocket-legacy';
  return isUpgradeRequestFor(headers, SPDY_31) ? 'spdy' : 'other';
}

/** The passthrough; a WebSocket client's is counted as proxied to the kubelet or to the upstream. */
function passthroughTo(route: RouteStreaming | undefined, client: ClientStreamProtocol): StreamAttempt {
  const websocket = client === 'websocket-v5' || client === 'websocket-tunnel' || client === 'websocket-legacy';
  return {
    path: 'passthrough',
    upstreamProtocol: websocket ? 'websocket' : 'spdy',
    ...(websocket ? { proxyType: route?.kubelet ? 'proxied_to_kubelet' : 'proxied_to_upstream' } : {}),
  };
}

/** The local path for a client whose protocol the upstream does not take. */
function localPath(client: 'websocket-v5' | 'websocket-tunnel' | 'spdy', subresource: SubresourceLabel): StreamAttempt {
  if (client === 'websocket-v5') return { path: 'translated', upstreamProtocol: 'spdy', proxyType: 'translated_at_apiserver' };
  if (client === 'websocket-tunnel') return { path: 'tunnel', upstreamProtocol: 'spdy', proxyType: 'tunneled_at_apiserver' };
  return subresource === 'portforward' ? { path: 'reverse_tunnel', upstreamProtocol: 'websocket' } : { path: 'reverse_translated', upstreamProtocol: 'websocket' };
}

/**
 * True when the client's `X-Stream-Protocol-Version` lines (comma lists split) offer one the reverse
 * translator's SPDY server side negotiates: what `translator/reverse-remote-command.ts` (v4 …
 * `channel.k8s.io`) and `translator/reverse-tunnel.ts` (`portforward.k8s.io`) hand `negotiateClientProtocol`.
 */
export function offersReverseProtocol(headers: FastifyRequest['headers'], subresource: SubresourceLabel): boolean {
  const server = subresource === 'portforward' ? [PortForwardProtocolV1Name] : CLIENT_SPDY_PROTOCOLS;
  return negotiateProtocol(headerList(headers, HEADER_PROTOCOL_VERSION), server) !== undefined;
}

/** Decide. Pure: the table of docs/translator.md, and its unit test, is this function. */
export function decideStreamPath(i: StreamDecisionInput): StreamPlan {
  const { client, route } = i;
  const passthrough = passthroughTo(route, client);
  if (client === 'other' || client === 'websocket-legacy') return { first: passthrough };
  // A kubelet: its node's declared features decide, once. SPDY always passes (the kubelet's own protocol).
  if (route?.kubelet) {
    if (client === 'spdy') return { first: passthrough };
    const declares = i.gates.ExtendWebSocketsToKubelet && route.kubelet.declaredFeatures.includes(EXTEND_WEBSOCKETS_TO_KUBELET);
    return { first: declares ? passthrough : localPath(client, i.subresource) };
  }
  const local = localPath(client, i.subresource);
  const clientSpeaks: StreamingProtocolLabel = client === 'spdy' ? 'spdy' : 'websocket';
  // --upstream-streaming websocket|spdy: that protocol upstream, whatever the client speaks.
  if (i.upstreamStreaming !== 'auto') return { first: i.upstreamStreaming === clientSpeaks ? passthrough : local };
  // auto: the memory of an earlier fallback, else the client's own protocol first.
  if (i.remembered !== undefined && i.remembered !== clientSpeaks) return { first: local };
  const needsQuery = local.path === 'translated' || local.path === 'reverse_translated';
  if (needsQuery && !i.translatable) return { first: passthrough };
  const reverse = local.path === 'reverse_translated' || local.path === 'reverse_tunnel';
  return reverse && !i.reverseNegotiable ? { first: passthrough } : { first: passthrough, fallback: local };
}

/**
 * True when `refusal` is a Kubernetes verdict on the caller or the request rather than on the
 * protocol: a `Status` with reason `NotFound` (no such pod or namespace: so in every protocol) or
 * `Forbidden` (the authorizer refused this user). kube-apiserver writes both as JSON Status bodies;
 * the protocol refusals seen in the field carry none (OpenShift's 403 is the kubelet's
 * x/net/websocket handshake failure, an empty body; gateways answer text). A verdict is about one
 * user or one pod, never about the upstream: it never turns the per-upstream memory.
 */
export function isVerdict(refusal: UpstreamRefusal): boolean {
  const reason = refusal.status?.reason;
  return reason === 'NotFound' || reason === 'Forbidden';
}

/**
 * An upstream answer to a passthrough attempt that the planned `fallback` follows: anything before a
 * 101 (400, 403 as OpenShift answers a WebSocket exec, 404, 5xx from a gateway, a 3xx) but
 * - 401: credentials refused in one protocol are refused in the other;
 * - a `NotFound` Status: the pod or namespace is missing whatever the protocol;
 * - a `Forbidden` Status before a reverse translation: SPDY is a POST, authorized as `create`; a
 *   WebSocket is a GET, authorized as `get` by an upstream without
 *   `AuthorizePodWebsocketUpgradeCreatePermission` (before 1.35). A refused `create` must never be
 *   retried as a `get`. The other way (v5 → SPDY, `get` → `create`) asks for no less, and is what
 *   kubectl's own fallback (`httpstream.IsUpgradeFailure`) does, so it is kept.
 */
export function isFallbackAnswer(refusal: UpstreamRefusal, fallback: StreamAttempt): boolean {
  const { statusCode } = refusal;
  if (statusCode === 101 || statusCode === 401) return false;
  const reason = refusal.status?.reason;
  if (reason === 'NotFound') return false;
  const reverse = fallback.path === 'reverse_translated' || fallback.path === 'reverse_tunnel';
  return !(reverse && reason === 'Forbidden');
}

/** A request's plan and the client protocol it was made for. */
export interface RequestStreamPlan extends StreamPlan {
  client: ClientStreamProtocol;
}

/** The plan of one request, from its head, its route and the server's settings. */
export function planStreamRequest(request: FastifyRequest, deps: HandlerDeps, subresource: SubresourceLabel): RequestStreamPlan {
  const route = routeOf(request.raw, deps.upstream);
  const client = clientStreamProtocolOf(request.raw.rawHeaders, request.headers, subresource, deps.featureGates);
  const remembered = route.streaming ? undefined : deps.streamingMemory.preferred(route.name);
  const translatable = subresource === 'portforward' || parseRemoteCommandOptions(new URL(request.raw.url ?? '/', 'http://request.invalid').searchParams).ok;
  const reverseNegotiable = client !== 'spdy' || offersReverseProtocol(request.headers, subresource);
  const plan = decideStreamPath({
    subresource,
    client,
    ...(route.streaming ? { route: route.streaming } : {}),
    gates: deps.featureGates,
    upstreamStreaming: deps.upstreamStreaming,
    ...(remembered ? { remembered } : {}),
    translatable,
    reverseNegotiable,
  });
  return { ...plan, client };
}
