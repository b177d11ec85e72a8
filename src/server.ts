/**
 * The front proxy server: one Fastify app on one listener (HTTPS, or plain HTTP on loopback) serving
 * pods/{exec,attach,portforward}, the catch-all reverse proxy, health endpoints and `/metrics`.
 *
 * Node hands upgrade requests to `server.on('upgrade')`, outside Fastify's router. Like
 * fastify-websocket, we route them through `app.routing(req, res)` with a ServerResponse bound to the
 * socket, so the same onRequest hooks (logging, metrics, later authorization) run for upgrades as for
 * plain requests, and the route handler hijacks the reply before touching the socket.
 *
 * Graceful shutdown ({@link RunningServer.shutdown}, SIGTERM in the CLI): stop accepting connections,
 * fail `/readyz`, refuse new streaming requests on connections still open, let sessions run for the
 * grace period, then end the rest (translated: Status `proxy shutting down` on channel 3 and close
 * 1000; passthrough: close; tunnel: WebSocket close 1001), wait briefly for those to close, and close.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { createServer as createHttpServer, ServerResponse, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyServerOptions, type FastifyReply } from 'fastify';
import { Registry } from 'prom-client';
import { attachRoutes } from '../handlers/attach.js';
import { execRoutes } from '../handlers/exec.js';
import type { HandlerDeps } from '../handlers/handler-deps.js';
import { healthRoutes, HEALTH_PATHS, isOwnRequest, OWN_PATHS, type ReadinessCheck } from '../handlers/health.js';
import { portforwardRoutes } from '../handlers/portforward.js';
import { reverseProxyRoutes } from '../handlers/reverse-proxy.js';
import { apiServiceRoutes } from '../handlers/apiservices.js';
import { discoveryRoutes } from '../handlers/discovery.js';
import { DiscoveryService } from './aggregation/discovery-service.js';
import { sendStatus } from './wire/status-reply.js';
import { rememberUpgrade } from '../handlers/upgrade-context.js';
import { closeAfterAnswer } from './wire/close-after-answer.js';
import { requestFraming } from './wire/request-framing.js';
import { UpgradeAwareProxy } from '../proxy/upgrade-aware.js';
import { createProxyApiClient, type ProxyApiClient } from './api-client.js';
import { parseCertificateBundle } from './auth/client-certificate.js';
import type { JwtAuthenticatorSource } from './auth/jwt-authentication.js';
import { createRequestAuthHook } from './auth/request-auth.js';
import { reviewersPerCluster } from './auth/reviewers.js';
import { createWebSocketOriginHook } from './auth/origin-hook.js';
import { DEFAULT_WEBSOCKET_ALLOWED_ORIGINS } from './auth/websocket-origin.js';
import { DEFAULT_EXTRA_HEADER_PREFIXES, DEFAULT_GROUP_HEADERS, DEFAULT_UID_HEADERS, DEFAULT_USERNAME_HEADERS } from './auth/request-header.js';
import { DEFAULT_UPSTREAM_STREAMING, type ProxyConfig } from './config.js';
import { UpstreamStreamingMemory } from './routing/upstream-streaming-memory.js';
import { KubeletLocator } from './routing/kubelet/kubelet-locator.js';
import { Router, type RouteResolver } from './routing/router.js';
import { createStreamQueryHook } from './routing/stream-query.js';
import { startAggregator } from './aggregation/start-aggregator.js';
import { unavailableRoute, type Route } from './routing/route.js';
import { AgentListener } from './tunnel/agent-listener.js';
import { AgentRegistry } from './tunnel/agent-registry.js';
import { rewriteClusterUrl } from './tunnel/cluster-path.js';
import { ClusterResolver } from './tunnel/cluster-resolver.js';
import { InFlightResponses } from './in-flight-responses.js';
import { createMetrics, type HandlerLabel } from './metrics.js';
import { errorStatus, type V1Status } from './status.js';
import { StreamingSessions } from './streaming-sessions.js';
import { UpstreamProbe } from './upstream-probe.js';
import { startServerRecording } from './recording/server-recording.js';

/**
 * After the grace period, how long the sessions just told to end get to deliver their last Status
 * and see the client's close before every remaining connection is destroyed.
 */
export const SHUTDOWN_FINISH_WAIT_MS = 5_000;

/**
 * Longest pod name (a DNS-1123 subdomain, 253 characters). Fastify's default `maxParamLength` is 100;
 * a longer name would miss the exec routes and fall through to the catch-all.
 */
