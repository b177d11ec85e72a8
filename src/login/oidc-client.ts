/**
 * The OpenID Connect client of `kube-stream-proxy login`: the provider's configuration from its
 * discovery document, through `openid-client` (panva), with `--certificate-authority` as the only
 * trust when given (a Fetch-compatible function over `node:https` with those CAs; Node's own `fetch`
 * cannot take a CA per request) and the system roots otherwise. Plain `http:` issuers are allowed on
 * loopback only.
 */
import { request as httpsRequest } from 'node:https';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import * as client from 'openid-client';

/** What the plugin needs to reach the provider. */
export interface OidcClientOptions {
  issuer: string;
  clientId: string;
  /** Confidential clients only (`--oidc-client-secret`). */
  clientSecret?: string;
  /** PEM CA bundle(s); when given, the only trust. */
  ca?: string[];
  /** Seconds each HTTP exchange may take (openid-client's default 30). */
  timeoutSeconds?: number;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** A Fetch-compatible function that trusts exactly `ca`. */
export function fetchTrusting(ca: string[]): client.CustomFetch {
  return (url, options) =>
    new Promise<Response>((resolve, reject) => {
      const u = new URL(url);
      const onResponse = (res: IncomingMessage): void => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (Array.isArray(v)) for (const x of v) headers.append(k, x);
            else if (v !== undefined) headers.set(k, v);
          }
          const status = res.statusCode ?? 500;
          const empty = status === 204 || status === 304;
          resolve(new Response(empty ? null : Buffer.concat(chunks), { status, statusText: res.statusMessage ?? '', headers }));
        });
      };
      const init = { method: options.method, headers: options.headers, ...(options.signal ? { signal: options.signal } : {}) };
      const req = u.protocol === 'https:' ? httpsRequest(u, { ...init, ca }, onResponse) : httpRequest(u, init, onResponse);
      req.on('error', reject);
      const body = options.body as unknown;
      if (body === undefined || body === null) req.end();
      else if (typeof body === 'string' || body instanceof Uint8Array) req.end(body);
      else if (body instanceof URLSearchParams) req.end(body.toString());
      else req.destroy(new Error('unsupported request body'));
    });
}

/** Discover the provider and build the client's configuration. */
export async function discoverProvider(o: OidcClientOptions): Promise<client.Configuration> {
  const issuer = new URL(o.issuer);
  const insecure = issuer.protocol === 'http:';
  if (insecure && !LOOPBACK.has(issuer.hostname)) throw new Error(`--oidc-issuer-url ${o.issuer}: plain http is allowed on loopback only`);
  const customFetch = o.ca?.length ? fetchTrusting(o.ca) : undefined;
  const auth = o.clientSecret ? client.ClientSecretBasic(o.clientSecret) : client.None();
  const config = await client.discovery(issuer, o.clientId, o.clientSecret, auth, {
    ...(customFetch ? { [client.customFetch]: customFetch } : {}),
    ...(insecure ? { execute: [client.allowInsecureRequests] } : {}),
    ...(o.timeoutSeconds ? { timeout: o.timeoutSeconds } : {}),
  });
  if (o.timeoutSeconds) config.timeout = o.timeoutSeconds;
  return config;
}

/** The one-line reason of an openid-client / OAuth error (`error` and `error_description` when the server sent them). */
export function oauthErrorText(err: unknown): string {
  if (err instanceof client.ResponseBodyError) return err.error_description ? `${err.error}: ${err.error_description}` : err.error;
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return `${err.message}${cause}`;
  }
  return String(err);
}
