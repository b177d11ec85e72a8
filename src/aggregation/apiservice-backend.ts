/**
 * The backend of one non-local APIService: how to reach it (kube-aggregator's per-APIService
 * transport: `caBundle` or the system roots, `insecureSkipTLSVerify`, TLS server name
 * `<service>.<namespace>.svc`, the front-proxy client certificate) and where (the ready endpoints of
 * its Service, or this project's `kube-stream-proxy.io/backend-url`). One pooled {@link Upstream}
 * per endpoint address, HTTP/1.1 only (ALPN `http/1.1`: an upgrade must never land on HTTP/2).
 */
import { isIP } from 'node:net';
import type { ProxyApiClient } from '../api-client.js';
import { Upstream, type UpstreamTls } from '../routing/upstream.js';
import { BACKEND_URL_ANNOTATION, type APIService } from './apiservice.js';
import { pickEndpoint, resolveServiceEndpoints, type EndpointAddress, type ServiceResolution } from './service-endpoints.js';

/** `--proxy-client-cert-file` / `--proxy-client-key-file`: the identity presented to aggregated API servers. */
export interface ProxyClientCertificate {
  cert: Buffer;
  key: Buffer;
}

/** How backends are reached. */
export interface BackendTransportOptions {
  /** The front-proxy client certificate, if configured. */
  proxyClient?: ProxyClientCertificate;
  /**
   * Present the front-proxy certificate on callers' requests too (impersonate mode, where the
   * `X-Remote-*` lines say who the caller is). In passthrough the caller's own credentials go and the
   * certificate is kept for the proxy's own calls (availability probe, discovery).
   */
  presentToCallers: boolean;
}

/** Host names need brackets in a URL when they are IPv6 literals. */
function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** A comparable key of everything that decides the transport (a reload keeps an unchanged backend). */
export function backendKey(a: APIService): string {
  return JSON.stringify([a.spec.service, a.spec.caBundle?.toString('base64') ?? null, a.spec.insecureSkipTLSVerify, a.metadata.annotations[BACKEND_URL_ANNOTATION] ?? null]);
}

/** The reachable side of one non-local APIService. */
export class APIServiceBackend {
  readonly apiService: APIService;
  /** See {@link backendKey}. */
  readonly key: string;
  readonly #options: BackendTransportOptions;
  /** Pooled connections per endpoint: `c:` for callers, `p:` for the proxy's own calls. */
  readonly #upstreams = new Map<string, Upstream>();
  #endpoints: EndpointAddress[] | undefined;

  constructor(apiService: APIService, options: BackendTransportOptions) {
    this.apiService = apiService;
    this.key = backendKey(apiService);
    this.#options = options;
  }

  /** The TLS server name: `<service>.<namespace>.svc` (kube-aggregator), or the backend URL's host. */
  get serverName(): string | undefined {
    const s = this.apiService.spec.service;
    if (this.apiService.backendURL) {
      const host = this.apiService.backendURL.hostname.replace(/^\[(.*)\]$/, '$1');
      return isIP(host) ? undefined : host;
    }
    return s ? `${s.name}.${s.namespace}.svc` : undefined;
  }

  /** Where the backend is now: resolve the Service's ready endpoints (or the backend URL) and keep them. */
  async resolve(api: Pick<ProxyApiClient, 'readService' | 'listEndpointSlices'> | undefined): Promise<ServiceResolution> {
    const url = this.apiService.backendURL;
    let resolution: ServiceResolution;
    if (url) {
      const port = url.port !== '' ? Number(url.port) : 443;
      resolution = { ok: true, endpoints: [{ host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port }] };
    } else if (!api) {
      resolution = { ok: false, reason: 'ServiceAccessError', message: 'no API client to resolve the service with (give --kubeconfig, --in-cluster or --upstream credentials)' };
    } else {
      resolution = await resolveServiceEndpoints(api, this.apiService.spec.service!);
    }
    this.#endpoints = resolution.ok ? resolution.endpoints : [];
    return resolution;
  }

  /** The endpoints of the last resolution (undefined before the first). */
  get endpoints(): readonly EndpointAddress[] | undefined {
    return this.#endpoints;
  }

  /**
   * A connection pool to one ready endpoint, chosen at random; `own` for the proxy's own calls (always
   * with the front-proxy certificate). Undefined when no endpoint is known.
   */
  pick(own = false): Upstream | undefined {
    const endpoints = this.#endpoints;
    if (!endpoints || endpoints.length === 0) return undefined;
    return this.upstreamAt(pickEndpoint(endpoints), own);
  }

  /** The pooled connections to `endpoint`. */
  upstreamAt(endpoint: EndpointAddress, own: boolean): Upstream {
    const withCert = own || this.#options.presentToCallers;
    const key = `${withCert ? 'p' : 'c'}:${urlHost(endpoint.host)}:${endpoint.port}`;
    let upstream = this.#upstreams.get(key);
    if (!upstream) {
      const tls: UpstreamTls = { rejectUnauthorized: !this.apiService.spec.insecureSkipTLSVerify };
      if (this.apiService.spec.caBundle) tls.ca = this.apiService.spec.caBundle;
      const serverName = this.serverName;
      if (serverName !== undefined) tls.servername = serverName;
      if (this.#options.proxyClient) {
        tls.cert = this.#options.proxyClient.cert;
        tls.key = this.#options.proxyClient.key;
      }
      upstream = new Upstream(new URL(`https://${urlHost(endpoint.host)}:${endpoint.port}`), tls, async () => ({}), {
        presentProxyIdentity: withCert,
        name: `apiservice/${this.apiService.metadata.name}`,
      });
      this.#upstreams.set(key, upstream);
    }
    return upstream;
  }

  /**
   * Drop the pools. Connections in use (an upgraded session has its own socket; a watch its own
   * request) are not cut: only idle pooled sockets are closed.
   */
  close(): void {
    for (const u of this.#upstreams.values()) u.closeIdle();
    this.#upstreams.clear();
  }
}
