/**
 * `pods/portforward` (GET and POST). With gate `PortForwardWebsockets` (default on) a WebSocket
 * upgrade offering `SPDY/3.1+….k8s.io` goes to the StreamTunnelProxy (kubectl ≥ 1.31); everything
 * else, SPDY and the legacy WebSocket `v4.channel.k8s.io` protocol of @kubernetes/client-node and
 * browsers included, goes through the upgrade passthrough unchanged.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PASSTHROUGH_EXIT_CODE_UNKNOWN } from '../src/audit.js';
import { dialErrorReason, type StreamingSession } from '../src/streaming-sessions.js';
import { isTunnelingRequest } from '../translator/stream-tunnel-protocol.js';
import { StreamTunnelProxy } from '../translator/stream-tunnel.js';
import { clientInfo, type HandlerDeps } from './handler-deps.js';
import { podSubresourceRoutes, type PodParams, type UpgradeDelegate } from './pod-subresource.js';
import type { UpgradeContext } from './upgrade-context.js';
import { abandonRecording } from './recording-start.js';
import type { BegunRecording } from '../src/recording/session-recorder.js';

/** One tunnel per server (per deps object), with the passthrough's limits and timeouts. */
const tunnels = new WeakMap<HandlerDeps, StreamTunnelProxy>();

function tunnelFor(deps: HandlerDeps): StreamTunnelProxy {
  let tunnel = tunnels.get(deps);
  if (!tunnel) {
    const { upstream, maxBytesPerSec, responseTimeoutMs, maxResponseHeadBytes } = deps.upgradeProxy.options;
    tunnel = new StreamTunnelProxy({
      upstream,
      maxBytesPerSec,
      responseTimeoutMs,
      ...(maxResponseHeadBytes !== undefined ? { maxResponseHeadBytes } : {}),
    });
    tunnels.set(deps, tunnel);
  }
  return tunnel;
}

/**
 * The port-forward tunnel as an UpgradeDelegate: kube-apiserver's
 * `NewTranslatingHandler(h, NewTunnelingHandler(h), IsWebSocketRequestWithTunnelingProtocol)`.
 */
export const portForwardTunnelDelegate: UpgradeDelegate = {
  path: 'tunnel',
  protocol: 'tunnel',
  matches(request: FastifyRequest<{ Params: PodParams }>, deps: HandlerDeps): boolean {
    return deps.featureGates.PortForwardWebsockets && isTunnelingRequest(request.raw.rawHeaders);
  },

  async serve(request: FastifyRequest<{ Params: PodParams }>, reply: FastifyReply, upgrade: UpgradeContext, deps: HandlerDeps, session: StreamingSession, recording?: BegunRecording): Promise<void> {
    // Hijacking comes first and is final: from here on every answer is raw bytes on the socket.
    reply.hijack();
    const outcome = await tunnelFor(deps).tryTunnel(request.raw, upgrade.socket, upgrade.head, clientInfo(request.raw, deps.proto), recording);
    // The upstream's 101 arrived: only now is the record created (written at the end).
    if (outcome.kind === 'tunneled') recording?.upgraded();
    else abandonRecording(recording, outcome.statusCode, session);
    deps.metrics.incUpgradeRequest('portforward', outcome.statusCode);
    if (outcome.kind !== 'client-gone') deps.metrics.incStreamTunnelRequest(outcome.tunnelCode);
    switch (outcome.kind) {
      case 'tunneled': {
        deps.metrics.addUpgradedConnections('portforward', 1);
        request.log.info({ handler: 'portforward', protocol: outcome.protocol }, 'port-forward tunnel started');
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
        return;
      }
      case 'forwarded':
        request.log.info({ handler: 'portforward', statusCode: outcome.statusCode }, 'upstream refused the tunnel; answer relayed');
        session.end({ outcome: 'upstream_refused', statusCode: outcome.statusCode, exitCodeUnknown: PASSTHROUGH_EXIT_CODE_UNKNOWN });
        return;
      case 'error': {
        request.log.warn({ handler: 'portforward', statusCode: outcome.statusCode, err: outcome.error }, 'port-forward tunnel failed');
        const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
        const failed = dialErrorReason(outcome.error) ? 'upstream_unreachable' : outcome.statusCode === 400 ? 'handshake_failed' : 'error';
        session.end({ outcome: failed, statusCode: outcome.statusCode, error: outcome.error, message });
        return;
      }
      case 'client-gone':
        request.log.info({ handler: 'portforward' }, 'client left before the upstream answered');
        session.end({ outcome: 'client_gone', statusCode: 499 });
        return;
    }
  },
};

/** Fastify plugin for `/api/v1/namespaces/:namespace/pods/:name/portforward`. */
export const portforwardRoutes = podSubresourceRoutes('portforward', portForwardTunnelDelegate);
