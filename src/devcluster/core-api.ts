/**
 * The dev cluster's REST surface for non-upgrade requests: discovery, namespaces, pods (list,
 * watch, get, create, delete, log), nodes, the `Upgrade request required` answer of the streaming
 * subresources and (with token authentication) TokenReview and SubjectAccessReview. Everything is
 * plain `application/json`; errors are Status objects. Authentication and authorization happened
 * before (`access-control.ts`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorStatus, notFoundStatus, type V1Status } from '../status.js';
import {
  apiGroup,
  apiGroupList,
  apiVersions,
  coreV1Resources,
  DEV_CLUSTER_VERSION,
  REVIEW_GROUPS,
  reviewGroupResources,
  type ReviewGroup,
} from './discovery.js';
import { readJsonBody, sendJson, sendStatus } from './http-json.js';
import { nodeList, nodeObject, type NodeInfo } from './nodes.js';
import type { Authorizer } from './policy.js';
import { parsePodManifest } from './pod-manifest.js';
import { podObject } from './pod-object.js';
import type { PodRegistry } from './pod-registry.js';
import { podSelector } from './pod-selectors.js';
import { isWatch, servePodWatch } from './pod-watch.js';
import { subjectAccessReview, tokenReview } from './reviews.js';
import type { StaticTokenAuthenticator } from './token-auth.js';

export { sendJson, sendStatus };

/** When the namespaces "were created". */
const CLUSTER_START = new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/** What the review endpoints evaluate with. */
export interface ReviewDeps {
  authenticator: StaticTokenAuthenticator;
  authorizer: Authorizer;
}

/** What the REST handler needs. */
export interface CoreApiDeps {
  registry: PodRegistry;
  /** host:port clients use, for `/api`'s serverAddressByClientCIDRs. */
  serverAddress: () => string;
  /** The node pods run on (read per request: the kubelet port is known only once it listens). */
  node?: () => NodeInfo;
  /** List `nodes` in `/api/v1` discovery (a kubelet listener exists). */
  nodesInDiscovery?: boolean;
  /** Serve the authentication/authorization groups and their reviews (token authentication is on). */
  reviews?: ReviewDeps;
}

/** Build the `request` handler of the dev cluster's HTTP server. */
export function createCoreApiHandler(deps: CoreApiDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handle(deps, req, res).catch((err: unknown) => {
      if (!res.headersSent) sendStatus(res, errorStatus(500, `Internal error occurred: ${String(err)}`));
      else res.destroy();
    });
  };
}

async function handle(deps: CoreApiDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://dev-cluster');
  const path = url.pathname.replace(/\/+$/, '') || '/';
  const query = url.searchParams;
  const method = req.method ?? 'GET';
  const { registry } = deps;
  const getOnly = (body: () => unknown): void => {
    if (method !== 'GET' && method !== 'HEAD') return sendStatus(res, methodNotAllowed(method));
    sendJson(res, 200, body());
  };

  switch (path) {
    case '/version':
      return getOnly(() => DEV_CLUSTER_VERSION);
    case '/api':
      return getOnly(() => apiVersions(deps.serverAddress()));
    case '/apis':
      return getOnly(() => apiGroupList(deps.reviews !== undefined));
    case '/api/v1':
      return getOnly(() => coreV1Resources(deps.nodesInDiscovery ?? false));
    case '/api/v1/namespaces':
      return getOnly(() => ({
        kind: 'NamespaceList',
        apiVersion: 'v1',
        metadata: { resourceVersion: String(registry.resourceVersion) },
        items: [...registry.namespaces].sort().map((n) => namespaceObject(n, false)),
      }));
    case '/api/v1/pods':
      return podCollection(deps, req, res, undefined, query);
  }

  const parts = path.split('/').slice(1).map(decodeURIComponent);
  if (parts[0] === 'api' && parts[1] === 'v1' && parts[2] === 'nodes' && parts.length <= 4 && deps.node) {
    if (method !== 'GET' && method !== 'HEAD') return sendStatus(res, methodNotAllowed(method));
    const node = deps.node();
    if (parts.length === 3) {
      if (isWatch(query)) return sendStatus(res, errorStatus(405, 'the dev cluster does not serve node watches', 'MethodNotAllowed'));
      return sendJson(res, 200, nodeList(node));
    }
    if (parts[3] !== node.name) return sendStatus(res, notFoundStatus('nodes', parts[3]!));
    return sendJson(res, 200, nodeObject(node));
  }
  if (parts[0] === 'apis' && deps.reviews && (REVIEW_GROUPS as readonly string[]).includes(parts[1] ?? '')) {
    return reviewGroup(deps.reviews, parts[1] as ReviewGroup, parts.slice(2), req, res);
  }
  // ['api','v1','namespaces',ns, 'pods', name, sub]
  if (parts[0] !== 'api' || parts[1] !== 'v1' || parts[2] !== 'namespaces' || parts.length < 4) {
    return sendStatus(res, errorStatus(404, 'the server could not find the requested resource'));
  }
  const ns = parts[3]!;
  if (!registry.namespaces.has(ns)) return sendStatus(res, notFoundStatus('namespaces', ns));
  if (parts.length === 4) return getOnly(() => namespaceObject(ns, true));
  if (parts[4] !== 'pods' || parts.length > 7) {
    return sendStatus(res, errorStatus(404, 'the server could not find the requested resource'));
  }
  if (parts.length === 5) return podCollection(deps, req, res, ns, query);

  const name = parts[5]!;
  const pod = registry.get(ns, name);
  if (!pod) return sendStatus(res, notFoundStatus('pods', name));
  if (parts.length === 6) {
    if (method === 'GET' || method === 'HEAD') return sendJson(res, 200, podObject(pod));
    if (method === 'DELETE') {
      registry.delete(ns, name);
      return sendJson(res, 200, podObject(pod));
    }
    return sendStatus(res, methodNotAllowed(method));
  }
  const sub = parts[6]!;
  if (sub === 'exec' || sub === 'attach' || sub === 'portforward') {
    if (method !== 'GET' && method !== 'POST') return sendStatus(res, methodNotAllowed(method));
    return sendStatus(res, errorStatus(400, 'Upgrade request required'));
  }
  if (sub === 'log') {
    if (method !== 'GET') return sendStatus(res, methodNotAllowed(method));
    const container = query.get('container') || (pod.containers.length === 1 ? pod.containers[0]!.name : '');
    const main = pod.mains.get(container);
    if (!main) {
      const names = pod.containers.map((c) => c.name).join(' ');
      return sendStatus(res, errorStatus(400, container
        ? `container ${container} is not valid for pod ${name}`
        : `a container name must be specified for pod ${name}, choose one of: [${names}]`));
    }
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end(main.logs());
    return;
  }
  return sendStatus(res, errorStatus(404, 'the server could not find the requested resource'));
}

