/**
 * The container runtime's streaming server, as containerd and CRI-O run it (k8s.io/kubelet
 * `pkg/cri/streaming/server.go` and `request_cache.go`): a plain HTTP listener on loopback that serves
 * one exec, attach or port-forward per single-use token — `/exec/{token}`, `/attach/{token}`,
 * `/portforward/{token}` — over SPDY/3.1 and the legacy WebSocket protocols, never v5: KEP-4006 keeps
 * the kubelet → runtime leg on SPDY.
 *
 * The kubelet gets a token the way it gets one from the CRI `Exec`/`Attach`/`PortForward` call
 * ({@link RuntimeStreamingServer.routeFor}), then dials it: a 1.36 kubelet's StreamTranslator and
 * StreamTunnel do exactly that, and so does an older apiserver's (in the dev cluster the kubelet and
 * the runtime are one process, so the apiserver's translator dials the runtime as the kubelet would
 * proxy it). Tokens live one minute and are consumed by the first request; at most 1000 wait at once.
 * An unknown token is Go's `http.NotFound` (404 `404 page not found`).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { WebSocketServer } from 'ws';
import { routeVia, type Route } from '../../src/routing/route.js';
import { Upstream } from '../../src/routing/upstream.js';
import { writeRawResponse } from '../../src/wire/http-response.js';
import type { DevClusterRuntime } from './cluster-runtime.js';
import type { Pod } from './pod.js';
import { serveSpdyPortForward } from './spdy-port-forward.js';
import { serveSpdyRemoteCommand } from './spdy-remote-command.js';
import type { StreamOptions } from './stream-options.js';
import { serveWebSocketPortForward } from './websocket-port-forward.js';
import { serveWebSocketRemoteCommand } from './websocket-remote-command.js';

/** One streaming request the runtime was asked for. */
export type RuntimeStreamRequest =
  | { kind: 'exec' | 'attach'; pod: Pod; options: StreamOptions }
  | { kind: 'portforward'; pod: Pod; ports: number[] };

/** How long a token waits for its request (`request_cache.go` `CacheTTL`). */
export const RUNTIME_TOKEN_TTL_MS = 60_000;
/** Tokens waiting at once (`maxInFlight`). */
export const RUNTIME_MAX_IN_FLIGHT = 1000;
/** Random bytes per token (`tokenLen`), URL-safe base64 without padding. */
const TOKEN_BYTES = 8;

const TOKEN_PATH = /^\/(exec|attach|portforward)\/([A-Za-z0-9_-]+)$/;

/** Refused because {@link RUNTIME_MAX_IN_FLIGHT} tokens are waiting (CRI `ResourceExhausted`). */
export class TooManyStreamingRequestsError extends Error {
  override readonly name = 'TooManyStreamingRequestsError';
  constructor() {
    super(`maximum number of in-flight streaming requests (${RUNTIME_MAX_IN_FLIGHT}) exceeded`);
  }
}

/** A listening runtime streaming server. */
export class RuntimeStreamingServer {
  readonly #server: Server;
  readonly #upstream: Upstream;
  readonly #pending = new Map<string, { request: RuntimeStreamRequest; expires: number }>();

  private constructor(server: Server, port: number) {
    this.#server = server;
    this.#upstream = new Upstream(new URL(`http://127.0.0.1:${port}`), undefined, undefined, { name: 'runtime' });
  }

  /** Listen on 127.0.0.1 (a free port); sessions end when `cluster` closes. */
  static async start(cluster: DevClusterRuntime, wss: WebSocketServer): Promise<RuntimeStreamingServer> {
    const server = createServer((_req, res) => {
      res.writeHead(400, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Upgrade request required\n');
    });
    server.on('connection', (socket: Socket) => cluster.track(socket));
    server.on('clientError', (_err, socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    const runtime = new RuntimeStreamingServer(server, (server.address() as { port: number }).port);
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => runtime.#serve(req, socket, head, cluster, wss));
    return runtime;
  }

  /**
   * A token for `request` and the route to its URL (the CRI call's answer). Throws
   * {@link TooManyStreamingRequestsError} when too many wait.
   */
  routeFor(request: RuntimeStreamRequest): Route {
    const now = Date.now();
    for (const [token, p] of this.#pending) if (p.expires <= now) this.#pending.delete(token);
    if (this.#pending.size >= RUNTIME_MAX_IN_FLIGHT) throw new TooManyStreamingRequestsError();
    const token = randomBytes(TOKEN_BYTES).toString('base64url');
    this.#pending.set(token, { request, expires: now + RUNTIME_TOKEN_TTL_MS });
    return routeVia(this.#upstream, { name: 'runtime', target: `/${request.kind}/${token}` });
  }

  /** Stop listening (the cluster's runtime ends the sessions and their sockets). */
  close(): Promise<void> {
    this.#pending.clear();
    this.#upstream.close();
    return new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  #serve(req: IncomingMessage, socket: Duplex, head: Buffer, cluster: DevClusterRuntime, wss: WebSocketServer): void {
    socket.on('error', () => undefined);
    const m = TOKEN_PATH.exec(new URL(req.url ?? '/', 'http://runtime').pathname);
    const pending = m ? this.#pending.get(m[2]!) : undefined;
    if (m) this.#pending.delete(m[2]!);
    if (!m || !pending || pending.expires <= Date.now()) {
      return writeRawResponse(socket, 404, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' }, '404 page not found\n');
    }
    const { request } = pending;
    if (request.kind !== m[1]) return writeRawResponse(socket, 400, { 'Content-Type': 'text/plain; charset=utf-8' }, 'invalid request\n');
    const spdy = (req.headers.upgrade ?? '').split(',')[0]!.trim().toLowerCase() === 'spdy/3.1';
    if (request.kind === 'portforward') {
      const ctx = { pod: request.pod, ports: request.ports, cluster };
      if (spdy) serveSpdyPortForward(req, socket, head, ctx);
      else serveWebSocketPortForward(wss, req, socket, head, ctx);
      return;
    }
    const ctx = { subresource: request.kind, pod: request.pod, options: request.options, cluster };
    if (spdy) serveSpdyRemoteCommand(req, socket, head, ctx);
    else serveWebSocketRemoteCommand(wss, req, socket, head, ctx);
  }
}
