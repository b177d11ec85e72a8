/**
 * The remote recorder (`kube-stream-proxy recorder --listen HOST:PORT --dir DIR`): one process that
 * N proxy replicas stream their recordings to (`recorder-ingest.ts`), storing them in the same
 * directory layout as the directory sink, with a retention age, and serving them to viewers:
 *
 * | path | who | what |
 * |---|---|---|
 * | `PUT /api/v1/ingest/{id}[?resume=1&offset=N]`, `PUT /api/v1/ingest/{id}/summary` | replicas | upload (see recorder-ingest.ts) |
 * | `GET /api/v1/sessions[?user=U&pod=P&since=ISO]` | viewers (`list`) | `{items: [...]}`, the index entries the caller may see (`state`: `finished`, `open`, or `invalid` for an index entry that is not valid) |
 * | `GET /api/v1/sessions/{id}` | viewers (`get`) | one index entry |
 * | `GET /api/v1/sessions/{id}/cast` | viewers (`get`) | the `.cast` (`application/x-asciicast`) |
 * | `GET /api/v1/sessions/{id}/live` | viewers (`get`) | Server-Sent Events for asciinema-player's EventSource driver |
 * | `GET /sessions/` (+ assets) | viewers (`list`) | the web page (recorder-page.ts) |
 * | `GET /healthz` | anyone | `ok` |
 *
 * Authentication and authorization: `recorder-auth.ts` (each review names the recording's cluster and
 * namespace). 401 without credentials, 403 when the caller may not; nothing of a recording is
 * returned before both passed.
 */
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { UserInfo } from '../auth/user-info.js';
import { castPath } from './cast-file.js';
import { prepareRecordingDir } from './directory-sink.js';
import { LiveCasts } from './live-casts.js';
import { PAGE_CSP, pageAssets } from './recorder-page.js';
import type { ReplicaAuth, ViewerAuth } from './recorder-auth.js';
import { RecorderIngest } from './recorder-ingest.js';
import { RecordingStore, type RecordingEntry } from './recording-store.js';
import { escapeTerminal } from './terminal-escape.js';

/** Options of {@link startRecorder}. */
export interface RecorderOptions {
  dir: string;
  host: string;
  port: number;
  /** HTTPS (and client certificates for replicas when `requestCert`). */
  tls?: { cert: Buffer; key: Buffer; ca?: Buffer; requestCert?: boolean };
  viewers: ViewerAuth;
  replicas: ReplicaAuth;
  /** Recordings older than this are deleted (0 = kept forever). */
  retentionMs: number;
  log?: { info(msg: string): void; warn(msg: string): void };
}

/** A running recorder. */
export interface RunningRecorder {
  url: string;
  store: RecordingStore;
  /** Run the retention sweep now; resolves with the ids removed. */
  sweep(): Promise<string[]>;
  close(): Promise<void>;
}

function send(res: ServerResponse, code: number, body: string | object, type = 'application/json'): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(code, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
  res.end(text);
}

function matchesQuery(e: RecordingEntry, q: URLSearchParams): boolean {
  const user = q.get('user');
  const pod = q.get('pod');
  const since = q.get('since');
  if (user !== null && e.user !== user) return false;
  if (pod !== null && e.pod !== pod) return false;
  if (since !== null && Date.parse(e.start) < Date.parse(since)) return false;
  return true;
}

