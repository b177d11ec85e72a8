/**
 * The `nodes/proxy` subresource of the dev cluster: `GET /api/v1/nodes/<node>/proxy/<path>` is how a
 * client with API access reaches a kubelet through kube-apiserver. The dev cluster's "kubelet"
 * answers `metrics/resource` there (the resource metrics metrics-server scrapes) and `metrics` (its
 * `kubelet_websocket_streaming_requests_total`, as `kubectl get --raw /api/v1/nodes/NODE/proxy/metrics`
 * reads a real kubelet's); any other path gets a 404 Status.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorStatus, notFoundStatus } from '../../src/status.js';
import { sendMetricsText, sendStatus } from './http-json.js';
import type { NodeInfo } from './nodes.js';
import type { ResourceMetricsCollector } from './resource-metrics.js';
import { renderResourceMetrics } from './resource-metrics-text.js';

/** What the node proxy needs. */
export interface NodeProxyDeps {
  node: () => NodeInfo;
  collector: ResourceMetricsCollector;
  /** The kubelet's `/metrics` text. */
  kubeletMetrics: () => string;
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
    const path = rest.replace(/\/+$/, '');
    if (path !== '/metrics/resource' && path !== '/metrics') {
      sendStatus(res, errorStatus(404, `the dev cluster's kubelet serves only /metrics and /metrics/resource through nodes/proxy, not ${rest}`));
      return true;
    }
    sendMetricsText(req, res, path === '/metrics' ? deps.kubeletMetrics : async () => renderResourceMetrics(await deps.collector.collect()));
    return true;
  };
}
