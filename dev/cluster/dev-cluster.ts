/**
 * The embedded development cluster: one HTTP (or HTTPS) server that answers what kubectl needs of a
 * kube-apiserver (legacy discovery, namespaces, pods with watch, the node, services, endpointslices,
 * events, self reviews, Table printing) and serves pods/exec, pods/attach and pods/portforward as
 * kube-apiserver and its kubelet of the versions it plays do (`cluster-versions.ts`; default 1.36 for
 * both): a 1.36 kubelet serves WebSocket v5 and the port-forward tunnel itself and declares
 * `ExtendWebSocketsToKubelet`, and the apiserver passes WebSockets to it; an older kubelet speaks
 * SPDY/3.1 and the legacy WebSocket protocols only, and the apiserver translates for it
 * (`apiserver-streaming.ts`). Behind the kubelet a runtime streaming server speaks SPDY
 * (`runtime-streaming-server.ts`). Pods run REAL local processes, each in its own working directory.
 * `/metrics` (API) and the kubelet's `/metrics` tell which way each WebSocket session went.
 *
 * Optionally, for security tests: static token authentication, a policy-file authorizer,
 * impersonation, TokenReview/SubjectAccessReview, and a separate mTLS kubelet listener. Without
 * those options there is no authentication at all.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { writeRawStatus } from '../../src/wire/http-response.js';
import { AccessControl, type AccessDecision } from './access-control.js';
import { DevClusterRuntime } from './cluster-runtime.js';
import { clusterVersions, declaredFeatures, gitVersion, kubeletServesWebSockets, type ClusterVersions } from './cluster-versions.js';
import { createCoreApiHandler } from './core-api.js';
import { createObjectResources, type DevClusterServiceSeed } from './cluster-objects.js';
import { kubernetesServiceSeed } from './services.js';
import { sendMetricsText, sendStatus } from './http-json.js';
import { startKubeletServer, type KubeletServer } from './kubelet-server.js';
import { createNodeProxyHandler } from './node-proxy.js';
import { NODE_NAME, type NodeInfo } from './nodes.js';
import { ALWAYS_ALLOW, PolicyAuthorizer } from './policy.js';
import { PodRegistry } from './pod-registry.js';
import { RequestLog, type RecordedRequest } from './request-log.js';
import { ResourceMetricsCollector } from './resource-metrics.js';
import { KubeletStreams } from './kubelet-streams.js';
import { RuntimeStreamingServer } from './runtime-streaming-server.js';
import { RuntimeTranslation } from './runtime-translation.js';
import { createUpgradeHandler } from './stream-routes.js';
import { ApiserverStreamingMetrics, KubeletStreamingMetrics } from './streaming-metrics.js';
import { StaticTokenAuthenticator } from './token-auth.js';
import { chosenProtocols } from './ws-subprotocol.js';

export type { DevClusterServiceSeed };

/** Serving certificate and key (PEM). */
export interface DevClusterTlsOptions {
  cert: Buffer;
  key: Buffer;
}

/** The kubelet listener (HTTPS, client certificates required). */
export interface DevClusterKubeletOptions {
  /** Listen host (default: the API's host). Its IP is the node's InternalIP. */
  host?: string;
  /** Listen port (default 0: a free port). */
  port?: number;
  /** Serving certificate and key; the SAN must cover the address clients dial. */
  tls: DevClusterTlsOptions;
  /** PEM CA bundle: only client certificates it issued pass the TLS handshake. */
  clientCa: Buffer;
}

/** Options of {@link startDevCluster}. */
export interface DevClusterOptions {
  /** Listen host (default 127.0.0.1). */
  host?: string;
  /** Listen port (default 0: a free port). */
  port?: number;
  /** Extra pods in namespace "default"; "demo" always exists. */
  pods?: string[];
  /**
   * Services that exist from the start, each with an EndpointSlice when it has `endpoints`, e.g.
   * `{ namespace: 'kube-system', name: 'metrics-server', ports: [{ name: 'https', port: 443, targetPort: 4443 }],
   * endpoints: [{ address: '127.0.0.1' }] }`.
   */
  services?: DevClusterServiceSeed[];
  /** Folder for the pods' working directories (default: a new temp folder, removed on close). */
  dataDir?: string;
  /** Serve the API over HTTPS with this certificate (the URL becomes `https://`). */
  tls?: DevClusterTlsOptions;
  /**
   * kube-apiserver `--token-auth-file` CSV (`token,user,uid,"group1,group2"`). When set, anonymous
   * access is off: every API request needs a valid `Authorization: Bearer` token (else 401), and the
   * authentication.k8s.io/authorization.k8s.io review APIs are served.
   */
  tokenAuthFile?: string;
  /** JSON policy (see `policy.ts`); needs {@link tokenAuthFile}. Without it, authenticated users may do anything. */
  authorizationPolicyFile?: string;
  /** Start a kubelet listener as well. */
  kubelet?: DevClusterKubeletOptions;
  /** Called for every request on arrival (API and kubelet, upgrades included). */
  onRequest?: (request: RecordedRequest) => void;
  /**
   * The kube-apiserver version played, `1.N` (`v1.N.P` too; 1.20–1.38, default 1.36): how pod
   * streaming WebSockets are routed (`apiserver-streaming.ts`: ≤ 1.29 none translated, 1.30 v5, ≥ 1.31
   * the tunnel too, ≥ 1.36 passed to a node that declares `ExtendWebSocketsToKubelet`) and `/version`.
   */
  apiserverVersion?: string;
  /**
   * The kubelet version played (default: the apiserver's; not newer than it). ≥ 1.36 ("modern"): it
   * serves v5 exec/attach and the tunnel itself and its Node declares `ExtendWebSocketsToKubelet`; older:
   * SPDY and the legacy WebSocket protocols only. Also the Node's `nodeInfo.kubeletVersion`.
   */
  kubeletVersion?: string;
  /** Answer WebSocket v5 and tunnel upgrades to pods 403 with a Status before any 101 (OpenShift-like). */
  refuseWebSocketStreaming?: boolean;
  /** Answer SPDY/3.1 upgrades to pods 403 with a Status (a WebSocket-only gateway). */
  refuseSpdyStreaming?: boolean;
}

