/**
 * HTTP(S) to a recorder, for both of its clients: the proxy's remote sink (ingest, as a replica) and
 * `kube-stream-proxy sessions --recorder URL` (the viewer API). Credentials: a bearer token (re-read
 * from its file on every request, so rotation needs no restart) and/or a client certificate; trust:
 * a CA bundle or the system roots.
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** How to reach and authenticate to a recorder. */
export interface RecorderEndpoint {
  /** Base URL (`https://recorder.example:8443`). */
  url: URL;
  tokenFile?: string;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

/** Parse and check a `--recorder`/`--session-recorder-url` value. */
export function parseRecorderUrl(text: string, flag: string): URL {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new Error(`${flag}: not a URL: ${JSON.stringify(text)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`${flag}: must be http or https: ${JSON.stringify(text)}`);
  if (u.username || u.password) throw new Error(`${flag}: must not contain credentials (use a token file)`);
  return u;
}

/** Start a request to `path` on the recorder; the caller writes the body and ends it. */
export function recorderRequest(ep: RecorderEndpoint, method: string, path: string, headers: Record<string, string> = {}): ClientRequest {
  const target = new URL(path, ep.url);
  const h: Record<string, string> = { ...headers };
  if (ep.tokenFile) h.authorization = `Bearer ${readFileSync(ep.tokenFile, 'utf8').trim()}`;
  const common = { method, host: target.hostname, port: target.port || (target.protocol === 'https:' ? 443 : 80), path: target.pathname + target.search, headers: h };
  if (target.protocol === 'https:') {
    return httpsRequest({
      ...common,
      ...(ep.caFile ? { ca: readFileSync(ep.caFile) } : {}),
      ...(ep.certFile ? { cert: readFileSync(ep.certFile) } : {}),
      ...(ep.keyFile ? { key: readFileSync(ep.keyFile) } : {}),
    });
  }
  return httpRequest(common);
}

/** A whole answer. */
export interface RecorderAnswer {
  status: number;
  body: Buffer;
}

/** One request with an optional body, the whole answer read. */
export function recorderFetch(ep: RecorderEndpoint, method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}): Promise<RecorderAnswer> {
  return new Promise<RecorderAnswer>((resolve, reject) => {
    let req: ClientRequest;
    try {
      req = recorderRequest(ep, method, path, headers);
    } catch (e) {
      return reject(e instanceof Error ? e : new Error(String(e)));
    }
    req.on('error', reject);
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.end(body);
  });
}
