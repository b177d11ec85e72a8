/**
 * The `kubelet` upstream mode: a pod streaming request is resolved pod → node → kubelet address
 * through the API (with the proxy's credentials) and sent to the kubelet's own path over TLS, with the
 * proxy's kubelet client certificate, verified against the kubelet CA — as kube-apiserver does it.
 */
import type { ProxyApiClient } from '../api-client.js';
import { errorStatus, notFoundStatus, type V1Status } from '../status.js';
import { Upstream, type UpstreamEndpoint, type UpstreamTls } from '../upstream.js';
import { routedEndpoint } from '../upstream-route.js';
import { kubeletStreamPath, type KubeletStreamSubresource } from './kubelet-location.js';
import { kubeletAddress } from './node-address.js';

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
export type KubeletRoute = { ok: true; endpoint: UpstreamEndpoint; node: string } | { ok: false; status: V1Status };

/** Host names need brackets in a URL when they are IPv6 literals. */
function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** Resolves pod streaming requests to kubelet endpoints; one pooled {@link Upstream} per kubelet address. */
export class KubeletLocator {
  readonly #api: Pick<ProxyApiClient, 'readPod' | 'readNode'>;
  readonly #config: KubeletClientConfig;
  readonly #kubelets = new Map<string, Upstream>();

  constructor(api: Pick<ProxyApiClient, 'readPod' | 'readNode'>, config: KubeletClientConfig) {
    this.#api = api;
    this.#config = config;
  }

  /** Find the kubelet for `t`. Rejects only when the API cannot be asked (the caller answers 500/503). */
  async locate(t: KubeletStreamTarget): Promise<KubeletRoute> {
    const pod = await this.#api.readPod(t.namespace, t.pod);
    if (!pod) return { ok: false, status: notFoundStatus('pods', t.pod) };
    const path = kubeletStreamPath(t.subresource, t.namespace, t.pod, pod, t.query);
    if (!path.ok) return path;
    const node = await this.#api.readNode(pod.nodeName!);
    if (!node) return { ok: false, status: errorStatus(500, `nodes "${pod.nodeName}" not found`, 'InternalError') };
    const address = kubeletAddress(node, this.#config.preferredAddressTypes);
    if (!address) {
      return {
        ok: false,
        status: errorStatus(500, `no preferred addresses found; known addresses: ${JSON.stringify(node.addresses)}`, 'InternalError'),
      };
    }
    const endpoint = routedEndpoint(this.#kubelet(address.host, address.port), { target: path.path, authHeaders: async () => ({}) });
    return { ok: true, endpoint, node: pod.nodeName! };
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
      upstream = new Upstream(new URL(`https://${key}`), tls, async () => ({}), { presentProxyIdentity: true });
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
