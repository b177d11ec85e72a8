/**
 * dev-metrics: a `metrics.k8s.io/v1beta1` extension API server for the embedded dev setup, in the
 * role metrics-server plays in a cluster. It scrapes the cluster's kubelet resource metrics through
 * `nodes/proxy` (`scraper.ts`), keeps windowed points (`metrics-store.ts`) and serves PodMetrics and
 * NodeMetrics with discovery of its own (`api-handler.ts`). Over HTTPS it can be registered as an
 * APIService backend (its certificate needs the SAN `<service>.<namespace>.svc` the aggregator
 * dials, e.g. `metrics-server.kube-system.svc`); with request-header settings it accepts only a
 * front proxy's client certificate and takes the user from `X-Remote-*` (`front-proxy-auth.ts`).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { parseCertificateBundle } from '../../src/auth/client-certificate.js';
import {
  DEFAULT_EXTRA_HEADER_PREFIXES,
  DEFAULT_GROUP_HEADERS,
  DEFAULT_USERNAME_HEADERS,
  type RequestHeaderConfig,
} from '../../src/auth/request-header.js';
import { encodeStatus } from '../../src/status.js';
import { createApiHandler } from './api-handler.js';
import { ClusterClient } from './cluster-client.js';
import { authenticateFrontProxy } from './front-proxy-auth.js';
import { MetricsStore } from './metrics-store.js';
import { MetricsScraper } from './scraper.js';

/** How often the kubelets are scraped by default: the first figures come this long after start. */
export const DEFAULT_SCRAPE_INTERVAL_MS = 2_000;

/**
 * The longest window usage is averaged over by default: metrics-server's default
 * `--metric-resolution` (its scrape interval, hence its window).
 */
export const DEFAULT_METRIC_RESOLUTION_MS = 15_000;

/** Front-proxy authentication settings (kube-apiserver's `--requestheader-*` flags). */
export interface DevMetricsRequestHeaderOptions {
  /** PEM CA bundle that front-proxy client certificates must chain to. */
  clientCa: Buffer;
  /** CommonNames allowed (empty or absent: any certificate of the CA). */
  allowedNames?: string[];
  usernameHeaders?: string[];
  groupHeaders?: string[];
  extraHeaderPrefixes?: string[];
}

/** Options of {@link startDevMetrics}. */
export interface DevMetricsOptions {
  /** Listen host (default 127.0.0.1). */
  host?: string;
  /** Listen port (default 0: a free port). */
  port?: number;
  /** The cluster's API base URL (the dev cluster's URL). */
  cluster: string;
  /** Bearer token file for the cluster. */
  clusterTokenFile?: string;
  /** PEM CA bundle for an https cluster URL. */
  clusterCa?: Buffer;
  /** Serve HTTPS with this certificate and key. */
  tls?: { cert: Buffer; key: Buffer };
  /** Authenticate front proxies (needs {@link tls}). */
  requestHeader?: DevMetricsRequestHeaderOptions;
  /** Scrape period (default {@link DEFAULT_SCRAPE_INTERVAL_MS}). */
  scrapeIntervalMs?: number;
  /** Longest window (default {@link DEFAULT_METRIC_RESOLUTION_MS}). */
  metricResolutionMs?: number;
  /** Called for every request once it was authenticated (or refused). */
  onRequest?: (request: DevMetricsRequest) => void;
}

/** One request as dev-metrics saw it. */
export interface DevMetricsRequest {
  method: string;
  url: string;
  /** With request-header authentication: the user the front proxy asserted. */
  user?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
  /** The verified front-proxy certificate's CommonName. */
  frontProxy?: string;
  /** Why it was refused with 401, when it was. */
  refused?: string;
}

