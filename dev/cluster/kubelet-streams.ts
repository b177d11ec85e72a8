/**
 * How the dev cluster's kubelet serves a pod's stream once the request is validated — on its own
 * listener, and when the apiserver look-alike hands it a request (`proxied_to_kubelet`, or any
 * SPDY/legacy WebSocket request):
 *
 * - a modern kubelet (≥ 1.36, `ExtendWebSocketsToKubelet`) takes WebSocket `v5.channel.k8s.io`
 *   exec/attach (kube-apiserver's `IsWebSocketRequestWithStreamCloseProtocol`: the first
 *   `Sec-WebSocket-Protocol` line offers v5) into the StreamTranslator, and the
 *   `SPDY/3.1+portforward.k8s.io` tunnel (`IsWebSocketRequestWithTunnelingProtocol`) into the
 *   StreamTunnel, both toward the runtime over SPDY (`runtime-translation.ts`), and counts each in
 *   `kubelet_websocket_streaming_requests_total{subresource}`;
 * - everything else — and every WebSocket at an older kubelet — goes to the runtime's own protocols:
 *   SPDY/3.1 and the legacy WebSocket ones (v1–v4, base64). There a v5-only offer is refused as the CRI
 *   streaming server's wsstream negotiation refuses it (x/net/websocket: 403, empty body), and a tunnel
 *   request without `port` as its port-forward options refuse it (400 `query parameter "port" is required`).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocketServer } from 'ws';
import { writeRawStatus } from '../../src/wire/http-response.js';
import { isWebSocketRequestWithStreamCloseProtocol } from '../../translator/stream-close-predicate.js';
import { isTunnelingRequest } from '../../translator/stream-tunnel-protocol.js';
import type { DevClusterRuntime } from './cluster-runtime.js';
import type { Pod } from './pod.js';
import type { RuntimeTranslation } from './runtime-translation.js';
import { serveSpdyPortForward } from './spdy-port-forward.js';
import { serveSpdyRemoteCommand, type RemoteCommandContext } from './spdy-remote-command.js';
import { parsePortForwardPorts } from './stream-options.js';
import type { KubeletStreamingMetrics } from './streaming-metrics.js';
import { serveWebSocketPortForward } from './websocket-port-forward.js';
import { serveWebSocketRemoteCommand } from './websocket-remote-command.js';

/** The upgrade a streaming request asks for: its first `Upgrade` token. */
export type UpgradeKind = 'spdy' | 'websocket';

/** `spdy` or `websocket` from the `Upgrade` header, or undefined for anything else. */
export function upgradeKind(req: IncomingMessage): UpgradeKind | undefined {
  const first = (req.headers.upgrade ?? '').split(',')[0]!.trim().toLowerCase();
  return first === 'spdy/3.1' ? 'spdy' : first === 'websocket' ? 'websocket' : undefined;
}

/** What the kubelet's streaming needs. */
export interface KubeletStreamsOptions {
  /** A modern kubelet: serves v5 and the tunnel itself (and declares it on its Node). */
  servesWebSockets: boolean;
  wss: WebSocketServer;
  /** The kubelet's own translator and tunnel toward the runtime. */
  translation: RuntimeTranslation;
  metrics: KubeletStreamingMetrics;
  cluster: DevClusterRuntime;
}

/** The kubelet's streaming endpoints, shared by its listener and the apiserver look-alike. */
export class KubeletStreams {
  readonly #o: KubeletStreamsOptions;

  constructor(options: KubeletStreamsOptions) {
    this.#o = options;
  }

  /** True for a kubelet that serves v5 and the tunnel itself. */
  get servesWebSockets(): boolean {
    return this.#o.servesWebSockets;
  }

  /** Serve an exec/attach whose pod and options the caller validated. */
  remoteCommand(req: IncomingMessage, socket: Duplex, head: Buffer, ctx: RemoteCommandContext, kind: UpgradeKind): void {
    if (kind === 'spdy') return serveSpdyRemoteCommand(req, socket, head, ctx);
    if (this.#o.servesWebSockets && isWebSocketRequestWithStreamCloseProtocol(req.rawHeaders)) {
      this.#o.metrics.incWebSocketStreaming(ctx.subresource);
      return this.#o.translation.translate(req, socket, head, ctx);
    }
    serveWebSocketRemoteCommand(this.#o.wss, req, socket, head, ctx);
  }

  /** Serve a port-forward to `pod`; the ports come from `query` (`port=`/`ports=`) or the SPDY streams. */
  portForward(req: IncomingMessage, socket: Duplex, head: Buffer, pod: Pod, query: URLSearchParams, kind: UpgradeKind): void {
    const tunnel = kind === 'websocket' && this.#o.servesWebSockets && isTunnelingRequest(req.rawHeaders);
    // The legacy WebSocket protocols carry no port headers: the query must name them.
    const ports = parsePortForwardPorts(query, kind === 'websocket' && !tunnel);
    if (!ports.ok) return writeRawStatus(socket, ports.status);
    const ctx = { pod, ports: ports.value, cluster: this.#o.cluster };
    if (tunnel) {
      this.#o.metrics.incWebSocketStreaming('portforward');
      return this.#o.translation.tunnel(req, socket, head, ctx);
    }
    if (kind === 'spdy') serveSpdyPortForward(req, socket, head, ctx);
    else serveWebSocketPortForward(this.#o.wss, req, socket, head, ctx);
  }
}
