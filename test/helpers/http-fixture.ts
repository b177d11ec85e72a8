/**
 * A loopback HTTP server for port-forward tests: `GET /bytes/N` streams N deterministic
 * pseudo-random bytes (optionally `?seed=S`, default 1) with Content-Length, so the client can
 * compare the sha256 of what arrived through the tunnel with {@link BytesServer.expected}.
 */
import { createServer, get as httpGet, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { deterministicDigest, deterministicStream } from './random-data.js';
import { HashingSink, type Digest } from './hash.js';

/** A running fixture server. */
export interface BytesServer {
  /** Loopback port it listens on (127.0.0.1). */
  port: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Requests answered so far (each counts once it started streaming). */
  readonly requests: number;
  /** The digest `/bytes/N?seed=S` has. */
  expected(length: number, seed?: number): Digest;
  close(): Promise<void>;
}

/** Start the fixture on 127.0.0.1 (port 0 = a free port). */
export async function startBytesServer(port = 0): Promise<BytesServer> {
  let requests = 0;
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fixture');
    const m = /^\/bytes\/(\d+)$/.exec(url.pathname);
    if (req.method !== 'GET' || !m) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    const length = Number(m[1]);
    const seed = Number(url.searchParams.get('seed') ?? '1');
    if (!Number.isSafeInteger(length) || !Number.isSafeInteger(seed)) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('bad length or seed\n');
      return;
    }
    requests++;
    res.writeHead(200, {
      'content-type': 'application/octet-stream',
      'content-length': String(length),
      'x-sha256': deterministicDigest(seed, length).sha256,
    });
    pipeline(deterministicStream(seed, length), res).catch(() => res.destroy());
  });
  // Keep-alive sockets would make close() wait; tests open a new connection per request anyway.
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const actual = (server.address() as AddressInfo).port;
  return {
    port: actual,
    url: `http://127.0.0.1:${actual}`,
    get requests() {
      return requests;
    },
    expected: (length, seed = 1) => deterministicDigest(seed, length),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Result of {@link downloadDigest}. */
export interface DownloadResult extends Digest {
  status: number;
  /** The `x-sha256` header the fixture sent (what the body should hash to). */
  headerSha256: string | undefined;
}

/**
 * GET `url` on a fresh TCP connection (no keep-alive, no proxy) and hash the body as it streams.
 * Rejects on socket errors or after `timeoutMs`.
 */
export function downloadDigest(url: string, timeoutMs = 60_000): Promise<DownloadResult> {
  return new Promise((resolve, reject) => {
    const agent = new Agent({ keepAlive: false, maxSockets: 1 });
    const req = httpGet(url, { agent }, (res) => {
      const sink = new HashingSink();
      pipeline(res, sink).then(
        () => {
          clearTimeout(timer);
          const header = res.headers['x-sha256'];
          resolve({ ...sink.digest(), status: res.statusCode ?? 0, headerSha256: typeof header === 'string' ? header : undefined });
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(new Error(`download of ${url} failed after ${sink.byteLength} bytes: ${String(err)}`));
        },
      );
    });
    const timer = setTimeout(() => req.destroy(new Error(`download of ${url} timed out after ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
