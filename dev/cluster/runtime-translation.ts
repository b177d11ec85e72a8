/**
 * kube's StreamTranslator (WebSocket `v5.channel.k8s.io` ⇄ SPDY) and StreamTunnel
 * (`SPDY/3.1+portforward.k8s.io` ⇄ SPDY) run against the dev runtime's streaming server. In
 * Kubernetes both are the same code wherever they run: in kube-apiserver 1.30–1.35 (and 1.36+ in
 * front of a node that does not declare `ExtendWebSocketsToKubelet`), and moved next to the runtime in
 * a 1.36 kubelet. The dev cluster therefore reuses the proxy's own {@link StreamTranslatorProxy} and
 * {@link StreamTunnelProxy} (CLOSE `[255, ch]` → stdin FIN, one Status on channel 3, close 1000), one
 * instance of each per place that translates, each session routed to a fresh runtime token.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { setRoute, unavailableRoute, type Route } from '../../src/routing/route.js';
import type { ClientInfo } from '../../src/wire/forwarded-headers.js';
import { writeRawResponse } from '../../src/wire/http-response.js';
import { StreamTranslatorProxy } from '../../translator/stream-translator.js';
import { StreamTunnelProxy } from '../../translator/stream-tunnel.js';
import type { DevClusterRuntime } from './cluster-runtime.js';
import { RUNTIME_TOKEN_TTL_MS, type RuntimeStreamingServer, type RuntimeStreamRequest } from './runtime-streaming-server.js';
import type { PortForwardContext } from './spdy-port-forward.js';
import type { RemoteCommandContext } from './spdy-remote-command.js';

/** Deadline for dialling the runtime and reading its answer (kube's default `--upgrade-response-timeout`-like bound). */
const RUNTIME_RESPONSE_TIMEOUT_MS = 30_000;

/** Where a translation's outcomes are counted (the apiserver counts them; a 1.36 kubelet exports nothing). */
export interface TranslationCounters {
  /** `apiserver_stream_translator_requests_total{code}`. */
  translator?(code: number): void;
  /** `apiserver_stream_tunnel_requests_total{code}`. */
  tunnel?(code: number): void;
}

/** The translator's session logger: the dev cluster logs nothing. */
const SILENT = { warn: () => undefined, debug: () => undefined, info: () => undefined };

/** Translation and tunnelling for one place (the kubelet, or the apiserver look-alike). */
export class RuntimeTranslation {
  readonly #runtime: RuntimeStreamingServer;
  readonly #cluster: DevClusterRuntime;
  readonly #translator: StreamTranslatorProxy;
  readonly #tunnel: StreamTunnelProxy;
  readonly #counters: TranslationCounters;

  constructor(runtime: RuntimeStreamingServer, cluster: DevClusterRuntime, counters: TranslationCounters = {}) {
    this.#runtime = runtime;
    this.#cluster = cluster;
    this.#counters = counters;
    // Every request gets its own route (setRoute); the fallback is never dialled.
    const upstream = unavailableRoute('no runtime token for this request');
    this.#translator = new StreamTranslatorProxy({
      upstream,
      metrics: { incStreamTranslatorRequest: (code: number) => counters.translator?.(code) },
      maxBytesPerSec: 0,
      responseTimeoutMs: RUNTIME_RESPONSE_TIMEOUT_MS,
    });
    this.#tunnel = new StreamTunnelProxy({ upstream, maxBytesPerSec: 0, responseTimeoutMs: RUNTIME_RESPONSE_TIMEOUT_MS });
  }

  /** Serve a v5 exec/attach (validated by the caller) through the translator. Never throws. */
  translate(req: IncomingMessage, socket: Duplex, head: Buffer, ctx: RemoteCommandContext): void {
    if (!this.#route(req, socket, { kind: ctx.subresource, pod: ctx.pod, options: ctx.options })) return;
    const { stdin, stdout, stderr, tty } = ctx.options;
    const started = this.#translator.translate({ req, socket, head, options: { stdin, stdout, stderr, tty }, client: clientOf(req), log: SILENT });
    void this.#cluster.trackTask(
      started.then(async (handle) => {
        if (handle.kind !== 'upgraded') return;
        const stop = (): void => handle.stop(new Error('dev cluster is closing'));
        this.#cluster.signal.addEventListener('abort', stop, { once: true });
        await handle.done;
        this.#cluster.signal.removeEventListener('abort', stop);
      }),
    );
  }

  /** Serve a port-forward tunnel request through the tunnel. Never throws. */
  tunnel(req: IncomingMessage, socket: Duplex, head: Buffer, ctx: PortForwardContext): void {
    if (!this.#route(req, socket, { kind: 'portforward', pod: ctx.pod, ports: ctx.ports })) return;
    const started = this.#tunnel.tryTunnel(req, socket, head, clientOf(req));
    void this.#cluster.trackTask(
      started.then(async (outcome) => {
        if (outcome.kind === 'client-gone') return;
        this.#counters.tunnel?.(outcome.tunnelCode);
        if (outcome.kind !== 'tunneled') return;
        const goAway = (): void => outcome.goAway('dev cluster is closing');
        this.#cluster.signal.addEventListener('abort', goAway, { once: true });
        await outcome.relay.done;
        this.#cluster.signal.removeEventListener('abort', goAway);
      }),
    );
  }

  /**
   * Ask the runtime for a token and route `req` to it; false (answered) when the runtime refuses, as
   * the kubelet writes a CRI ResourceExhausted (`streaming.WriteError`: 429, Retry-After the TTL).
   */
  #route(req: IncomingMessage, socket: Duplex, request: RuntimeStreamRequest): boolean {
    let route: Route;
    try {
      route = this.#runtime.routeFor(request);
    } catch (err) {
      const headers = { 'Content-Type': 'text/plain; charset=utf-8', 'Retry-After': String(RUNTIME_TOKEN_TTL_MS / 1000) };
      writeRawResponse(socket, 429, headers, (err as Error).message);
      return false;
    }
    setRoute(req, route);
    return true;
  }
}

/** The client as the translator's upstream request describes it (X-Forwarded-*). */
function clientOf(req: IncomingMessage): ClientInfo {
  return { remoteAddress: req.socket.remoteAddress, proto: req.socket instanceof TLSSocket ? 'https' : 'http', host: req.headers.host };
}
