/**
 * A backend reached over TCP or TLS — the primary kube-apiserver, a kubelet, an aggregated API
 * server: where it is, how to trust it and how to authenticate to it. One `Upstream` serves both
 * paths: the reverse proxy (`request()`, pooled keep-alive connections) and the upgrade proxy
 * (`dial()`, one fresh HTTP/1.1 connection per upgrade). It is itself the plain {@link Route} to
 * itself (the caller's request-target and credentials unchanged); `route.ts` derives the others.
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest, Agent as HttpAgent, type ClientRequest, type RequestOptions } from 'node:http';
import { request as httpsRequest, Agent as HttpsAgent } from 'node:https';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { KubeConfig } from '@kubernetes/client-node';
import { ConfigError, UpstreamUnreachableError } from '../errors.js';
import type { AuthHeaders, Route } from './route.js';
import { TokenFile } from '../token-file.js';

export { TOKEN_FILE_REFRESH_MS } from '../token-file.js';

/**
 * ALPN offered on TLS upgrade dials: HTTP/1.1 only. An HTTP/2 connection cannot carry a 101, which is
 * why apimachinery's `DialURL` forces the same (headlamp#4375 is the bug when it is not).
 */
export const UPGRADE_ALPN_PROTOCOLS: readonly string[] = ['http/1.1'];

/** TLS trust and client identity used toward an https upstream. */
export interface UpstreamTls {
  /** PEM CA bundle; when absent, Node's default roots. */
  ca?: Buffer;
  /** PEM client certificate (with `key`). */
  cert?: Buffer;
  /** PEM client key (with `cert`). */
  key?: Buffer;
  /** False only when a kubeconfig says `insecure-skip-tls-verify`. */
  rejectUnauthorized: boolean;
  /** SNI/verification name override (kubeconfig `tls-server-name`). */
  servername?: string;
}

/** The header lines that authenticate an upstream request (declared with the route that sets them). */
export type { AuthHeaders } from './route.js';

/** Produces the headers that authenticate each upstream request (`Authorization`, `Impersonate-User`). */
export type AuthHeaderSource = () => Promise<Record<string, string>>;

/** Options of {@link Upstream}. */
export interface UpstreamOptions {
  /** The backend's name in logs and metrics (default `upstream`: the primary apiserver). */
  name?: string;
  /**
   * Present the proxy's client certificate on callers' connections too. Off in passthrough (the
   * caller's own credentials only); on when the proxy acts for verified callers (impersonation,
   * kubelet client certificate).
   */
  presentProxyIdentity?: boolean;
}

/**
 * An upstream server and the credentials to reach it.
 *
 * Callers' requests (the reverse proxy, upgrades, translation, the tunnel) go upstream with the
 * CALLER's credentials only (passthrough): the proxy's own identity — its client certificate and
 * bearer token — is never put on them, so an anonymous caller stays anonymous upstream and nobody
 * borrows the proxy's rights. The proxy's identity is kept for its own calls (`authHeaders()`,
 * `tls`) and for the impersonating and kubelet modes.
 */
export class Upstream implements Route {
  /** See {@link UpstreamOptions.name}. */
  readonly name: string;
  /** `http:` or `https:` base URL; its path is prepended to every request path. */
  readonly url: URL;
  /** TLS settings; undefined for an `http:` upstream. */
  readonly tls: UpstreamTls | undefined;
  readonly #authHeaders: AuthHeaderSource;
  readonly #agent: HttpAgent;
  /** `tls` without the proxy's client certificate: what callers' connections use. */
  readonly #callerTls: UpstreamTls | undefined;

