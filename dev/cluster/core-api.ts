/**
 * The dev cluster's REST surface for non-upgrade requests: discovery, namespaces, pods (list,
 * watch, get, create, delete, log with follow), nodes, services, endpointslices and events
 * (`object-api.ts`), the `Upgrade request required` answer of the streaming subresources,
 * SelfSubjectAccessReview/SelfSubjectRulesReview/SelfSubjectReview and (with token authentication) TokenReview and
 * SubjectAccessReview. Answers are `application/json`, or a meta.k8s.io Table when the client asks
 * for one (`printable-response.ts`); errors are Status objects. Authentication and authorization
 * happened before (`access-control.ts`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorStatus, notFoundStatus, type V1Status } from '../../src/status.js';
import {
  apiGroup,
  apiGroupList,
  apiVersions,
  coreV1Resources,
  devClusterVersion,
  groupResources,
  servedGroups,
  type NamedGroup,
} from './discovery.js';
import { readBody, readJsonBody, sendJson, sendStatus } from './http-json.js';
import { decodeSelfReview, PROTOBUF_MEDIA_TYPE } from './protobuf-review.js';
import { nodeList, nodeObject, type NodeInfo } from './nodes.js';
import { objectRoute, serveObjects, type ObjectResource } from './object-api.js';
import type { Authorizer } from './policy.js';
import { parsePodManifest } from './pod-manifest.js';
import { podObject } from './pod-object.js';
import type { PodRegistry } from './pod-registry.js';
import { podSelector } from './pod-selectors.js';
import { isWatch, servePodWatch } from './pod-watch.js';
import { sendPrintable, watchEventObject } from './printable-response.js';
import { NAMESPACE_PRINTER, NODE_PRINTER, POD_PRINTER } from './printers.js';
import { subjectAccessReview, tokenReview } from './reviews.js';
import { ANONYMOUS, SELF_SUBJECT_REVIEW_VERSIONS, selfSubjectAccessReview, selfSubjectReview, selfSubjectRulesReview } from './self-reviews.js';
import type { StaticTokenAuthenticator, UserInfo } from './token-auth.js';
import { serveLog } from './pod-log.js';

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
  node: () => NodeInfo;
  /** Services, endpointslices and events, by plural resource name. */
  objects: Readonly<Record<string, ObjectResource>>;
  /** Decides the self reviews (`kubectl auth can-i`). */
  authorizer: Authorizer;
  /** Serve authentication.k8s.io, TokenReview and SubjectAccessReview (token authentication is on). */
  reviews?: ReviewDeps;
  /** The kube-apiserver minor version played (`/version`). */
  apiserverMinor: number;
}

/**
 * The `request` handler of the dev cluster's HTTP server; `user` is who the request is from
 * (undefined without authentication: then the anonymous user).
 */
export type CoreApiHandler = (req: IncomingMessage, res: ServerResponse, user?: UserInfo) => void;

/** Build the `request` handler of the dev cluster's HTTP server. */
export function createCoreApiHandler(deps: CoreApiDeps): CoreApiHandler {
  return (req, res, user) => {
    handle(deps, req, res, user ?? ANONYMOUS).catch((err: unknown) => {
      if (!res.headersSent) sendStatus(res, errorStatus(500, `Internal error occurred: ${String(err)}`));
      else res.destroy();
    });
  };
}