export const MAX_PARAM_LENGTH = 253;

/**
 * The listener's timeouts, kube-apiserver's (`secure_serving.go`): the request head within 32 s
 * (`ReadHeaderTimeout`, "just shy of requestTimeoutUpperBound"), an idle keep-alive connection kept
 * 90 s (`IdleTimeout`, "matches http.DefaultTransport keep-alive timeout"), and no total request
 * timeout: watches, exec, attach, port-forward and proxy run for as long as they run, and a request
 * body is never cut however long it takes (Node's default `requestTimeout` of 300 s cut them).
 * `--request-timeout` bounds the rest, per request (handlers/reverse-proxy.ts).
 */
export const HEADERS_TIMEOUT_MS = 32_000;
export const KEEP_ALIVE_TIMEOUT_MS = 90_000;
/** How often Node checks the head timeout of open connections (its default is 30 s, which would let a head take 62 s). */
export const CONNECTIONS_CHECKING_INTERVAL_MS = 2_000;

/** Extra knobs for embedding (tests, `demo`). */
export interface ServerOptions {
  /** The head timeout in ms (tests shorten it); {@link HEADERS_TIMEOUT_MS} by default. */
  headersTimeoutMs?: number;
  /** Registry for `/metrics`; a fresh one by default. */
  registry?: Registry;
  /** Fastify logger setting; off by default (the CLI turns it on). */
  logger?: FastifyServerOptions['logger'];
  /** Called with the app before routes are added, e.g. to add hooks. */
  configure?: (app: FastifyInstance) => void | Promise<void>;
  /** Upstream reachability check behind `/readyz`; a dialling {@link UpstreamProbe} by default. */
  upstreamProbe?: Pick<UpstreamProbe, 'check'>;
  /** The proxy's own API client (TokenReview, SubjectAccessReview, pods, nodes); client-node by default. */
  apiClient?: ProxyApiClient;
  /** APIService availability check intervals in ms (tests shorten them). */
  aggregatorIntervals?: { recheckMs?: number; retryMs?: number };
}

/** What a graceful shutdown did. */
export interface ShutdownReport {
  /** Streaming sessions open when shutdown began. */
  sessionsAtStart: number;
  /** Sessions still open when the grace period ran out, which were then ended by the proxy. */
  sessionsStopped: number;
}

/** A running proxy. */
export interface RunningServer {
  /** `https://host:port` or `http://host:port`, with the real port. */
  url: string;
  /** The agent listener's `https://host:port` (`http://` on loopback without TLS), when agents are on. */
  agentUrl?: string;
  /** The agents connected now, when agents are on (start-up checks: the demo waits for its agents). */
  agents?: AgentRegistry;
  app: FastifyInstance;
  /** True once {@link shutdown} began. */
  readonly draining: boolean;
  /** Stop listening, close connections and drop upstream pools (no grace). */
  close(): Promise<void>;
  /**
   * Graceful shutdown: stop accepting, fail `/readyz`, give open streaming sessions up to `graceMs`
   * to end, then end the rest and close. Calling it again returns the same promise.
   */
  shutdown(graceMs: number): Promise<ShutdownReport>;
}

/** Server-wide state next to the app. */
interface ServerState {
  sessions: StreamingSessions;
  /** The agent listener, started by {@link startServer} (`--agent-listen`). */
  agentListener?: AgentListener;
  /** Connected agents: sent GOAWAY when a graceful shutdown begins. */
  agents?: AgentRegistry;
}

/** How long agent tunnels get after GOAWAY (proxy close) before they are destroyed. */
export const AGENT_TUNNEL_CLOSE_GRACE_MS = 2_000;

const states = new WeakMap<FastifyInstance, ServerState>();

function handlerOf(url: string | undefined): HandlerLabel {
  const path = (url ?? '').split('?')[0] ?? '';
  const m = /\/pods\/[^/]+\/(exec|attach|portforward)$/.exec(path);
  if (m) return m[1] as HandlerLabel;
  if (path === '/metrics') return 'metrics';
  if (HEALTH_PATHS.includes(path)) return 'health';
  return 'proxy';
}

/**
 * True for an origin-form request-target (`/path?query`, RFC 9112 §3.2.1), the only form a client of
 * an API server sends. Absolute-form (`http://host/path`), authority-form (`host:port`) and
 * asterisk-form (`*`) are refused before anything else looks at the request: routing, the
 * authorization attributes and the kubelet locator all read the path, and would miss one whose
 * target starts with a scheme.
 */
