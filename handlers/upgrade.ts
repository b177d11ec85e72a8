/**
 * Handling an upgrade request inside a Fastify route: hijack the reply (after onRequest hooks such as
 * logging, metrics and later authorization have run), then hand the raw socket to UpgradeAwareProxy
 * and record the outcome.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { HandlerLabel } from '../src/metrics.js';
import { clientInfo, type HandlerDeps } from './handler-deps.js';
import type { UpgradeContext } from './upgrade-context.js';

/**
 * Proxy the upgrade. Resolves once the upstream has answered (not when the upgraded connection ends).
 * Hijacking comes first and is final: from here on every answer is raw bytes on the socket.
 */
export async function proxyUpgrade(
  request: FastifyRequest,
  reply: FastifyReply,
  upgrade: UpgradeContext,
  deps: HandlerDeps,
  handler: HandlerLabel,
): Promise<void> {
  reply.hijack();
  const outcome = await deps.upgradeProxy.tryUpgrade(request.raw, upgrade.socket, upgrade.head, clientInfo(request.raw, deps.proto));
  deps.metrics.incUpgradeRequest(handler, outcome.statusCode);
  switch (outcome.kind) {
    case 'upgraded': {
      deps.metrics.addUpgradedConnections(handler, 1);
      request.log.info({ handler }, 'upgraded connection started');
      const { splice } = outcome;
      void splice.done.then((firstEnd) => {
        deps.metrics.addUpgradedConnections(handler, -1);
        deps.metrics.addUpgradedBytes('to_upstream', splice.bytes.toUpstream);
        deps.metrics.addUpgradedBytes('to_client', splice.bytes.toClient);
        request.log.info({ handler, firstEnd, ...splice.bytes }, 'upgraded connection closed');
      });
      return;
    }
    case 'forwarded':
      request.log.info({ handler, statusCode: outcome.statusCode }, 'upstream refused the upgrade; answer relayed');
      return;
    case 'error':
      request.log.warn({ handler, statusCode: outcome.statusCode, err: outcome.error }, 'upgrade failed');
      return;
    case 'client-gone':
      request.log.info({ handler }, 'client left before the upstream answered');
      return;
  }
}