async function handle(deps: CoreApiDeps, req: IncomingMessage, res: ServerResponse, user: UserInfo): Promise<void> {
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
      return getOnly(() => devClusterVersion(deps.apiserverMinor));
    case '/api':
      return getOnly(() => apiVersions(deps.serverAddress()));
    case '/apis':
      return getOnly(() => apiGroupList(deps.reviews !== undefined));
    case '/api/v1':
      return getOnly(() => coreV1Resources());
    case '/api/v1/namespaces':
      if (method !== 'GET' && method !== 'HEAD') return sendStatus(res, methodNotAllowed(method));
      return sendPrintable(req, res, query, NAMESPACE_PRINTER, {
        kind: 'NamespaceList',
        apiVersion: 'v1',
        metadata: { resourceVersion: String(registry.resourceVersion) },
        items: [...registry.namespaces].sort().map((n) => namespaceObject(n, false)),
      });
    case '/api/v1/pods':
      return podCollection(deps, req, res, undefined, query);
  }

  const parts = path.split('/').slice(1).map(decodeURIComponent);
  if (parts[0] === 'api' && parts[1] === 'v1' && parts[2] === 'nodes' && parts.length <= 4) {
    if (method !== 'GET' && method !== 'HEAD') return sendStatus(res, methodNotAllowed(method));
    const node = deps.node();
    if (parts.length === 3) {
      if (isWatch(query)) return serveNodeWatch(req, res, query, nodeObject(node));
      return sendPrintable(req, res, query, NODE_PRINTER, nodeList(node));
    }
    if (parts[3] !== node.name) return sendStatus(res, notFoundStatus('nodes', parts[3]!));
    return sendPrintable(req, res, query, NODE_PRINTER, nodeObject(node));
  }
  const stored = objectRoute(parts, deps.objects);
  if (stored) return serveObjects(stored, { namespaces: registry.namespaces }, req, res, query);
  if (parts[0] === 'apis' && (servedGroups(deps.reviews !== undefined) as string[]).includes(parts[1] ?? '')) {
    return namedGroup(deps, user, parts[1] as NamedGroup, parts.slice(2), req, res);
  }
  // ['api','v1','namespaces',ns, 'pods', name, sub]
  if (parts[0] !== 'api' || parts[1] !== 'v1' || parts[2] !== 'namespaces' || parts.length < 4) {
    return sendStatus(res, errorStatus(404, 'the server could not find the requested resource'));
  }
  const ns = parts[3]!;
  if (!registry.namespaces.has(ns)) return sendStatus(res, notFoundStatus('namespaces', ns));
  if (parts.length === 4) {
    if (method !== 'GET' && method !== 'HEAD') return sendStatus(res, methodNotAllowed(method));
    return sendPrintable(req, res, query, NAMESPACE_PRINTER, namespaceObject(ns, true));
  }
  if (parts[4] !== 'pods' || parts.length > 7) {
    return sendStatus(res, errorStatus(404, 'the server could not find the requested resource'));
  }
  if (parts.length === 5) return podCollection(deps, req, res, ns, query);

  const name = parts[5]!;
  const pod = registry.get(ns, name);
  if (!pod) return sendStatus(res, notFoundStatus('pods', name));
  if (parts.length === 6) {
    if (method === 'GET' || method === 'HEAD') return sendPrintable(req, res, query, POD_PRINTER, podObject(pod));
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
    return serveLog(pod, query, req, res);
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
  sendPrintable(req, res, query, POD_PRINTER, {
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

/**
 * `/apis/{group}[/v1[/{resource}]]` of the named groups that are not stored objects: discovery of
 * all three, and the reviews (self reviews always; TokenReview and SubjectAccessReview with tokens).
 */
async function namedGroup(
  deps: CoreApiDeps,
  user: UserInfo,
  group: NamedGroup,
  rest: string[],
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const method = req.method ?? 'GET';
  const notFound = (): void => sendStatus(res, errorStatus(404, 'the server could not find the requested resource'));
  if (rest.length === 0 || (rest.length === 1 && rest[0] === 'v1')) {
    if (method !== 'GET' && method !== 'HEAD') return sendStatus(res, methodNotAllowed(method));
    return sendJson(res, 200, rest.length === 0 ? apiGroup(group) : groupResources(group, deps.reviews !== undefined));
  }
  const answer = (review: (body: unknown) => { code: number; body: unknown }, protobuf = false): Promise<void> =>
    (async () => {
      if (method !== 'POST') return sendStatus(res, methodNotAllowed(method));
      const body = protobuf && isProtobuf(req) ? await readProtobufReview(req) : await readJsonBody(req);
      if (!body.ok) return sendStatus(res, body.status);
      const a = review(body.value);
      sendJson(res, a.code, a.body);
    })();
  if (group === 'authentication.k8s.io' && rest.length === 2 && rest[1] === 'selfsubjectreviews' && SELF_SUBJECT_REVIEW_VERSIONS.includes(rest[0]!)) {
    const version = rest[0]!;
    return answer((b) => selfSubjectReview(b, user, version), true);
  }
  if (rest.length !== 2 || rest[0] !== 'v1') return notFound();
  const resource = rest[1]!;
  if (group === 'authorization.k8s.io' && resource === 'selfsubjectaccessreviews') {
    return answer((b) => selfSubjectAccessReview(b, user, deps.authorizer), true);
  }
  if (group === 'authorization.k8s.io' && resource === 'selfsubjectrulesreviews') {
    return answer((b) => selfSubjectRulesReview(b, user, deps.authorizer), true);
  }
  const reviews = deps.reviews;
  if (reviews && group === 'authorization.k8s.io' && resource === 'subjectaccessreviews') {
    return answer((b) => subjectAccessReview(b, reviews.authorizer));
  }
  if (reviews && group === 'authentication.k8s.io' && resource === 'tokenreviews') {
    return answer((b) => tokenReview(b, reviews.authenticator));
  }
  return notFound();
}

/** True when the request body is Kubernetes protobuf (kubectl 1.33 sends its self reviews so). */
function isProtobuf(req: IncomingMessage): boolean {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === PROTOBUF_MEDIA_TYPE;
}

/** Read a protobuf self review as its JSON form, or the 400 Status for a body that is not one. */
async function readProtobufReview(req: IncomingMessage): Promise<{ ok: true; value: unknown } | { ok: false; status: V1Status }> {
  try {
    return { ok: true, value: decodeSelfReview(await readBody(req)) };
  } catch (err) {
    return { ok: false, status: errorStatus(400, `the request body is not a valid protobuf self review: ${(err as Error).message}`) };
  }
}

/**
 * `GET /api/v1/nodes?watch=true`: the node never changes, so ADDED once (unless resuming from a
 * version), then the stream stays open until the client leaves or `timeoutSeconds` passes.
 */
function serveNodeWatch(req: IncomingMessage, res: ServerResponse, query: URLSearchParams, node: Record<string, unknown>): void {
  const encode = watchEventObject(req, query, NODE_PRINTER);
  if (!encode.ok) return sendStatus(res, encode.status);
  res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
  res.flushHeaders();
  const rv = query.get('resourceVersion') ?? '';
  if (rv === '' || rv === '0') res.write(JSON.stringify({ type: 'ADDED', object: encode.value(node) }) + '\n');
  const timeout = Number(query.get('timeoutSeconds') ?? '0');
  const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
  res.once('close', () => clearTimeout(timer));
}
