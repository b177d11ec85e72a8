/**
 * The `kubelet` upstream mode: a pod streaming request is resolved pod → node → kubelet address
 * through the API (with the proxy's credentials) and sent to the kubelet's own path over TLS, with the
 * proxy's kubelet client certificate, verified against the kubelet CA — as kube-apiserver does it.
 * The route carries the node's `status.declaredFeatures` (`Route.streaming`), which decide whether
 * WebSocket streams are passed through to the kubelet (handlers/stream-path.ts).
 */
import type { NodeInfo, ProxyApiClient } from '../../api-client.js';
import { errorStatus, notFoundStatus, type V1Status } from '../../status.js';
import { Upstream, type UpstreamTls } from '../upstream.js';
import { routeVia, type Route } from '../route.js';
import { kubeletStreamPath, type KubeletStreamSubresource } from './kubelet-location.js';
import { kubeletAddress } from './node-address.js';
import type { IncomingMessage } from 'node:http';
import { validateNamespace, validatePodName } from '../pod-name.js';
import { podStreamAttributes } from '../request-path.js';
import type { RouteDecision, RouteResolver } from '../router.js';

/** The kubelet client settings, as kube-apiserver's `--kubelet-*` flags. */
export interface KubeletClientConfig {
  /** `--kubelet-certificate-authority`; absent only with `insecureSkipTlsVerify`. */
  ca?: Buffer;
  /** `--kubelet-client-certificate` / `--kubelet-client-key`. */
  cert?: Buffer;
  key?: Buffer;
  /** `--kubelet-insecure-skip-tls-verify` (logged as a warning at start-up). */
  insecureSkipTlsVerify: boolean;
  /** `--kubelet-preferred-address-types`. */
  preferredAddressTypes: readonly string[];
}

/** A request to place. */
export interface KubeletStreamTarget {
  subresource: KubeletStreamSubresource;
  namespace: string;
  pod: string;
  /** The caller's query. */
  query: URLSearchParams;
}

/** Either where to send the request or the Status refusing it (answered before any upgrade). */
export type KubeletRoute = { ok: true; route: Route; node: string } | { ok: false; status: V1Status };

/**
 * How long a node's object is reused: its kubelet address, port and `declaredFeatures` change only
 * when the kubelet restarts (declared features are computed at kubelet start-up, KEP-5328), and a
 * burst of `kubectl cp` or exec sessions to one node then costs one node read, not one each.
 */
export const NODE_CACHE_TTL_MS = 10_000;

/** At most this many nodes are cached (Kubernetes' documented scale limit is 5,000 nodes). */
export const NODE_CACHE_MAX_ENTRIES = 5_000;

/** Test knobs of the node cache. */
export interface KubeletLocatorOptions {
  /** Default {@link NODE_CACHE_TTL_MS}. */
  nodeCacheTtlMs?: number;
  /** The clock, in ms; `Date.now` by default. */
  now?: () => number;
}

/** Host names need brackets in a URL when they are IPv6 literals. */
function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** Where the locator logs lookup failures. */
export interface KubeletLocatorLog {
  warn(obj: object, msg: string): void;
}

/**
 * Resolves pod streaming requests to kubelet routes (the router's kubelet-mode resolver); one pooled
 * {@link Upstream} per kubelet address.
 */