export function isOriginForm(url: string | undefined): boolean {
  return url !== undefined && url.startsWith('/');
}

/** The 400 Status of a request-target that is not origin-form. */
function notOriginFormStatus(): V1Status {
  return errorStatus(400, 'the request-target must be in origin form: a path starting with "/"', 'BadRequest');
}

/** The answer to a request Node's HTTP parser refused: a Status (431 for an oversized head, else 400), then close. */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const status =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? errorStatus(431, 'Request Header Fields Too Large', 'RequestHeaderFieldsTooLarge')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? errorStatus(408, `the request head did not arrive within the header timeout`, 'Timeout')
        : errorStatus(400, `Bad Request: ${err.code ?? err.message}`, 'BadRequest');
  closeAfterAnswer(socket, status);
}

/** Build the app (routes, hooks, upgrade routing) without listening. */
export async function buildServer(config: ProxyConfig, options: ServerOptions = {}): Promise<FastifyInstance> {
  const registry = options.registry ?? new Registry();
  const inFlight = new InFlightResponses();
  const metrics = createMetrics(registry);
  const sessions = new StreamingSessions(metrics);
  let closing = false;
  const primary = config.upstream;
  const probe =
    options.upstreamProbe ??
    (primary ? new UpstreamProbe(primary, { onDialError: (reason) => metrics.incUpstreamDialError('readiness', reason) }) : undefined);
  // The JWT authenticators (started below, once the app's logger exists).
  let jwt: JwtAuthenticatorSource | undefined;
  const readiness = async (): Promise<ReadinessCheck[]> => {
    const shutdown: ReadinessCheck = sessions.draining || closing ? { name: 'shutdown', ok: false, message: 'proxy is shutting down' } : { name: 'shutdown', ok: true };
    // An issuer whose keys are not known yet: its tokens get 401 until they are (docs/operations.md).
    const jwtProblems = jwt?.authenticator.problems();
    const jwtCheck: ReadinessCheck[] = jwtProblems === undefined ? [] : [jwtProblems.length === 0 ? { name: 'jwt', ok: true } : { name: 'jwt', ok: false, message: jwtProblems.join('; ') }];
    if (!probe) return [shutdown, ...jwtCheck];
    const upstream = await probe.check();
    return [shutdown, { name: 'upstream', ...upstream }, ...jwtCheck];
  };
  const app = Fastify({
    logger: options.logger ?? false,
    // A UUID per request (not Fastify's per-process counter), so ids stay unique across replicas.
    genReqId: () => randomUUID(),
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Clusters behind agents: `/clusters/NAME/…` loses its prefix before routing (src/tunnel/cluster-path.ts).
    ...(config.agents ? { rewriteUrl: (req: IncomingMessage) => rewriteClusterUrl(req, OWN_PATHS) } : {}),
    // A request Node's parser rejects (conflicting Content-Length/Transfer-Encoding, oversized or broken
    // head) or a URL that does not decode gets a Kubernetes Status, as from the apiserver, not Fastify's JSON.
    clientErrorHandler: (err, socket) => answerClientError(err, socket),
    frameworkErrors: (error, _request, reply) => {
      sendStatus(reply as unknown as FastifyReply, errorStatus(400, error.message, 'BadRequest'));
    },
    serverFactory: (handler) => {
      // Client certificates are asked for, verified against every trusted bundle by TLS, and then
      // attributed to their bundle by the authenticator; a connection without one is still served.
      const trusted = [config.security?.clientCa, config.security?.requestHeader?.caPem].filter((b): b is Buffer => b !== undefined);
      const clientCerts = trusted.length > 0 ? { ca: trusted, requestCert: true, rejectUnauthorized: false } : {};
      const guarded = (req: IncomingMessage, res: ServerResponse): void => {
        // Pipelined behind a request whose answer ends the connection: never served (in-flight-responses.ts).
        if (inFlight.isClosing(req.socket)) return;
        inFlight.track(req, res);
        // A body that cannot be framed: whoever answers it (the proxy's own paths too), the connection
        // ends after that answer, since what follows cannot be read as the client meant it.
        if ('refuse' in requestFraming(req.headers)) res.shouldKeepAlive = false;
        if (!res.shouldKeepAlive || !isOriginForm(req.url)) inFlight.markClosing(req.socket);
        if (isOriginForm(req.url)) return handler(req, res);
        const body = JSON.stringify(notOriginFormStatus());
        res.writeHead(400, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
        res.end(body);
      };
      // Node's own timeouts, set here because Fastify's options do not reach a server it did not make.
      const timeouts = { headersTimeout: options.headersTimeoutMs ?? HEADERS_TIMEOUT_MS, requestTimeout: 0, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS };
      const server = config.tls
        ? createHttpsServer({ cert: config.tls.cert, key: config.tls.key, ...clientCerts, ...timeouts }, guarded)
        : createHttpServer(timeouts, guarded);
      // An https.Server takes the http.Server settings as properties only.
      Object.assign(server, { headersTimeout: timeouts.headersTimeout, requestTimeout: 0, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS });
      // https.Server is a tls.Server, not an http.Server, but offers the same events Fastify uses.
      return server as unknown as Server;
    },
  });

  app.addHook('onResponse', async (request, reply) => {
    // Hijacked upgrade replies never finish; their outcome is counted by the upgrade handler.
    metrics.incHttpRequest(handlerOf(request.raw.url), reply.statusCode);
  });
  // Upgrade sockets leave the HTTP server's bookkeeping but still hold the listener open.
  const upgradeSockets = new Set<Duplex>();
  app.addHook('onSend', async (_request, reply) => {
    // While draining, keep-alive clients should reconnect (to another replica) for their next request.
    if (sessions.draining) reply.header('connection', 'close');
  });
  app.addHook('preClose', async () => {
    closing = true;
    for (const socket of upgradeSockets) socket.destroy();
    // Streams in flight (watches) would hold close() open as well.
    (app.server as Server).closeAllConnections?.();
  });
  app.addHook('onClose', async () => {
    primary?.close();
  });
  if (options.configure) await options.configure(app);

  const security = config.security;
  const aggregation = config.aggregation;
  const needsApi = security !== undefined && (security.authn === 'impersonate' || security.upstreamMode === 'kubelet' || aggregation !== undefined);
  const api = needsApi ? (options.apiClient ?? createProxyApiClient(security.apiKubeConfig)) : undefined;
  for (const warning of security?.warnings ?? []) app.log.warn({}, warning);
  if (security?.jwt && security.authn === 'impersonate') {
    // Loaded only when configured: without JWT authentication the proxy never loads jose or the CEL engine.
    const [{ startJwtAuthentication }, { createJwtMetrics }] = await Promise.all([import('./auth/jwt-authentication.js'), import('./auth/jwt-metrics.js')]);
    const metrics = createJwtMetrics(registry, { apiserverId: `kube-stream-proxy-${hostname()}` });
    try {
      jwt = await startJwtAuthentication(security.jwt, { logger: app.log, metrics });
    } catch (e) {
      await app.close();
      throw e;
    }
    const started = jwt;
    app.addHook('onClose', async () => started.close());
  }
  const requestHeader = security?.requestHeader;
  const lower = (xs: readonly string[]): string[] => xs.map((x) => x.toLowerCase());
  // The Origin policy comes first: a refused WebSocket upgrade costs no TokenReview and reaches no upstream.
  app.addHook(
    'onRequest',
    createWebSocketOriginHook({ allowed: config.websocketAllowedOrigins ?? DEFAULT_WEBSOCKET_ALLOWED_ORIGINS }),
  );
  // A streaming request's query, as the upstream will read it (or 400), before anything reads it.
  app.addHook('onRequest', createStreamQueryHook());
  const kubeletLocator = api && security?.kubelet ? new KubeletLocator(api, security.kubelet, app.log) : undefined;
  if (kubeletLocator) app.addHook('onClose', async () => kubeletLocator.close());
  const aggregator = aggregation ? startAggregator(aggregation, { authn: security?.authn ?? 'passthrough', registry, app, ...(api ? { api } : {}), ...options.aggregatorIntervals }) : undefined;
  // Every request that goes upstream gets its route here (src/routing/), after authentication.
  const resolvers: RouteResolver[] = [];
  let agentListener: AgentListener | undefined;
  let agents: AgentRegistry | undefined;
  if (config.agents) {
    // Clusters behind agents come first: a /clusters/NAME request never reaches the primary upstream.
    const registry = new AgentRegistry(metrics);
    agents = registry;
    resolvers.push(new ClusterResolver({ registry, metrics, authn: security?.authn ?? 'passthrough' }));
    agentListener = new AgentListener({ ...config.agents, registry, metrics, log: app.log, authn: security?.authn ?? 'passthrough' });
    const listener = agentListener;
    app.addHook('onClose', async () => {
      await Promise.all([listener.close(), registry.closeAll(AGENT_TUNNEL_CLOSE_GRACE_MS)]);
    });
  }
  if (aggregator) resolvers.push(aggregator);
  if (kubeletLocator) resolvers.push(kubeletLocator);
  const router = new Router({ ...(primary ? { upstream: primary } : {}), authn: security?.authn ?? 'passthrough', resolvers });
  // Authentication, then routing. The reviews of impersonate mode go where the route leads: the
  // router says before authentication which cluster reviews the caller (Router.reviewsFor).
  const reviewersOf = reviewersPerCluster({
    ...(security?.clientCa ? { clientCa: parseCertificateBundle(security.clientCa) } : {}),
    ...(requestHeader ? { requestHeader } : {}),
    ...(jwt ? { jwt } : {}),
    ...(jwt?.anonymous ? { anonymous: jwt.anonymous } : {}),
  });
  app.addHook(
    'onRequest',
    createRequestAuthHook({
      mode: security?.authn ?? 'passthrough',
      // Front-proxy lines are never forwarded: the defaults always, plus any configured names.
      requestHeaderNames: lower([...DEFAULT_USERNAME_HEADERS, ...DEFAULT_UID_HEADERS, ...DEFAULT_GROUP_HEADERS, ...(requestHeader?.usernameHeaders ?? []), ...(requestHeader?.groupHeaders ?? [])]),
      requestHeaderPrefixes: lower([...DEFAULT_EXTRA_HEADER_PREFIXES, ...(requestHeader?.extraHeaderPrefixes ?? [])]),
      isOwnRequest,
      ...(config.websocketAllowedOrigins ? { allowedOrigins: config.websocketAllowedOrigins } : {}),
      createForWebSocketUpgrade: config.featureGates.AuthorizePodWebsocketUpgradeCreatePermission,
      ...(api && security?.authn === 'impersonate'
        ? {
            ...reviewersOf(api),
            // A request whose route leads to another cluster (behind an agent) is reviewed there.
            reviewersFor: (req: IncomingMessage) => {
              const placed = router.reviewsFor(req);
              return placed && 'reviews' in placed ? reviewersOf(placed.reviews) : placed;
            },
          }
        : {}),
    }),
  );
  const fallback: Route = primary ?? unavailableRoute('no default upstream');
  app.addHook('onRequest', router.hook(isOwnRequest));

  // Session recording (docs/recording.md): the policy and the sink, asked by the pod streaming routes.
  const recording = config.recording ? await startServerRecording(config.recording, registry, app.log) : undefined;
  if (recording) app.addHook('onClose', async () => recording.close());
  const deps: HandlerDeps = {
    ...(recording ? { recorder: recording.recorder } : {}),
    upgradeProxy: new UpgradeAwareProxy({
      upstream: fallback,
      maxBytesPerSec: config.maxConnectionBytesPerSec,
      responseTimeoutMs: config.upgradeResponseTimeoutMs,
    }),
    upstream: fallback,
    metrics,
    sessions,
    featureGates: config.featureGates,
    upstreamStreaming: config.upstreamStreaming ?? DEFAULT_UPSTREAM_STREAMING,
    streamingMemory: new UpstreamStreamingMemory(),
    proto: config.tls ? 'https' : 'http',
    maxConnectionBytesPerSec: config.maxConnectionBytesPerSec,
    upgradeResponseTimeoutMs: config.upgradeResponseTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
  };
  await app.register(healthRoutes, { registry, readiness });
  await app.register(execRoutes, deps);
  await app.register(attachRoutes, deps);
  await app.register(portforwardRoutes, deps);
  if (aggregator && aggregation && primary) {
    const discovery = new DiscoveryService(primary, aggregator, app.log);
    aggregation.apiServices.on('change', () => discovery.setAPIServices(aggregator.list()));
    app.addHook('onClose', async () => discovery.close());
    await app.register(apiServiceRoutes, { aggregator });
    await app.register(discoveryRoutes, { ...deps, discovery });
  }
  await app.register(reverseProxyRoutes, deps);

  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // Node removed its own listeners from the socket; without one, a reset would be uncaught.
    socket.on('error', (err) => app.log.debug({ err }, 'client socket error'));
    // Pipelined behind a request whose answer ends the connection: closed once that answer is written.
    if (inFlight.isClosing(socket)) return inFlight.whenIdle(socket, () => socket.destroy());
    // Pipelined behind plain requests: answer only once their answers are written.
    inFlight.whenIdle(socket, () => onUpgrade(req, socket, head));
  });
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    if (!isOriginForm(req.url)) {
      closeAfterAnswer(socket, notOriginFormStatus());
      return;
    }
    // Node skips its Host check (requireHostHeader) for upgrade requests; Go's net/http does not.
    if (req.httpVersion === '1.1' && req.headers.host === undefined) {
      closeAfterAnswer(socket, errorStatus(400, 'missing required Host header', 'BadRequest'));
      return;
    }
    // After the head an upgrade's bytes belong to the new protocol. A request that also announces a
    // body is ambiguous, and Node's parser disagrees with itself about it: Node 20 hands the bytes
    // after a chunked upgrade head to the socket, Node 26 keeps parsing them as the chunked body and
    // they are lost. Refuse it on every runtime rather than lose or misread the client's frames.
    const length = req.headers['content-length'];
    if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length.trim() !== '0')) {
      closeAfterAnswer(socket, errorStatus(400, 'an upgrade request must not carry a body (Transfer-Encoding or a non-zero Content-Length)', 'BadRequest'));
      return;
    }
    upgradeSockets.add(socket);
    socket.once('close', () => upgradeSockets.delete(socket));
    rememberUpgrade(req, { socket, head });
    const res = new ServerResponse(req);
    res.assignSocket(socket as Socket);
    // If a hook or handler answers through Fastify instead of hijacking, close after that answer.
    res.once('finish', () => closeAfterAnswer(socket));
    app.routing(req, res);
  };
  states.set(app, { sessions, ...(agentListener ? { agentListener } : {}), ...(agents ? { agents } : {}) });
  return app;
}