/** `/api/v1/pods` and `/api/v1/namespaces/{ns}/pods`: list, watch and (namespaced) create. */
async function podCollection(
  deps: CoreApiDeps,
  req: IncomingMessage,
  res: ServerResponse,
  ns: string | undefined,
  query: URLSearchParams,
): Promise<void> {
  const { registry } = deps;
  const method = req.method ?? 'GET';
  if (method === 'POST' && ns !== undefined) {
    const body = await readJsonBody(req);
    if (!body.ok) return sendStatus(res, body.status);
    const manifest = parsePodManifest(body.value, ns);
    if (!manifest.ok) return sendStatus(res, manifest.status);
    if (registry.get(ns, manifest.value.name)) {
      const name = manifest.value.name;
      return sendStatus(res, errorStatus(409, `pods "${name}" already exists`, 'AlreadyExists', { name, kind: 'pods' }));
    }
    return sendJson(res, 201, podObject(registry.create(manifest.value)));
  }
  if (method !== 'GET') return sendStatus(res, methodNotAllowed(method));
  const selector = podSelector(query);
  if (!selector.ok) return sendStatus(res, selector.status);
  if (isWatch(query)) return servePodWatch(req, res, registry, ns, selector.value, query);
  sendJson(res, 200, {
    kind: 'PodList',
    apiVersion: 'v1',
    metadata: { resourceVersion: String(registry.resourceVersion) },
    items: registry
      .list(ns)
      .filter(selector.value)
      .map((p) => podObject(p, false)),
  });
}

function namespaceObject(name: string, withKind: boolean): Record<string, unknown> {
  const obj = {
    metadata: { name, uid: `00000000-0000-4000-8000-${Buffer.from(name).toString('hex').padEnd(12, '0').slice(0, 12)}`, resourceVersion: '1', creationTimestamp: CLUSTER_START, labels: { 'kubernetes.io/metadata.name': name } },
    spec: { finalizers: ['kubernetes'] },
    status: { phase: 'Active' },
  };
  return withKind ? { kind: 'Namespace', apiVersion: 'v1', ...obj } : obj;
}

function methodNotAllowed(method: string): V1Status {
  return errorStatus(405, `the server does not allow this method on the requested resource (${method})`);
}

/** `/apis/{authentication,authorization}.k8s.io[/v1[/tokenreviews|subjectaccessreviews]]`. */
async function reviewGroup(
  deps: ReviewDeps,
  group: ReviewGroup,
  rest: string[],
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const method = req.method ?? 'GET';
  const notFound = (): void => sendStatus(res, errorStatus(404, 'the server could not find the requested resource'));
  if (rest.length === 0 || (rest.length === 1 && rest[0] === 'v1')) {
    if (method !== 'GET' && method !== 'HEAD') return sendStatus(res, methodNotAllowed(method));
    return sendJson(res, 200, rest.length === 0 ? apiGroup(group) : reviewGroupResources(group));
  }
  const resource = group === 'authentication.k8s.io' ? 'tokenreviews' : 'subjectaccessreviews';
  if (rest.length !== 2 || rest[0] !== 'v1' || rest[1] !== resource) return notFound();
  if (method !== 'POST') return sendStatus(res, methodNotAllowed(method));
  const body = await readJsonBody(req);
  if (!body.ok) return sendStatus(res, body.status);
  const answer =
    resource === 'tokenreviews' ? tokenReview(body.value, deps.authenticator) : subjectAccessReview(body.value, deps.authorizer);
  sendJson(res, answer.code, answer.body);
}
