/**
 * GET of an OpenID issuer's documents (discovery, JWKS) for the JWT authenticator: `https:` trusting
 * exactly `issuer.certificateAuthority` when it is set (the system roots otherwise), a time limit, a
 * size cap, status 200 only and no redirects (kube-apiserver's client follows them; issuers serve
 * these documents directly). Plain `http:` is used only if a discovery document points there.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** Each fetch must finish within this (kube-apiserver's issuer client: 30 s). */
export const ISSUER_FETCH_TIMEOUT_MS = 30_000;

/** Largest discovery or JWKS document read; a bigger one is an error. */
export const ISSUER_DOCUMENT_MAX_BYTES = 1024 * 1024;

/** Options of {@link fetchIssuerDocument}. */
export interface IssuerFetchOptions {
  /** PEM CA bundle; when set, the only trust anchors. */
  ca?: string;
  timeoutMs?: number;
  maxBytes?: number;
}

/** Fetch `url`; resolves with the body of a 200 answer, rejects with a one-line reason otherwise. */
export function fetchIssuerDocument(url: string, options: IssuerFetchOptions = {}): Promise<string> {
  const u = new URL(url);
  const maxBytes = options.maxBytes ?? ISSUER_DOCUMENT_MAX_BYTES;
  const timeoutMs = options.timeoutMs ?? ISSUER_FETCH_TIMEOUT_MS;
  return new Promise((resolveFetch, rejectFetch) => {
    // A deadline for the whole exchange (a socket timeout would only bound the silences).
    const timer = setTimeout(() => req?.destroy(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    const resolve = (body: string): void => {
      clearTimeout(timer);
      resolveFetch(body);
    };
    const reject = (err: Error): void => {
      clearTimeout(timer);
      rejectFetch(err);
    };
    const onResponse = (res: IncomingMessage): void => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`${res.statusCode} ${res.statusMessage ?? ''}`.trim()));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > maxBytes) {
          req?.destroy(new Error(`response larger than ${maxBytes} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    };
    const headers = { accept: 'application/json' };
    const req =
      u.protocol === 'https:'
        ? httpsRequest(u, { method: 'GET', headers, ...(options.ca ? { ca: options.ca } : {}) }, onResponse)
        : u.protocol === 'http:'
          ? httpRequest(u, { method: 'GET', headers }, onResponse)
          : undefined;
    if (!req) {
      reject(new Error(`unsupported URL scheme ${u.protocol}`));
      return;
    }
    req.on('error', reject);
    req.end();
  });
}