export class KubeletLocator implements RouteResolver {
  readonly #api: Pick<ProxyApiClient, 'readPod' | 'readNode'>;
  readonly #config: KubeletClientConfig;
  readonly #kubelets = new Map<string, Upstream>();
  readonly #log: KubeletLocatorLog | undefined;
  readonly #nodes = new Map<string, { node: NodeInfo; at: number }>();
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(api: Pick<ProxyApiClient, 'readPod' | 'readNode'>, config: KubeletClientConfig, log?: KubeletLocatorLog, options: KubeletLocatorOptions = {}) {
    this.#api = api;
    this.#config = config;
    this.#log = log;
    this.#ttlMs = options.nodeCacheTtlMs ?? NODE_CACHE_TTL_MS;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Route a pod streaming request to its kubelet (before any upgrade), or refuse it (pod missing, no
   * node, no container; 503 when the API cannot be asked). Other requests, and pod names the route
   * handler will refuse with 400, are not placed here.
   */
  async resolve(req: IncomingMessage): Promise<RouteDecision | undefined> {
    const url = req.url ?? '/';
    const stream = podStreamAttributes(url);
    if (!stream) return undefined;
    try {
      validateNamespace(stream.namespace);
      validatePodName(stream.name);
    } catch {
      return undefined;
    }
    let located: KubeletRoute;
    try {
      located = await this.locate({
        subresource: stream.subresource as KubeletStreamSubresource,
        namespace: stream.namespace,
        pod: stream.name,
        query: new URL(url, 'http://request.invalid').searchParams,
      });
    } catch (e) {
      this.#log?.warn({ err: e }, 'kubelet lookup failed');
      return { refuse: errorStatus(503, `error looking up the pod's kubelet: ${(e as Error).message}`, 'ServiceUnavailable') };
    }
    return located.ok ? { route: located.route } : { refuse: located.status };
  }

  /** Find the kubelet for `t`. Rejects only when the API cannot be asked (the caller answers 500/503). */
  async locate(t: KubeletStreamTarget): Promise<KubeletRoute> {
    const pod = await this.#api.readPod(t.namespace, t.pod);
    if (!pod) return { ok: false, status: notFoundStatus('pods', t.pod) };
    const path = kubeletStreamPath(t.subresource, t.namespace, t.pod, pod, t.query);
    if (!path.ok) return path;
    const node = await this.#readNode(pod.nodeName!);
    if (!node) return { ok: false, status: errorStatus(500, `nodes "${pod.nodeName}" not found`, 'InternalError') };
    const address = kubeletAddress(node, this.#config.preferredAddressTypes);
    if (!address) {
      return {
        ok: false,
        status: errorStatus(500, `no preferred addresses found; known addresses: ${JSON.stringify(node.addresses)}`, 'InternalError'),
      };
    }
    const route = routeVia(this.#kubelet(address.host, address.port), {
      name: `kubelet/${pod.nodeName!}`,
      target: path.path,
      authHeaders: async () => ({}),
      streaming: { kubelet: { declaredFeatures: node.declaredFeatures ?? [] } },
    });
    return { ok: true, route, node: pod.nodeName! };
  }

  /** The node object, from the cache while it is fresh (a missing node is never cached). */
  async #readNode(name: string): Promise<NodeInfo | undefined> {
    const now = this.#now();
    const cached = this.#nodes.get(name);
    if (cached && now - cached.at < this.#ttlMs) return cached.node;
    const node = await this.#api.readNode(name);
    this.#nodes.delete(name);
    if (!node) return undefined;
    if (this.#nodes.size >= NODE_CACHE_MAX_ENTRIES) this.#nodes.delete(this.#nodes.keys().next().value!);
    this.#nodes.set(name, { node, at: now });
    return node;
  }

  #kubelet(host: string, port: number): Upstream {
    const key = `${urlHost(host)}:${port}`;
    let upstream = this.#kubelets.get(key);
    if (!upstream) {
      const tls: UpstreamTls = { rejectUnauthorized: !this.#config.insecureSkipTlsVerify };
      if (this.#config.ca) tls.ca = this.#config.ca;
      if (this.#config.cert && this.#config.key) {
        tls.cert = this.#config.cert;
        tls.key = this.#config.key;
      }
      upstream = new Upstream(new URL(`https://${key}`), tls, async () => ({}), { presentProxyIdentity: true, name: `kubelet/${key}` });
      this.#kubelets.set(key, upstream);
    }
    return upstream;
  }

  /** Drop pooled kubelet connections. */
  close(): void {
    for (const u of this.#kubelets.values()) u.close();
    this.#kubelets.clear();
  }
}
