/**
 * The `nodes/proxy` subresource of the dev cluster: `GET /api/v1/nodes/<node>/proxy/<path>` is how a
 * client with API access reaches a kubelet through kube-apiserver. The dev cluster's "kubelet"
 * answers only `metrics/resource` there (the resource metrics metrics-server scrapes); any other
 * path gets a 404 Status.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorStatus, notFoundStatus } from '../../src/status.js';
import { sendStatus } from './http-json.js';
import type { NodeInfo } from './nodes.js';
import type { ResourceMetricsCollector } from './resource-metrics.js';
import { PROMETHEUS_TEXT_CONTENT_TYPE, renderResourceMetrics } from './resource-metrics-text.js';

/** What the node proxy needs. */
export interface NodeProxyDeps {
  node: () => NodeInfo;
  collector: ResourceMetricsCollector;
}

/** `/api/v1/nodes/<name>/proxy[/<rest>]` → [name, rest], else undefined. */
export function nodeProxyTarget(url: string): [string, string] | undefined {
  const path = new URL(url, 'http://dev-cluster').pathname;
  const m = /^\/api\/v1\/nodes\/([^/]+)\/proxy(\/.*)?$/.exec(path);
  if (!m) return undefined;
  try {
    return [decodeURIComponent(m[1]!), m[2] ?? '/'];
  } catch {
    return undefined;
  }
}

/**
 * Build the handler: it answers (and returns true) for `nodes/proxy` requests, and returns false
 * for every other request, which the caller routes on.
 */
export function createNodeProxyHandler(deps: NodeProxyDeps): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    const target = nodeProxyTarget(req.url ?? '/');
    if (!target) return false;
    const [name, rest] = target;
    const node = deps.node();
    if (name !== node.name) {
      sendStatus(res, notFoundStatus('nodes', name));
      return true;
    }
    if (rest.replace(/\/+$/, '') !== '/metrics/resource') {
      sendStatus(res, errorStatus(404, `the dev cluster's kubelet serves only /metrics/resource through nodes/proxy, not ${rest}`));
      return true;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendStatus(res, errorStatus(405, `the server does not allow this method on the requested resource (${req.method})`));
      return true;
    }
    deps.collector.collect().then(
      (snapshot) => {
        const body = Buffer.from(renderResourceMetrics(snapshot));
        res.writeHead(200, { 'Content-Type': PROMETHEUS_TEXT_CONTENT_TYPE, 'Content-Length': body.length });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (err: unknown) => sendStatus(res, errorStatus(500, `Internal error occurred: ${String(err)}`)),
    );
    return true;
  };
}
