/**
 * dev-metrics' REST surface: discovery (legacy and aggregated), `nodes` and `pods` of
 * `metrics.k8s.io/v1beta1` (list and get, namespaced and across namespaces, `labelSelector` and
 * `fieldSelector` on lists), and `/healthz`, `/livez`, `/readyz`. JSON answers; errors are Status
 * objects with metrics-server's messages. Authentication happened before (`front-proxy-auth.ts`).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { encodeStatus, errorStatus, type V1Status } from '../../src/status.js';
import { aggregatedContentType, apiGroup, apiGroupDiscoveryList, apiGroupList, apiResourceList, negotiateApisDocument } from './discovery.js';
import { parseFieldSelector, parseLabelSelector } from './label-selector.js';
import {
  metricsList,
  metricsNotFound,
  METRICS_GROUP,
  METRICS_VERSION,
  nodeMetricsObject,
  objectNotFound,
  podMetricsObject,
  type ObjectRef,
} from './metrics-objects.js';
import type { MetricsStore } from './metrics-store.js';
import { podKey } from './resource-batch.js';

/** What the handler reads. */
export interface ApiHandlerDeps {
  store: MetricsStore;
  /** Running pods by `namespace/name` and nodes by name, as last listed. */
  pods: () => ReadonlyMap<string, ObjectRef>;
  nodes: () => ReadonlyMap<string, ObjectRef>;
  /** True once metrics can be served (`/readyz`). */
  ready: () => boolean;
  now?: () => number;
}

function sendJson(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  const payload = Buffer.from(JSON.stringify(body));
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': payload.length, ...headers });
  res.end(payload);
}

function sendStatus(res: ServerResponse, status: V1Status): void {
  const payload = encodeStatus(status);
  res.writeHead(status.code ?? 500, { 'Content-Type': 'application/json', 'Content-Length': payload.length });
  res.end(payload);
}

function sendText(res: ServerResponse, code: number, text: string): void {
  res.writeHead(code, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

const notFound = (): V1Status => errorStatus(404, 'the server could not find the requested resource');

/** Build the `request` handler. */
export function createApiHandler(deps: ApiHandlerDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const now = deps.now ?? Date.now;
  return (req, res) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://dev-metrics');
    } catch {
      return sendStatus(res, errorStatus(400, 'invalid request URL'));
    }
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    if (method !== 'GET' && method !== 'HEAD') {
      return sendStatus(res, errorStatus(405, `the server does not allow this method on the requested resource (${method})`, 'MethodNotAllowed'));
    }
    switch (path) {
      case '/healthz':
      case '/livez':
        return sendText(res, 200, 'ok');
      case '/readyz':
        return deps.ready() ? sendText(res, 200, 'ok') : sendText(res, 500, '[-]metric-storage-ready failed: no metrics to serve yet\nreadyz check failed\n');
      case '/apis': {
        const version = negotiateApisDocument(req.headers.accept);
        if (version === 'legacy') return sendJson(res, 200, apiGroupList());
        const body = JSON.stringify(apiGroupDiscoveryList(version));
        const etag = `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"`;
        const headers = { 'Content-Type': aggregatedContentType(version), ETag: etag, Vary: 'Accept' };
        if (req.headers['if-none-match'] === etag) {
          res.writeHead(304, headers);
          return res.end();
        }
        res.writeHead(200, { ...headers, 'Content-Length': Buffer.byteLength(body) });
        return res.end(body);
      }
      case `/apis/${METRICS_GROUP}`:
        return sendJson(res, 200, apiGroup());
      case `/apis/${METRICS_GROUP}/${METRICS_VERSION}`:
        return sendJson(res, 200, apiResourceList());
    }
    let parts: string[];
    try {
      parts = path.split('/').slice(1).map(decodeURIComponent);
    } catch {
      return sendStatus(res, notFound());
    }
    if (parts[0] !== 'apis' || parts[1] !== METRICS_GROUP || parts[2] !== METRICS_VERSION) return sendStatus(res, notFound());
    const rest = parts.slice(3);
    if (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1') {
      return sendStatus(res, errorStatus(405, 'the server does not allow this method on the requested resource (watch)', 'MethodNotAllowed'));
    }
    if (rest[0] === 'nodes' && rest.length <= 2) return nodes(deps, res, url.searchParams, rest[1], now());
    if (rest[0] === 'pods' && rest.length === 1) return pods(deps, res, url.searchParams, undefined, undefined, now());
    if (rest[0] === 'namespaces' && rest[2] === 'pods' && rest.length <= 4 && rest[1]) {
      return pods(deps, res, url.searchParams, rest[1], rest[3], now());
    }
    return sendStatus(res, notFound());
  };
}

function nodes(deps: ApiHandlerDeps, res: ServerResponse, query: URLSearchParams, name: string | undefined, nowMs: number): void {
  const known = deps.nodes();
  if (name !== undefined) {
    const node = known.get(name);
    if (!node) return sendStatus(res, objectNotFound('node', name));
    const usage = deps.store.nodeUsage(name);
    if (!usage) return sendStatus(res, metricsNotFound('nodes', name));
    return sendJson(res, 200, nodeMetricsObject(node, usage, nowMs));
  }
  const labels = parseLabelSelector(query.get('labelSelector'));
  if (!labels.ok) return sendStatus(res, labels.status);
  const fields = parseFieldSelector(query.get('fieldSelector'));
  if (!fields.ok) return sendStatus(res, fields.status);
  const items = [...known.values()]
    .filter((n) => labels.matches(n) && fields.matches(n))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .flatMap((n) => {
      const usage = deps.store.nodeUsage(n.name);
      return usage ? [nodeMetricsObject(n, usage, nowMs, false)] : [];
    });
  sendJson(res, 200, metricsList('NodeMetricsList', items));
}

function pods(
  deps: ApiHandlerDeps,
  res: ServerResponse,
  query: URLSearchParams,
  namespace: string | undefined,
  name: string | undefined,
  nowMs: number,
): void {
  const known = deps.pods();
  if (namespace !== undefined && name !== undefined) {
    const pod = known.get(podKey(namespace, name));
    if (!pod) return sendStatus(res, objectNotFound('pod', name));
    const usage = deps.store.podUsage(namespace, name);
    if (!usage) return sendStatus(res, metricsNotFound('pods', `${namespace}/${name}`));
    return sendJson(res, 200, podMetricsObject(pod, usage, nowMs));
  }
  const labels = parseLabelSelector(query.get('labelSelector'));
  if (!labels.ok) return sendStatus(res, labels.status);
  const fields = parseFieldSelector(query.get('fieldSelector'));
  if (!fields.ok) return sendStatus(res, fields.status);
  const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
  const items = [...known.values()]
    .filter((p) => (namespace === undefined || p.namespace === namespace) && labels.matches(p) && fields.matches(p))
    .sort((a, b) => cmp(a.namespace ?? '', b.namespace ?? '') || cmp(a.name, b.name))
    .flatMap((p) => {
      const usage = deps.store.podUsage(p.namespace ?? '', p.name);
      return usage ? [podMetricsObject(p, usage, nowMs, false)] : [];
    });
  sendJson(res, 200, metricsList('PodMetricsList', items));
}
