/**
 * What the router and the reviews read off a request's path: a pod streaming subresource, a kubelet
 * streaming endpoint reached through the node proxy, the review a streaming request needs, or the
 * API group and version of an `/apis/<group>/<version>/…` request. Pure functions of the URL.
 */

/** A pod streaming request's attributes, from the decoded path. */
export interface PodStreamAttributes {
  namespace: string;
  name: string;
  subresource: string;
}

/** A pod streaming request's attributes, from the decoded path; undefined for other paths. */
export function podStreamAttributes(url: string): PodStreamAttributes | undefined {
  const path = url.split('?')[0] ?? '';
  const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/(exec|attach|portforward)\/?$/.exec(path);
  if (!m) return undefined;
  try {
    return { namespace: decodeURIComponent(m[1]!), name: decodeURIComponent(m[2]!), subresource: m[3]! };
  } catch {
    return undefined;
  }
}

/** The group and version an `/apis/<group>/<version>[/…]` path names. */
export interface GroupVersion {
  group: string;
  version: string;
}

/**
 * The group/version of an `/apis/<group>/<version>[/…]` request (kube-aggregator's proxy handler
 * is registered per group-version at exactly that prefix); undefined for `/apis`, `/apis/<group>`
 * and every other path. Segments are taken as sent: group and version names need no decoding, and a
 * percent-encoded one does not match (it is not a registered name).
 */
export function apiGroupVersionOf(url: string): GroupVersion | undefined {
  const path = url.split('?')[0] ?? '';
  const m = /^\/apis\/([^/]+)\/([^/]+)(?:\/.*)?$/.exec(path);
  if (!m) return undefined;
  return { group: m[1]!, version: m[2]! };
}

/**
 * The kubelet's streaming endpoints (`pkg/kubelet/server/server.go` `InstallAuthRequiredHandlers`):
 * `/exec|attach/{ns}/{pod}[/{uid}]/{container}` (GET, POST), `/run/{ns}/{pod}[/{uid}]/{container}`
 * (POST: the command's output as the answer), `/portForward/{ns}/{pod}[/{uid}]`, and `/cri/…` (the
 * streaming server of kubelets up to 1.23, reached by token). Lower case: matched case-insensitively.
 */
export type KubeletStreamEndpoint = 'exec' | 'attach' | 'run' | 'portforward' | 'cri';

const KUBELET_STREAM_ENDPOINTS: ReadonlySet<string> = new Set<KubeletStreamEndpoint>(['exec', 'attach', 'run', 'portforward', 'cri']);

/** A kubelet streaming endpoint requested through kube-apiserver's node proxy (`nodes/NODE/proxy/…`). */
export interface NodeProxyStream {
  /**
   * The name segment as kube-apiserver authorizes it (`nodes/proxy` resource name): `NODE`,
   * `NODE:PORT` or `SCHEME:NODE:PORT`, percent-decoded.
   */
  node: string;
  endpoint: KubeletStreamEndpoint;
  /**
   * The pod (and for exec, attach and run the container) the kubelet path names, when it has one of
   * the kubelet's shapes; undefined for `/cri/…` and for other shapes.
   */
  target?: { namespace: string; pod: string; container?: string };
}

