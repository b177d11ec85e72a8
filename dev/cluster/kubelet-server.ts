/**
 * The dev cluster's kubelet listener: HTTPS that requires a client certificate issued by the
 * configured CA (a missing or foreign certificate fails the TLS handshake), serving the kubelet's
 * own streaming paths (kubelet `pkg/kubelet/server/server.go`) with the same handlers the apiserver
 * look-alike hands its requests to (`kubelet-streams.ts`): SPDY/3.1 and the legacy WebSocket
 * protocols, and — for a modern kubelet (≥ 1.36) — WebSocket v5 exec/attach and the
 * `SPDY/3.1+portforward.k8s.io` tunnel:
 *
 * - `/exec/{ns}/{pod}[/{uid}]/{container}?command=…&input=1&output=1&error=1&tty=1`
 * - `/attach/{ns}/{pod}[/{uid}]/{container}?input=1&output=1&error=1&tty=1`
 * - `/portForward/{ns}/{pod}[/{uid}]` (ports from the SPDY stream headers, or `port=` for WebSocket)
 *
 * GET and POST both work. The URL's container is used as it is (no defaulting at the kubelet); an
 * unknown pod, uid or container is a 404 Status. Plain (non-upgrade) requests to these paths get
 * 400 `Upgrade request required`; `/healthz` answers `ok`; `/metrics` has
 * `kubelet_websocket_streaming_requests_total{subresource}`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { X509Certificate } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { writeRawStatus } from '../../src/wire/http-response.js';
import { errorStatus, type V1Status } from '../../src/status.js';
import type { DevClusterRuntime } from './cluster-runtime.js';
import { sendMetricsText, sendStatus } from './http-json.js';
import type { PodRegistry } from './pod-registry.js';
import type { RecordedRequest, RequestLog } from './request-log.js';
import { upgradeKind, type KubeletStreams } from './kubelet-streams.js';
import { parseKubeletStreamOptions } from './stream-options.js';
import type { KubeletStreamingMetrics } from './streaming-metrics.js';

/** A kubelet streaming path, parsed. */
export interface KubeletRoute {
  kind: 'exec' | 'attach' | 'portforward';
  namespace: string;
  pod: string;
  /** The pod uid when the path carries one. */
  uid?: string;
  /** exec/attach only. */
  container?: string;
}

/** TLS material of the kubelet listener. */
export interface KubeletTlsOptions {
  /** PEM serving certificate (its SAN must name the address clients dial). */
  cert: Buffer;
  /** PEM private key of `cert`. */
  key: Buffer;
  /** PEM CA bundle; only client certificates it issued are accepted. */
  clientCa: Buffer;
}

/** What the kubelet listener needs. */
export interface KubeletServerDeps {
  host: string;
  /** 0: a free port. */
  port: number;
  tls: KubeletTlsOptions;
  registry: PodRegistry;
  cluster: DevClusterRuntime;
  /** The kubelet's streaming endpoints. */
  streams: KubeletStreams;
  /** What `/metrics` shows. */
  metrics: KubeletStreamingMetrics;
  log: RequestLog;
}

/** A listening kubelet endpoint. */
export interface KubeletServer {
  server: Server;
  port: number;
  /** `https://127.0.0.1:10250` style base URL. */
  url: string;
}

const decode = (s: string): string => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

/** Parse a kubelet streaming path, or undefined when it is not one. */
export function parseKubeletPath(pathname: string): KubeletRoute | undefined {
  const parts = pathname.split('/').slice(1).map(decode);
  if (parts.some((p) => p === '')) return undefined;
  const [head, namespace, pod] = parts;
  if (namespace === undefined || pod === undefined) return undefined;
  if (head === 'exec' || head === 'attach') {
    if (parts.length === 4) return { kind: head, namespace, pod, container: parts[3]! };
    if (parts.length === 5) return { kind: head, namespace, pod, uid: parts[3]!, container: parts[4]! };
    return undefined;
  }
  if (head === 'portForward') {
    if (parts.length === 3) return { kind: 'portforward', namespace, pod };
    if (parts.length === 4) return { kind: 'portforward', namespace, pod, uid: parts[3]! };
  }
  return undefined;
}