/** A running dev-metrics. */
export interface DevMetrics {
  /** Base URL (https with TLS). */
  url: string;
  port: number;
  /** Every request, oldest first (the last 10 000). */
  requests: DevMetricsRequest[];
  /** The scrape loop (for tests: `rounds`, `last`, the `scrape` event). */
  scraper: MetricsScraper;
  /** Stop scraping and close the server. */
  close(): Promise<void>;
}

const REQUEST_LOG_LIMIT = 10_000;

/** Paths answered without authentication, as metrics-server lets kubelet probes reach them. */
const HEALTH_PATHS = new Set(['/healthz', '/livez', '/readyz']);

/** Start dev-metrics; resolves once it listens (the first scrape is then under way). */
export async function startDevMetrics(options: DevMetricsOptions): Promise<DevMetrics> {
  const host = options.host ?? '127.0.0.1';
  if (options.requestHeader && !options.tls) throw new Error('dev-metrics: request-header authentication needs TLS (client certificates)');
  const requestHeader: RequestHeaderConfig | undefined = options.requestHeader && {
    ca: parseCertificateBundle(options.requestHeader.clientCa),
    allowedNames: options.requestHeader.allowedNames ?? [],
    usernameHeaders: options.requestHeader.usernameHeaders?.length ? options.requestHeader.usernameHeaders : DEFAULT_USERNAME_HEADERS,
    groupHeaders: options.requestHeader.groupHeaders?.length ? options.requestHeader.groupHeaders : DEFAULT_GROUP_HEADERS,
    extraHeaderPrefixes: options.requestHeader.extraHeaderPrefixes?.length ? options.requestHeader.extraHeaderPrefixes : DEFAULT_EXTRA_HEADER_PREFIXES,
  };
  const client = new ClusterClient({ url: options.cluster, tokenFile: options.clusterTokenFile, ca: options.clusterCa });
  const store = new MetricsStore(options.metricResolutionMs ?? DEFAULT_METRIC_RESOLUTION_MS);
  const scraper = new MetricsScraper(client, store, options.scrapeIntervalMs ?? DEFAULT_SCRAPE_INTERVAL_MS);
  const api = createApiHandler({
    store,
    pods: () => scraper.pods,
    nodes: () => scraper.nodes,
    ready: () => scraper.rounds > 0 && scraper.last!.errors.length === 0,
  });
  const requests: DevMetricsRequest[] = [];
  const record = (r: DevMetricsRequest): void => {
    requests.push(r);
    if (requests.length > REQUEST_LOG_LIMIT) requests.shift();
    options.onRequest?.(r);
  };
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const entry: DevMetricsRequest = { method: req.method ?? 'GET', url: req.url ?? '/' };
    if (requestHeader && !HEALTH_PATHS.has(new URL(entry.url, 'http://dev-metrics').pathname)) {
      const auth = authenticateFrontProxy(req, requestHeader);
      if (!auth.ok) {
        entry.refused = auth.reason;
        record(entry);
        const body = encodeStatus(auth.status);
        res.writeHead(401, { 'Content-Type': 'application/json', 'Content-Length': body.length });
        return void res.end(body);
      }
      entry.user = auth.user.username;
      entry.groups = auth.user.groups;
      entry.extra = auth.user.extra;
      entry.frontProxy = auth.frontProxy;
    }
    record(entry);
    api(req, res);
  };
  const server: Server = options.tls
    ? createHttpsServer(
        {
          cert: options.tls.cert,
          key: options.tls.key,
          ALPNProtocols: ['http/1.1'],
          ...(options.requestHeader ? { requestCert: true, rejectUnauthorized: false, ca: options.requestHeader.clientCa } : {}),
        },
        onRequest,
      )
    : createServer(onRequest);
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.on('clientError', (_e, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  scraper.start();
  const port = (server.address() as { port: number }).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    url: `${options.tls ? 'https' : 'http'}://${urlHost}:${port}`,
    port,
    requests,
    scraper,
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        for (const s of sockets) s.destroy();
        await scraper.stop();
        await closed;
      })()),
  };
}
