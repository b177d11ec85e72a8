/**
 * dev-metrics' reads from the cluster's API (`--cluster URL`): the pod and node lists, and each
 * node's kubelet resource metrics through the API server's `nodes/proxy` subresource, the path a
 * client with API access takes to a kubelet. Plain HTTP (the loopback dev cluster) or HTTPS with
 * an optional CA bundle; an optional bearer token file, re-read on every request so a rotated
 * token is picked up.
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** How to reach the cluster. */
export interface ClusterClientOptions {
  /** Base URL, e.g. http://127.0.0.1:6444. */
  url: string;
  /** File holding a bearer token. */
  tokenFile?: string;
  /** PEM CA bundle for an https URL (default: the system roots). */
  ca?: Buffer;
  /** Per-request deadline (default {@link DEFAULT_CLUSTER_TIMEOUT_MS}). */
  timeoutMs?: number;
}

/** A scrape that takes longer than this fails (metrics-server's default `--kubelet-request-timeout` is 10 s). */
export const DEFAULT_CLUSTER_TIMEOUT_MS = 10_000;

/** Largest answer read (a pod list of a dev cluster is far smaller). */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** A request to the cluster failed (network, timeout, or a non-2xx answer). */
export class ClusterRequestError extends Error {
  readonly code = 'CLUSTER_REQUEST_FAILED';
  constructor(
    readonly path: string,
    message: string,
    readonly statusCode?: number,
  ) {
    super(`GET ${path}: ${message}`);
    this.name = 'ClusterRequestError';
  }
}

/** GETs against the cluster's API. */
export class ClusterClient {
  readonly #base: URL;

  constructor(private readonly options: ClusterClientOptions) {
    this.#base = new URL(options.url);
    if (this.#base.protocol !== 'http:' && this.#base.protocol !== 'https:') throw new Error(`--cluster: not an http(s) URL: ${options.url}`);
  }

  /** GET `path` and parse the JSON answer. */
  async getJson<T>(path: string): Promise<T> {
    const body = await this.getText(path, 'application/json');
    try {
      return JSON.parse(body) as T;
    } catch (e) {
      throw new ClusterRequestError(path, `invalid JSON: ${(e as Error).message}`);
    }
  }

  /** GET `path`; resolves with the body of a 2xx answer. */
  getText(path: string, accept = '*/*'): Promise<string> {
    const url = new URL(path, this.#base);
    const headers: Record<string, string> = { Accept: accept, 'User-Agent': 'kube-stream-proxy-dev-metrics' };
    if (this.options.tokenFile) {
      const token = readFileSync(this.options.tokenFile, 'utf8').trim();
      if (token) headers.Authorization = `Bearer ${token}`;
    }
    const timeoutMs = this.options.timeoutMs ?? DEFAULT_CLUSTER_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      const fail = (message: string, statusCode?: number): void => reject(new ClusterRequestError(path, message, statusCode));
      const onResponse = (res: IncomingMessage): void => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_BODY_BYTES) {
            req.destroy();
            fail(`answer larger than ${MAX_BODY_BYTES} bytes`);
          } else chunks.push(c);
        });
        res.on('error', (e) => fail(e.message));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          const code = res.statusCode ?? 0;
          if (code < 200 || code > 299) return fail(`${code} ${body.slice(0, 300)}`, code);
          resolve(body);
        });
      };
      const req =
        url.protocol === 'https:'
          ? httpsRequest(url, { headers, ca: this.options.ca, timeout: timeoutMs }, onResponse)
          : httpRequest(url, { headers, timeout: timeoutMs }, onResponse);
      req.on('timeout', () => {
        req.destroy();
        fail(`no answer within ${timeoutMs} ms`);
      });
      req.on('error', (e) => fail(e.message));
      req.end();
    });
  }
}