/** The client certificate's CN and O values (the kubelet's x509 user and groups). */
function certificateUser(req: IncomingMessage): { user: string; groups: string[] } | undefined {
  const socket = req.socket as TLSSocket;
  const raw = socket.getPeerCertificate?.().raw;
  if (!raw || raw.length === 0) return undefined;
  const lines = new X509Certificate(raw).subject.split('\n');
  const values = (key: string): string[] => lines.filter((l) => l.startsWith(`${key}=`)).map((l) => l.slice(key.length + 1));
  return { user: values('CN')[0] ?? '', groups: values('O') };
}

function noteUser(entry: RecordedRequest, req: IncomingMessage): void {
  const who = certificateUser(req);
  if (who) {
    entry.user = who.user;
    entry.groups = who.groups;
  }
}

/** Pod and container checks shared by plain and upgrade requests: undefined when they exist. */
function lookup(deps: KubeletServerDeps, route: KubeletRoute): { status: V1Status } | { pod: NonNullable<ReturnType<PodRegistry['get']>> } {
  const pod = deps.registry.get(route.namespace, route.pod);
  if (!pod || (route.uid !== undefined && route.uid !== pod.uid)) return { status: errorStatus(404, 'pod does not exist') };
  if (route.container !== undefined && !pod.container(route.container)) {
    return { status: errorStatus(404, `container not found (${JSON.stringify(route.container)})`) };
  }
  return { pod };
}

function handleRequest(deps: KubeletServerDeps, req: IncomingMessage, res: ServerResponse): void {
  noteUser(deps.log.record('kubelet', req, false), req);
  const url = new URL(req.url ?? '/', 'https://kubelet');
  if (url.pathname === '/healthz') {
    res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': 2 });
    res.end('ok');
    return;
  }
  if (url.pathname === '/metrics') return sendMetricsText(req, res, () => deps.metrics.exposition());
  const route = parseKubeletPath(url.pathname);
  if (!route) return sendStatus(res, errorStatus(404, 'the server could not find the requested resource'));
  if (req.method !== 'GET' && req.method !== 'POST') {
    return sendStatus(res, errorStatus(405, `the server does not allow this method on the requested resource (${req.method})`));
  }
  const found = lookup(deps, route);
  if ('status' in found) return sendStatus(res, found.status);
  sendStatus(res, errorStatus(400, 'Upgrade request required'));
}

function handleUpgrade(deps: KubeletServerDeps, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  socket.on('error', () => undefined);
  deps.cluster.track(socket);
  noteUser(deps.log.record('kubelet', req, true), req);
  const url = new URL(req.url ?? '/', 'https://kubelet');
  const route = parseKubeletPath(url.pathname);
  if (!route) return writeRawStatus(socket, errorStatus(404, 'the server could not find the requested resource'));
  if (req.method !== 'GET' && req.method !== 'POST') {
    return writeRawStatus(socket, errorStatus(405, `the server does not allow this method on the requested resource (${req.method})`));
  }
  const found = lookup(deps, route);
  if ('status' in found) return writeRawStatus(socket, found.status);
  const { pod } = found;

  const kind = upgradeKind(req);
  if (!kind) return writeRawStatus(socket, errorStatus(400, `unsupported upgrade protocol "${req.headers.upgrade ?? ''}"`));
  if (route.kind === 'portforward') return deps.streams.portForward(req, socket, head, pod, url.searchParams, kind);
  const options = parseKubeletStreamOptions(route.kind, url.searchParams, route.container!);
  if (!options.ok) return writeRawStatus(socket, options.status);
  deps.streams.remoteCommand(req, socket, head, { subresource: route.kind, pod, options: options.value, cluster: deps.cluster }, kind);
}

/** Start the kubelet listener; resolves once it listens. Closing the cluster's runtime ends its sessions. */
export async function startKubeletServer(deps: KubeletServerDeps): Promise<KubeletServer> {
  const server = createServer(
    {
      cert: deps.tls.cert,
      key: deps.tls.key,
      ca: deps.tls.clientCa,
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ['http/1.1'],
    },
    (req, res) => handleRequest(deps, req, res),
  );
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    try {
      handleUpgrade(deps, req, socket, head);
    } catch (err) {
      writeRawStatus(socket, errorStatus(500, `Internal error occurred: ${String(err)}`));
    }
  });
  server.on('connection', (socket: Socket) => deps.cluster.track(socket));
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.port, deps.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;
  const urlHost = deps.host.includes(':') ? `[${deps.host}]` : deps.host;
  return { server, port, url: `https://${urlHost}:${port}` };
}