/** Resolves after `ms` or when `done` settles, whichever is first; the timer never holds the process. */
async function raceTimeout(done: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  try {
    return await Promise.race([done.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The graceful shutdown sequence of {@link RunningServer.shutdown}. */
async function shutdownApp(app: FastifyInstance, graceMs: number): Promise<ShutdownReport> {
  const { sessions, agents, agentListener } = states.get(app)!;
  sessions.startDraining();
  // Agents move to another replica now; their streams in flight finish within the grace period.
  // New tunnels are refused (503) so a reconnecting agent does not land here again.
  agentListener?.startDraining();
  agents?.goAway();
  const sessionsAtStart = sessions.size;
  app.log.info({ sessions: sessionsAtStart, graceMs }, 'shutting down: no new connections, waiting for streaming sessions');
  // Stop accepting; idle keep-alive connections are closed, busy ones finish their request.
  (app.server as Server).close();
  let sessionsStopped = 0;
  if (!(await raceTimeout(sessions.whenIdle(), graceMs))) {
    sessionsStopped = sessions.stopAll();
    app.log.info({ sessions: sessionsStopped }, 'grace period over: ending the remaining streaming sessions');
    await raceTimeout(sessions.whenIdle(), SHUTDOWN_FINISH_WAIT_MS);
  }
  await app.close();
  app.log.info({ sessionsAtStart, sessionsStopped }, 'shut down');
  return { sessionsAtStart, sessionsStopped };
}

/** Build and listen. Resolves once the listener is bound. */
export async function startServer(config: ProxyConfig, options: ServerOptions = {}): Promise<RunningServer> {
  const app = await buildServer(config, options);
  await app.listen({ host: config.listen.host, port: config.listen.port });
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `${config.tls ? 'https' : 'http'}://${host}:${address.port}`;
  const agentListener = states.get(app)?.agentListener;
  const agents = states.get(app)?.agents;
  let agentUrl: string | undefined;
  if (agentListener) {
    try {
      agentUrl = `${config.agents?.tls ? 'https' : 'http'}://${await agentListener.listen()}`;
    } catch (e) {
      await app.close();
      throw e;
    }
  }
  let shuttingDown: Promise<ShutdownReport> | undefined;
  return {
    url,
    ...(agentUrl ? { agentUrl } : {}),
    ...(agents ? { agents } : {}),
    app,
    get draining() {
      return shuttingDown !== undefined;
    },
    close: async () => {
      await app.close();
    },
    shutdown: (graceMs: number) => (shuttingDown ??= shutdownApp(app, graceMs)),
  };
}
