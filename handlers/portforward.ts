/**
 * `pods/portforward` (GET and POST) and its local paths (an {@link UpgradeDelegate}): the
 * StreamTunnelProxy (the WebSocket tunnel `SPDY/3.1+portforward.k8s.io` of kubectl ≥ 1.31 unwrapped to
 * SPDY upstream, gate `PortForwardWebsockets`) and the ReverseStreamTunnelProxy (a SPDY client wrapped
 * into the tunnel, for an upstream that refuses SPDY). Which one runs, if any, is decided in
 * handlers/stream-path.ts; everything else (SPDY, the legacy WebSocket `v4.channel.k8s.io` of
 * @kubernetes/client-node and browsers, the tunnel to a kubelet that takes it) is the passthrough.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PASSTHROUGH_EXIT_CODE_UNKNOWN } from '../src/audit.js';
import { dialErrorReason, type StreamingSession } from '../src/streaming-sessions.js';
import { StreamTunnelProxy, type StreamTunnelOptions, type TunnelOutcome } from '../translator/stream-tunnel.js';
import { ReverseStreamTunnelProxy } from '../translator/reverse-tunnel.js';
import { clientInfo, perServer, type HandlerDeps } from './handler-deps.js';
import { podSubresourceRoutes, type LocalStreamPath, type PodParams, type UpgradeDelegate } from './pod-subresource.js';
import type { UpgradeContext } from './upgrade-context.js';
import { abandonRecording } from './recording-start.js';
import type { BegunRecording } from '../src/recording/session-recorder.js';

/** What both tunnels offer. */
interface Tunnel {
  tryTunnel(...args: Parameters<StreamTunnelProxy['tryTunnel']>): Promise<TunnelOutcome>;
}

/** The tunnels' settings: the passthrough's limits and timeouts. */
function tunnelOptions(deps: HandlerDeps): StreamTunnelOptions {
  const { upstream, maxBytesPerSec, responseTimeoutMs, maxResponseHeadBytes } = deps.upgradeProxy.options;
  return { upstream, maxBytesPerSec, responseTimeoutMs, ...(maxResponseHeadBytes !== undefined ? { maxResponseHeadBytes } : {}) };
}

/** One tunnel and one reverse tunnel per server, with the passthrough's limits and timeouts. */
const tunnelFor = perServer((deps) => new StreamTunnelProxy(tunnelOptions(deps)));
const reverseTunnelFor = perServer((deps) => new ReverseStreamTunnelProxy(tunnelOptions(deps)));

/**
 * One tunnel as a local path. Forward: kube-apiserver's
 * `NewTranslatingHandler(h, NewTunnelingHandler(h), IsWebSocketRequestWithTunnelingProtocol)`, counted
 * by `apiserver_stream_tunnel_requests_total`; reverse: not counted there (kube-apiserver's meaning:
 * WebSocket clients tunnelled here), but by the session counter (`path="reverse_tunnel"`).
 */
function tunnelPath(reverse: boolean): LocalStreamPath {
  const tunnelOf = (deps: HandlerDeps): Tunnel => (reverse ? reverseTunnelFor(deps) : tunnelFor(deps));
  return {
    async serve(request: FastifyRequest<{ Params: PodParams }>, reply: FastifyReply, upgrade: UpgradeContext, deps: HandlerDeps, session: StreamingSession, recording?: BegunRecording) {
      // Hijacking comes first and is final: from here on every answer is raw bytes on the socket.
      reply.hijack();
      const outcome = await tunnelOf(deps).tryTunnel(request.raw, upgrade.socket, upgrade.head, clientInfo(request.raw, deps.proto), recording);
      // The upstream's 101 arrived: only now is the record created (written at the end).
      if (outcome.kind === 'tunneled') recording?.upgraded();
      else abandonRecording(recording, outcome.statusCode, session);
      deps.metrics.incUpgradeRequest('portforward', outcome.statusCode);
      if (outcome.kind !== 'client-gone' && !reverse) deps.metrics.incStreamTunnelRequest(outcome.tunnelCode);
      switch (outcome.kind) {
        case 'tunneled': {
          deps.metrics.addUpgradedConnections('portforward', 1);
          request.log.info({ handler: 'portforward', protocol: outcome.protocol, reverse }, 'port-forward tunnel started');
          const { relay, goAway } = outcome;
          session.established(() => goAway('proxy shutting down'), outcome.protocol);
          void relay.done.then((end) => {
            deps.metrics.addUpgradedConnections('portforward', -1);
            deps.metrics.addUpgradedBytes('to_upstream', relay.bytes.toUpstream);
            deps.metrics.addUpgradedBytes('to_client', relay.bytes.toClient);
            request.log.info({ handler: 'portforward', ...end, ...relay.bytes }, 'port-forward tunnel closed');
            const outcome = deps.sessions.stopping ? 'shutdown' : end.reason === 'eof' ? 'success' : end.side === 'client' && end.reason === 'error' ? 'client_gone' : 'error';
            session.end({ outcome, statusCode: 101, bytes: relay.bytes, exitCodeUnknown: 'port-forward has no exit code' });
          });
          return { upstreamUpgraded: true };
        }
        case 'forwarded':
          request.log.info({ handler: 'portforward', statusCode: outcome.statusCode }, 'upstream refused the tunnel; answer relayed');
          session.end({ outcome: 'upstream_refused', statusCode: outcome.statusCode, exitCodeUnknown: PASSTHROUGH_EXIT_CODE_UNKNOWN });
          return { upstreamUpgraded: false };
        case 'error': {
          request.log.warn({ handler: 'portforward', statusCode: outcome.statusCode, err: outcome.error }, 'port-forward tunnel failed');
          const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
          const failed = dialErrorReason(outcome.error) ? 'upstream_unreachable' : outcome.statusCode === 400 ? 'handshake_failed' : 'error';
          session.end({ outcome: failed, statusCode: outcome.statusCode, error: outcome.error, message });
          return { upstreamUpgraded: false };
        }
        case 'client-gone':
          request.log.info({ handler: 'portforward' }, 'client left before the upstream answered');
          session.end({ outcome: 'client_gone', statusCode: 499 });
          return { upstreamUpgraded: false };
      }
    },
  };
}

/** The local paths of `pods/portforward`: the tunnel and the reverse tunnel. */
export const portForwardTunnelDelegate: UpgradeDelegate = { forward: tunnelPath(false), reverse: tunnelPath(true) };

/** Fastify plugin for `/api/v1/namespaces/:namespace/pods/:name/portforward`. */
export const portforwardRoutes = podSubresourceRoutes('portforward', portForwardTunnelDelegate);
