/**
 * The {@link UpgradeDelegate} that takes WebSocket v5 exec/attach off the passthrough path, as
 * kube-apiserver's `NewTranslatingHandler` does for `TranslateStreamCloseWebsocketRequests`.
 * Before the hijack, a bad query is answered as a plain HTTP Status (a failed handshake to a
 * WebSocket client, which makes kubectl retry over SPDY).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { clientInfo, type HandlerDeps } from '../handlers/handler-deps.js';
import type { PodParams, UpgradeDelegate } from '../handlers/pod-subresource.js';
import { sendStatus } from '../handlers/status-reply.js';
import type { UpgradeContext } from '../handlers/upgrade-context.js';
import type { HandlerLabel } from '../src/metrics.js';
import { parseRemoteCommandOptions } from './remote-command-options.js';
import { shouldTranslate } from './stream-close-predicate.js';
import { StreamTranslatorProxy } from './stream-translator.js';

const proxies = new WeakMap<HandlerDeps, StreamTranslatorProxy>();

/** The one translator of a server (created on first use from its deps). */
export function translatorFor(deps: HandlerDeps): StreamTranslatorProxy {
  let proxy = proxies.get(deps);
  if (!proxy) {
    proxy = new StreamTranslatorProxy({
      upstream: deps.upstream,
      metrics: deps.metrics,
      maxBytesPerSec: deps.maxConnectionBytesPerSec,
      responseTimeoutMs: deps.upgradeResponseTimeoutMs,
    });
    proxies.set(deps, proxy);
  }
  return proxy;
}

/** The delegate for `pods/exec` or `pods/attach`. */
export function streamTranslatorDelegate(handler: HandlerLabel & ('exec' | 'attach')): UpgradeDelegate {
  return {
    matches(request: FastifyRequest<{ Params: PodParams }>, deps: HandlerDeps): boolean {
      return shouldTranslate(request.raw.rawHeaders, deps.featureGates);
    },
    async serve(request, reply: FastifyReply, upgrade: UpgradeContext, deps: HandlerDeps): Promise<void> {
      const query = new URL(request.raw.url ?? '/', 'http://request.invalid').searchParams;
      const parsed = parseRemoteCommandOptions(query);
      if (!parsed.ok) {
        sendStatus(reply, parsed.status);
        return;
      }
      reply.hijack();
      const handle = await translatorFor(deps).translate({
        req: request.raw,
        socket: upgrade.socket,
        head: upgrade.head,
        options: parsed.value,
        client: clientInfo(request.raw, deps.proto),
        log: request.log,
      });
      deps.metrics.incUpgradeRequest(handler, handle.upgraded ? 101 : 400);
      if (!handle.upgraded) {
        request.log.info({ handler }, 'WebSocket handshake refused');
        return;
      }
      deps.metrics.addUpgradedConnections(handler, 1);
      request.log.info({ handler, translated: true }, 'translated connection started');
      void handle.done.then((r) => {
        deps.metrics.addUpgradedConnections(handler, -1);
        deps.metrics.addUpgradedBytes('to_upstream', r.bytes.toUpstream);
        deps.metrics.addUpgradedBytes('to_client', r.bytes.toClient);
        request.log.info({ handler, code: r.code, ...r.bytes }, 'translated connection closed');
      });
    },
  };
}