/** Start the recorder. */
export async function startRecorder(o: RecorderOptions): Promise<RunningRecorder> {
  await prepareRecordingDir(o.dir);
  const store = new RecordingStore(o.dir);
  const live = new LiveCasts();
  const ingest = new RecorderIngest(o.dir, live);
  const assets = pageAssets();

  /** Authenticated viewer or an answer already sent. */
  const viewer = async (req: IncomingMessage, res: ServerResponse): Promise<UserInfo | undefined> => {
    const user = await o.viewers.authenticate(req);
    if (user === undefined) {
      res.setHeader('www-authenticate', 'Bearer realm="kube-stream-proxy recorder"');
      send(res, 401, { error: 'Unauthorized' });
    }
    return user;
  };
  /**
   * The entries `user` may list, or undefined (403) when it may list nothing at all. Reviewed per
   * cluster (`list` at that cluster's scope: all of it) and then per (cluster, namespace), each
   * question asked once per request.
   */
  const visible = async (user: UserInfo, entries: RecordingEntry[]): Promise<RecordingEntry[] | undefined> => {
    const answers = new Map<string, Promise<boolean>>();
    const ask = (cluster: string, namespace?: string): Promise<boolean> => {
      const key = JSON.stringify([cluster, namespace ?? null]);
      let a = answers.get(key);
      if (a === undefined) answers.set(key, (a = o.viewers.allowed(user, { verb: 'list', ...(cluster ? { cluster } : {}), ...(namespace !== undefined ? { namespace } : {}) })));
      return a;
    };
    // The proxy's own upstream at cluster scope first: such a viewer gets a list, empty or not.
    let anyScope = await ask('');
    const out: RecordingEntry[] = [];
    for (const e of entries) {
      const cluster = e.cluster ?? '';
      const scope = await ask(cluster);
      anyScope ||= scope;
      if (scope || (await ask(cluster, e.namespace))) out.push(e);
    }
    // Not allowed to list at all (nothing visible and no cluster-scope list): 403, not an empty list.
    return out.length > 0 || anyScope ? out : undefined;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://recorder');
    const path = url.pathname;
    if (path === '/healthz') return send(res, 200, 'ok', 'text/plain');
    const ingestMatch = /^\/api\/v1\/ingest\/([^/]+)(\/summary)?$/.exec(path);
    if (ingestMatch) {
      if (req.method !== 'PUT') return send(res, 405, { error: 'use PUT' });
      const replica = o.replicas.authenticate(req);
      if (replica === undefined) return send(res, 401, { error: 'Unauthorized' });
      const offset = Number(url.searchParams.get('offset') ?? '0');
      if (!Number.isSafeInteger(offset) || offset < 0) return send(res, 400, { error: 'bad offset' });
      return ingest.handle(req, res, ingestMatch[1]!, ingestMatch[2] ? 'summary' : 'cast', replica, offset, url.searchParams.get('resume') === '1');
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, { error: 'method not allowed' });
    if (path === '/sessions') {
      res.writeHead(301, { location: '/sessions/' });
      return void res.end();
    }
    const asset = assets.get(path);
    if (asset) {
      const user = await viewer(req, res);
      if (!user) return;
      if (path === '/sessions/' && (await visible(user, await store.list())) === undefined) return send(res, 403, 'Forbidden: you may not list session recordings.\n', 'text/plain');
      res.writeHead(200, { 'content-type': asset.type, 'content-security-policy': PAGE_CSP, 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' });
      return void res.end(asset.body);
    }
    if (path === '/api/v1/sessions') {
      const user = await viewer(req, res);
      if (!user) return;
      const items = await visible(user, (await store.list()).filter((e) => matchesQuery(e, url.searchParams)));
      if (items === undefined) return send(res, 403, { error: 'Forbidden: you may not list session recordings' });
      return send(res, 200, { items });
    }
    const one = /^\/api\/v1\/sessions\/([^/]+)(\/cast|\/live)?$/.exec(path);
    if (one) {
      const user = await viewer(req, res);
      if (!user) return;
      const entry = await store.get(one[1]!);
      if (!entry) return send(res, 404, { error: 'no such recording' });
      if (!(await o.viewers.allowed(user, { verb: 'get', ...(entry.cluster ? { cluster: entry.cluster } : {}), namespace: entry.namespace, name: entry.id }))) return send(res, 403, { error: `Forbidden: you may not get recording ${entry.id}` });
      if (one[2] === undefined) return send(res, 200, { ...entry, state: live.isLive(entry.id) ? 'open' : entry.state });
      if (entry.record === 'metadata') return send(res, 404, { error: 'a metadata record has no cast' });
      if (one[2] === '/cast') {
        res.writeHead(200, { 'content-type': 'application/x-asciicast', 'content-disposition': `attachment; filename="${entry.id}.cast"`, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
        return void createReadStream(castPath(o.dir, entry.id)).on('error', () => res.destroy()).pipe(res);
      }
      return follow(req, res, entry.id);
    }
    send(res, 404, { error: 'not found' });
  };

  const follow = async (req: IncomingMessage, res: ServerResponse, id: string): Promise<void> => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    const follower = {
      reset: (s: object) => res.write(`data: ${JSON.stringify(s)}\n\n`),
      event: (line: string) => res.write(`data: ${line}\n\n`),
      done: () => res.end('event: done\ndata: {}\n\n'),
    };
    let stop = live.follow(id, follower);
    if (!stop) {
      // Finished: the whole terminal at once, then done.
      const once = new LiveCasts();
      once.open(id, await readFile(castPath(o.dir, id)).catch(() => Buffer.alloc(0)));
      stop = once.follow(id, follower);
      once.end(id);
    }
    req.on('close', () => stop?.());
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).catch((e: unknown) => {
      o.log?.warn(escapeTerminal(`recorder: ${req.method} ${new URL(req.url ?? '/', 'http://x').pathname}: ${(e as Error).message}`));
      if (!res.headersSent) send(res, 500, { error: 'internal error' });
      else res.destroy();
    });
  };
  const server: Server = o.tls
    ? createHttpsServer({ cert: o.tls.cert, key: o.tls.key, ...(o.tls.ca ? { ca: o.tls.ca } : {}), requestCert: o.tls.requestCert ?? false, rejectUnauthorized: false }, onRequest)
    : createHttpServer(onRequest);
  server.requestTimeout = 0; // uploads and live follows last as long as sessions
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const sweep = async (): Promise<string[]> => {
    if (o.retentionMs <= 0) return [];
    const removed = await store.removeOlderThan(o.retentionMs, Date.now(), (id) => ingest.isActive(id));
    if (removed.length > 0) o.log?.info(`recorder: retention removed ${removed.length} recordings older than ${o.retentionMs / 1000} s`);
    return removed;
  };
  const sweeper = o.retentionMs > 0 ? setInterval(() => void sweep().catch(() => undefined), Math.min(o.retentionMs / 10, 600_000)) : undefined;
  sweeper?.unref();
  return {
    url: `${o.tls ? 'https' : 'http'}://${host}:${addr.port}`,
    store,
    sweep,
    close: async () => {
      if (sweeper) clearInterval(sweeper);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