/** The streaming counters of a dev cluster (also on `/metrics` of the API and of the kubelet). */
export interface DevClusterMetrics {
  apiserver: ApiserverStreamingMetrics;
  kubelet: KubeletStreamingMetrics;
}

/** A running dev cluster. */
export interface DevCluster {
  /** Base URL, e.g. http://127.0.0.1:6444 (https with {@link DevClusterOptions.tls}). */
  url: string;
  port: number;
  /** The kubelet listener's base URL, e.g. https://127.0.0.1:10250 (with {@link DevClusterOptions.kubelet}). */
  kubeletUrl?: string;
  /** The kubelet listener's port. */
  kubeletPort?: number;
  /** The node every pod runs on (`dev-node`). */
  nodeName: string;
  /** Every request that arrived, oldest first (the last 10 000); entries get `user` once known. */
  requests: RecordedRequest[];
  /** The folder holding the pods' working directories. */
  dataDir: string;
  /** The pod store (for tests: create, delete, inspect processes). */
  pods: PodRegistry;
  /** Close-tracking shared with the streaming handlers. */
  runtime: DevClusterRuntime;
  /** The apiserver and kubelet versions played (minor numbers of 1.x). */
  versions: ClusterVersions;
  /** The streaming counters. */
  metrics: DevClusterMetrics;
  /** Kill all processes, close all sockets and the server; resolves when everything is gone. */
  close(): Promise<void>;
}

/** The pod that always exists (namespace default, container "demo", `/bin/sh` on stdin). */
export const DEMO_POD = 'demo';

/** The IP a node address shows for a listen host (wildcards and `localhost` become loopback). */
function addressFor(host: string): string {
  if (host === '' || host === '0.0.0.0' || host === 'localhost') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}