  constructor(url: URL, tls: UpstreamTls | undefined, authHeaders: AuthHeaderSource = async () => ({}), options: UpstreamOptions = {}) {
    this.name = options.name ?? 'upstream';
    this.url = url;
    this.tls = url.protocol === 'https:' ? (tls ?? { rejectUnauthorized: true }) : undefined;
    this.#authHeaders = authHeaders;
    if (this.tls) {
      const { cert: _cert, key: _key, ...trust } = this.tls;
      this.#callerTls = options.presentProxyIdentity ? this.tls : trust;
    }
    this.#agent = this.#callerTls
      ? new HttpsAgent({ keepAlive: true, ...this.#callerTls })
      : new HttpAgent({ keepAlive: true });
  }

  /** Host name without IPv6 brackets. */
  get hostname(): string {
    return this.url.hostname.replace(/^\[(.*)\]$/, '$1');
  }

  /** Port, defaulted from the scheme. */
  get port(): number {
    return this.url.port !== '' ? Number(this.url.port) : this.url.protocol === 'https:' ? 443 : 80;
  }

  /** The `Host` header value for upstream requests. */
  get host(): string {
    return this.url.host;
  }

  /** The proxy's own authentication headers (may re-read a token file or run an exec plugin). */
  authHeaders(): Promise<Record<string, string>> {
    return this.#authHeaders();
  }

  /**
   * Headers the proxy sets on a caller's request: none in passthrough, so the caller's own
   * `Authorization` and `Impersonate-*` headers go upstream unchanged and the upstream decides.
   */
  async callerAuthHeaders(): Promise<AuthHeaders> {
    return {};
  }

  /** The request-target for an incoming `path?query`: the upstream's path prefix joined in front. */
  target(requestUrl: string): string {
    const prefix = this.url.pathname.replace(/\/+$/, '');
    return prefix + (requestUrl.startsWith('/') ? requestUrl : `/${requestUrl}`);
  }

  /**
   * Open one new connection for a caller's upgrade (TLS with ALPN `http/1.1` only, no client
   * certificate of the proxy's). Resolves once connected
   * (and the TLS handshake is done); rejects with UpstreamUnreachableError.
   */
  dial(signal?: AbortSignal): Promise<Socket> {
    return new Promise<Socket>((resolve, reject) => {
      const host = this.hostname;
      const tls = this.#callerTls;
      const socket: Socket = tls
        ? tlsConnect({
            host,
            port: this.port,
            ALPNProtocols: [...UPGRADE_ALPN_PROTOCOLS],
            ...(tls.servername !== undefined ? { servername: tls.servername } : isIP(host) ? {} : { servername: host }),
            ...(tls.ca ? { ca: tls.ca } : {}),
            ...(tls.cert && tls.key ? { cert: tls.cert, key: tls.key } : {}),
            rejectUnauthorized: tls.rejectUnauthorized,
          })
        : netConnect({ host, port: this.port });
      const connectedEvent = this.tls ? 'secureConnect' : 'connect';
      const onAbort = (): void => {
        socket.destroy();
        // The caller's reason (e.g. its response timeout) is the error, as fetch() does it.
        reject(signal?.reason ?? new Error('aborted'));
      };
      const onError = (err: Error): void => {
        signal?.removeEventListener('abort', onAbort);
        reject(new UpstreamUnreachableError(this.url.origin, new Error(`error dialing backend: ${err.message}`)));
      };
      socket.once('error', onError);
      socket.once(connectedEvent, () => {
        // Go (kubectl, the apiserver, the kubelet) sets TCP_NODELAY on every connection; Node's
        // net.connect does not. With Nagle on, a small write waiting on a delayed ACK costs ~40 ms per
        // request-response turn (measured: 22 req/s instead of hundreds through a port-forward).
        socket.setNoDelay(true);
        socket.off('error', onError);
        signal?.removeEventListener('abort', onAbort);
        resolve(socket);
      });
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Start a plain (non-upgrade) request on the pooled agent. The caller writes the body and ends it. */
  request(options: Pick<RequestOptions, 'method' | 'path' | 'headers'>): ClientRequest {
    const base: RequestOptions = {
      ...options,
      host: this.hostname,
      port: this.port,
      agent: this.#agent,
    };
    return this.tls ? httpsRequest(base) : httpRequest(base);
  }

  /** Drop pooled connections (server shutdown). */
  close(): void {
    this.#agent.destroy();
  }

  /**
   * Retire the pool without cutting requests in flight (a reload removed this backend): idle sockets
   * are closed now, busy ones when their request ends instead of returning to the pool.
   */
  closeIdle(): void {
    for (const sockets of Object.values(this.#agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
    this.#agent.on('free', (socket: Socket) => socket.destroy());
  }
}

/** Flag values describing an upstream given by URL and files. */
export interface UpstreamFileOptions {
  url: string;
  caFile?: string;
  tokenFile?: string;
  clientCertFile?: string;
  clientKeyFile?: string;
  /** `--upstream-insecure-skip-tls-verify`. */
  insecureSkipTlsVerify?: boolean;
  /** See {@link UpstreamOptions}. */
  presentProxyIdentity?: boolean;
}

function readFlagFile(flag: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new ConfigError(`${flag}: cannot read ${path}: ${(e as Error).message}`, { cause: e });
  }
}

/** Parse and check an upstream URL (http or https, no query or fragment). */
export function parseUpstreamUrl(value: string, flag = '--upstream'): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${flag}: invalid URL ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`${flag}: scheme must be http or https, got ${JSON.stringify(url.protocol)}`);
  }
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new ConfigError(`${flag}: must not carry a query, fragment or user info`);
  }
  return url;
}

/** A bearer token read from a file (trimmed) and re-read every TOKEN_FILE_REFRESH_MS. */
function tokenFileSource(path: string): AuthHeaderSource {
  const file = new TokenFile(path);
  return async () => ({ Authorization: `Bearer ${file.token()}` });
}

/** Build an Upstream from `--upstream` and the `--upstream-*` file flags. */
export function upstreamFromFiles(o: UpstreamFileOptions): Upstream {
  const url = parseUpstreamUrl(o.url);
  if ((o.clientCertFile === undefined) !== (o.clientKeyFile === undefined)) {
    throw new ConfigError('--upstream-client-cert-file and --upstream-client-key-file must be given together');
  }
  const wantsTls = o.caFile !== undefined || o.clientCertFile !== undefined;
  if (wantsTls && url.protocol !== 'https:') {
    throw new ConfigError('--upstream-ca-file and --upstream-client-*-file need an https --upstream');
  }
  if (o.insecureSkipTlsVerify && url.protocol !== 'https:') throw new ConfigError('--upstream-insecure-skip-tls-verify needs an https --upstream');
  const tls: UpstreamTls = { rejectUnauthorized: o.insecureSkipTlsVerify !== true };
  if (o.caFile !== undefined) tls.ca = readFlagFile('--upstream-ca-file', o.caFile);
  if (o.clientCertFile !== undefined && o.clientKeyFile !== undefined) {
    tls.cert = readFlagFile('--upstream-client-cert-file', o.clientCertFile);
    tls.key = readFlagFile('--upstream-client-key-file', o.clientKeyFile);
  }
  const auth = o.tokenFile !== undefined ? tokenFileSource(o.tokenFile) : undefined;
  return new Upstream(url, tls, auth, { presentProxyIdentity: o.presentProxyIdentity === true });
}

/**
 * Build an Upstream from a loaded KubeConfig (a file or in-cluster): its current cluster's server,
 * CA, `insecure-skip-tls-verify`, `tls-server-name`, the user's client certificate, and per-request
 * auth headers from client-node's authenticators (token, token file, exec plugins, impersonation).
 */
export async function upstreamFromKubeConfig(kc: KubeConfig, overrideUrl?: string, options: UpstreamOptions = {}): Promise<Upstream> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new ConfigError('kubeconfig: no current cluster');
  const url = parseUpstreamUrl(overrideUrl ?? cluster.server, overrideUrl ? '--upstream' : 'kubeconfig server');
  const opts: { ca?: unknown; cert?: unknown; key?: unknown; rejectUnauthorized?: boolean; servername?: string; headers?: Record<string, unknown> } = {};
  try {
    await kc.applyToHTTPSOptions(opts as Parameters<KubeConfig['applyToHTTPSOptions']>[0]);
  } catch (e) {
    throw new ConfigError(`kubeconfig: ${(e as Error).message}`, { cause: e });
  }
  const tls: UpstreamTls = { rejectUnauthorized: opts.rejectUnauthorized !== false };
  if (Buffer.isBuffer(opts.ca)) tls.ca = opts.ca;
  if (Buffer.isBuffer(opts.cert)) tls.cert = opts.cert;
  if (Buffer.isBuffer(opts.key)) tls.key = opts.key;
  if (opts.servername !== undefined) tls.servername = opts.servername;
  const auth: AuthHeaderSource = async () => {
    const fresh: { headers: Record<string, unknown> } = { headers: {} };
    await kc.applyToHTTPSOptions(fresh as Parameters<KubeConfig['applyToHTTPSOptions']>[0]);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(fresh.headers)) if (v !== undefined) out[k] = String(v);
    return out;
  };
  return new Upstream(url, tls, auth, options);
}