/** `%XX` decoded to the byte's character (latin1); a `%` not followed by two hex digits is kept. Never throws. */
function percentDecodeBytes(s: string): string {
  return s.replace(/%([0-9a-fA-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** Go's `path.Clean` of an absolute path: empty and `.` segments dropped, `..` removes one (never above the root). */
function cleanPath(path: string): string {
  const out: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') out.pop();
    else out.push(segment);
  }
  return `/${out.join('/')}`;
}

/**
 * The forms of a path an upstream may act on: as sent, percent-decoded (Go's `URL.Path`; a `%2F`
 * is a `/` there), and each cleaned of dot segments and doubled slashes (kube-apiserver joins the
 * node proxy's sub-path with `path.Join`, which cleans it).
 */
function pathForms(path: string): string[] {
  // Most paths have nothing to decode or clean: one form (the check runs on every request).
  if (!path.includes('%') && !path.includes('/.') && !path.includes('//')) return [path];
  const forms = new Set<string>([path, percentDecodeBytes(path)]);
  for (const f of [...forms]) forms.add(cleanPath(f));
  return [...forms];
}

const NODE_PROXY_PATH = /^\/api\/v1\/nodes\/([^/]+)\/proxy(?:\/(.*))?$/i;

function utf8Name(latin1: string): string {
  return Buffer.from(latin1, 'latin1').toString('utf8');
}

/**
 * A request for a kubelet streaming endpoint through the node proxy, or undefined. Read from every
 * form of the path the upstream could act on (see {@link pathForms}), so `%65xec`, `./exec`,
 * `x/../exec`, `//exec`, `EXEC` and `NODE:10250` all count. Pure.
 */
export function nodeProxyStreamOf(url: string): NodeProxyStream | undefined {
  const path = url.split('?')[0] ?? '';
  for (const form of pathForms(path)) {
    const m = NODE_PROXY_PATH.exec(form);
    if (!m) continue;
    const segments = cleanPath(`/${m[2] ?? ''}`).split('/').slice(1);
    const endpoint = percentDecodeBytes(segments[0] ?? '').toLowerCase();
    if (!KUBELET_STREAM_ENDPOINTS.has(endpoint)) continue;
    const stream: NodeProxyStream = { node: utf8Name(percentDecodeBytes(m[1]!)), endpoint: endpoint as KubeletStreamEndpoint };
    const rest = segments.slice(1).map((s) => utf8Name(percentDecodeBytes(s)));
    if (endpoint === 'portforward' && (rest.length === 2 || rest.length === 3)) stream.target = { namespace: rest[0]!, pod: rest[1]! };
    else if (endpoint !== 'portforward' && endpoint !== 'cri' && (rest.length === 3 || rest.length === 4)) {
      stream.target = { namespace: rest[0]!, pod: rest[1]!, container: rest[rest.length - 1]! };
    }
    return stream;
  }
  return undefined;
}

/**
 * True for a request whose query decides what a streaming session is (container, command, streams):
 * a pod streaming subresource in any form of its path (the catch-all refuses the odd forms, but the
 * query is made canonical first all the same), or a kubelet streaming endpoint through the node proxy.
 */
export function isStreamingPath(url: string): boolean {
  const path = url.split('?')[0] ?? '';
  if (nodeProxyStreamOf(path)) return true;
  return pathForms(path).some((f) => /\/pods\/[^/]+\/(exec|attach|portforward)\/?$/i.test(f));
}

/** The SubjectAccessReview attributes a streaming request needs beyond the upstream's own check. */
export interface StreamReview {
  verb: 'create' | 'get';
  resource: 'pods' | 'nodes';
  subresource: string;
  namespace?: string;
  name: string;
}

/** How the request is reviewed besides its path. */
export interface StreamReviewOptions {
  /** The request's method; a GET is a WebSocket upgrade (SPDY clients POST). */
  method?: string;
  /**
   * Gate `AuthorizePodWebsocketUpgradeCreatePermission` (default on): a GET to a pod streaming
   * subresource is reviewed as `create`; off, as `get` (kube-apiserver < 1.35 took the verb from the method).
   */
  createForWebSocketUpgrade?: boolean;
}

/**
 * What `--authn impersonate` reviews for a streaming request before it goes upstream, or undefined:
 *
 * - pods/exec|attach|portforward: `create` on the subresource in the pod's namespace, GET WebSocket
 *   upgrades included (kube-apiserver < 1.35 asked only `get`; 1.35's
 *   `AuthorizePodWebsocketUpgradeCreatePermission` asks `create` too); with that gate off, a GET is
 *   reviewed as `get`;
 * - a kubelet streaming endpoint through the node proxy: `create` on `nodes/proxy` for the node as
 *   the path names it. kube-apiserver (and the kubelet, for its own API) authorizes these by the
 *   method, so a WebSocket upgrade, which is a GET, needs only `get nodes/proxy` — a permission
 *   monitoring agents are given, and which then runs commands in every pod of the node.
 */
export function streamReviewAttributes(url: string, o: StreamReviewOptions = {}): StreamReview | undefined {
  const pod = podStreamAttributes(url);
  if (pod) {
    const verb = o.createForWebSocketUpgrade === false && o.method === 'GET' ? 'get' : 'create';
    return { verb, resource: 'pods', subresource: pod.subresource, namespace: pod.namespace, name: pod.name };
  }
  const node = nodeProxyStreamOf(url);
  if (node) return { verb: 'create', resource: 'nodes', subresource: 'proxy', name: node.node };
  return undefined;
}