/** Start a dev cluster; resolves once it (and its kubelet listener) listens. */
export async function startDevCluster(options: DevClusterOptions = {}): Promise<DevCluster> {
  const host = options.host ?? '127.0.0.1';
  const versions = clusterVersions(options.apiserverVersion, options.kubeletVersion);
  if (options.authorizationPolicyFile !== undefined && options.tokenAuthFile === undefined) {
    throw new Error('dev cluster: authorizationPolicyFile needs tokenAuthFile (there is no user to authorize)');
  }
  // Read both files first, so a bad one fails before anything listens or any process starts.
  const authenticator = options.tokenAuthFile !== undefined ? StaticTokenAuthenticator.fromFile(options.tokenAuthFile) : undefined;
  const authorizer = options.authorizationPolicyFile !== undefined ? PolicyAuthorizer.fromFile(options.authorizationPolicyFile) : ALWAYS_ALLOW;
  const access = authenticator ? new AccessControl(authenticator, authorizer) : undefined;
  const log = new RequestLog(options.onRequest);
  const ownDataDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'kube-stream-proxy-dev-'));
  mkdirSync(dataDir, { recursive: true });

  const runtime = new DevClusterRuntime();
  const registry = new PodRegistry(dataDir);
  const objects = createObjectResources(registry, options.services ?? []);
  const wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    perMessageDeflate: false,
    maxPayload: 32 * 1024 * 1024, // x/net/websocket's DefaultMaxPayloadBytes
    handleProtocols: (_offered: Set<string>, req: IncomingMessage) => chosenProtocols.get(req) || false,
  });
  let address = `${host}:0`;
  let kubelet: KubeletServer | undefined;
  const node = (): NodeInfo => ({
    name: NODE_NAME,
    internalIP: addressFor(options.kubelet?.host ?? host),
    kubeletPort: kubelet?.port ?? 0,
    kubeletVersion: gitVersion(versions.kubelet),
    declaredFeatures: declaredFeatures(versions.kubelet),
  });
  const coreApi = createCoreApiHandler({
    registry,
    serverAddress: () => address,
    node,
    objects: objects.resources,
    authorizer,
    reviews: authenticator ? { authenticator, authorizer } : undefined,
    apiserverMinor: versions.apiserver,
  });
  const metrics: DevClusterMetrics = { apiserver: new ApiserverStreamingMetrics(), kubelet: new KubeletStreamingMetrics() };
  const nodeProxy = createNodeProxyHandler({ node, collector: new ResourceMetricsCollector(registry), kubeletMetrics: () => metrics.kubelet.exposition() });
  // The runtime's streaming server listens first: both translators dial it.
  const streaming = await RuntimeStreamingServer.start(runtime, wss);
  const kubeletStreams = new KubeletStreams({
    servesWebSockets: kubeletServesWebSockets(versions.kubelet),
    wss,
    translation: new RuntimeTranslation(streaming, runtime),
    metrics: metrics.kubelet,
    cluster: runtime,
  });
  const upgradeHandler = createUpgradeHandler({
    registry,
    cluster: runtime,
    kubelet: kubeletStreams,
    declaredFeatures: () => node().declaredFeatures,
    policy: { apiserverMinor: versions.apiserver, refuseWebSocketStreaming: options.refuseWebSocketStreaming, refuseSpdyStreaming: options.refuseSpdyStreaming },
    translation: new RuntimeTranslation(streaming, runtime, {
      translator: (code) => metrics.apiserver.incStreamTranslatorRequest(code),
      tunnel: (code) => metrics.apiserver.incStreamTunnelRequest(code),
    }),
    metrics: metrics.apiserver,
  });
  /** Authenticate and authorize (when on), noting the effective user on the log entry. */
  const admit = (entry: RecordedRequest, req: IncomingMessage): AccessDecision | undefined => {
    if (!access) return undefined;
    const decision = access.check(req);
    if (decision.user) {
      entry.user = decision.user.name;
      entry.groups = decision.user.groups;
    }
    return decision;
  };
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const decision = admit(log.record('api', req, false), req);
    if (decision && !decision.ok) return sendStatus(res, decision.status);
    if (nodeProxy(req, res)) return;
    if (new URL(req.url ?? '/', 'http://dev-cluster').pathname === '/metrics') return sendMetricsText(req, res, () => metrics.apiserver.exposition());
    coreApi(req, res, decision?.user);
  };
  const server: Server = options.tls
    ? createHttpsServer({ cert: options.tls.cert, key: options.tls.key, ALPNProtocols: ['http/1.1'] }, onRequest)
    : createServer(onRequest);
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const decision = admit(log.record('api', req, true), req);
    if (decision && !decision.ok) {
      socket.on('error', () => undefined);
      runtime.track(socket);
      return writeRawStatus(socket, decision.status);
    }
    upgradeHandler(req, socket, head);
  });
  server.on('connection', (socket: Socket) => runtime.track(socket));
  server.on('clientError', (_err, socket) => socket.destroy());

  for (const name of new Set([DEMO_POD, ...(options.pods ?? [])])) registry.create({ name, namespace: 'default' });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    if (options.kubelet) {
      kubelet = await startKubeletServer({
        host: options.kubelet.host ?? host,
        port: options.kubelet.port ?? 0,
        tls: { ...options.kubelet.tls, clientCa: options.kubelet.clientCa },
        registry,
        cluster: runtime,
        streams: kubeletStreams,
        metrics: metrics.kubelet,
        log,
      });
    }
  } catch (err) {
    if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    await streaming.close();
    await registry.stopAll();
    if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const port = (server.address() as { port: number }).port;
  // Like every cluster, `default/kubernetes` points at the API server (known once it listens).
  if (!objects.resources.services!.store.get('default', 'kubernetes')) objects.seed(kubernetesServiceSeed(addressFor(host), port));
  const urlHost = host.includes(':') ? `[${host}]` : host;
  address = `${urlHost}:${port}`;

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      const servers = kubelet ? [server, kubelet.server] : [server];
      const serversClosed = servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())));
      for (const s of servers) s.closeAllConnections();
      await Promise.all([registry.stopAll(), runtime.shutdown()]);
      await Promise.all([...serversClosed, streaming.close()]);
      if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
    })();
    return closing;
  };

  return {
    url: `${options.tls ? 'https' : 'http'}://${urlHost}:${port}`,
    port,
    kubeletUrl: kubelet?.url,
    kubeletPort: kubelet?.port,
    nodeName: NODE_NAME,
    requests: log.entries,
    dataDir,
    pods: registry,
    runtime,
    versions,
    metrics,
    close,
  };
}

