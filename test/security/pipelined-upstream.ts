/**
 * A keep-alive upstream that serves pipelined requests in order, as Go's net/http does for
 * kube-apiserver and the kubelet (Node's own server stops parsing after an upgrade request, so it
 * cannot stand in for them in a smuggling test). Every request it reads is recorded with the
 * credential it came on: the verified client certificate's CN, or the `Authorization` line. Plain TCP
 * or TLS (client certificates requested, verified against `clientCa`). Loopback only.
 *
 * The default answers make it a small apiserver and kubelet: TokenReview from a token table,
 * SubjectAccessReview (allowed unless the user is listed as denied), a pod and its node for the
 * kubelet locator, an aggregated group's discovery, and streaming upgrades: a pod subresource (or a
 * kubelet `/exec|attach|portforward/…` path) with a good `X-Stream-Protocol-Version` gets 101 and its
 * bytes are echoed; a bad version gets the kubelet's 403 and an upgrade anywhere else a 404, both on a
 * connection that stays open for the next pipelined request. An upgrade whose query names
 * {@link REFUSE_UPGRADES} is refused (403) in either protocol: an upstream that takes neither, so the
 * proxy's planned fallback (issue 32) is made and refused too, and nothing is remembered.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer as createNetServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { headerOf, headersOf, Http1RequestParser, type ParsedRequest } from './http1-request-parser.js';

/** One request as the upstream read it. */
export interface SeenRequest extends ParsedRequest {
  /** Connection number (1, 2, …) and the request's place on it (0, 1, …). */
  conn: number;
  index: number;
  /** CN of the verified client certificate the connection came with. */
  clientCN?: string;
  /** The request's `Authorization` line. */
  authorization?: string;
  /** The path without the query. */
  path: string;
}

/** A user the upstream's TokenReview names. */
export interface ReviewedUser {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/** How the upstream answers one request. */
export type Answer =
  | { status: number; body?: unknown; headers?: Record<string, string>; close?: boolean }
  | { switchProtocols: Record<string, string> }
  /** Close the connection without answering (an idle connection the server closed as the request arrived). */
  | { drop: 'fin' | 'reset' }
  /** Never answer (and read nothing more on this connection). */
  | { hang: true };

/** Options. */
export interface PipelinedUpstreamOptions {
  tls?: { cert: Buffer; key: Buffer; clientCa?: Buffer };
  /** Override the default answers; return undefined to fall back to them. */
  answer?: (r: SeenRequest) => Answer | undefined;
  /** TokenReview: token → user (groups, uid — default `uid-<username>`, `''` for none — and extra). Read per request: entries may be added while it runs. */
  tokens?: Record<string, ReviewedUser>;
  /** SubjectAccessReview: users refused everything. */
  deniedUsers?: readonly string[];
  /** The port kubelet-mode node objects name as the kubelet's. */
  kubeletPort?: number;
}

/** A running upstream. */
export interface PipelinedUpstream {
  url: string;
  port: number;
  /** Every request read, in arrival order. */
  requests: SeenRequest[];
  /** Bytes received on upgraded connections after their 101, by connection number. */
  upgraded: Map<number, Buffer>;
  /** Parser anomalies (bytes that were not a well-framed request), by connection number. */
  anomalies: Map<number, string>;
  /** Resolves once connection `conn` has closed (every byte it carried has been parsed by then). */
  closed(conn: number): Promise<void>;
  /** Requests minus the proxy's own review and lookup calls (TokenReview, SubjectAccessReview, pods, nodes, discovery probes). */
  callerRequests(): SeenRequest[];
  close(): Promise<void>;
}

/** The proxy's own calls, which every test ignores when it counts caller requests. */
export function isReviewOrLookup(r: Pick<SeenRequest, 'method' | 'path'>): boolean {
  return (
    (r.method === 'POST' && /^\/apis\/(authentication|authorization)\.k8s\.io\/v1\/(tokenreviews|subjectaccessreviews)$/.test(r.path)) ||
    (r.method === 'GET' && /^\/api\/v1\/(namespaces\/[^/]+\/pods\/[^/]+|nodes\/[^/]+)$/.test(r.path)) ||
    (r.method === 'GET' && /^\/apis\/things\.example\.com\/v1$/.test(r.path))
  );
}

const STREAM_PATH = /^\/api\/v1\/namespaces\/[^/]+\/pods\/[^/]+\/(exec|attach|portforward)$|^\/(exec|attach|portForward)\/[^/]+\/[^/]+(\/[^/]+){0,2}$/;
const STREAM_PROTOCOLS = ['v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io', 'portforward.k8s.io'];
const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

function json(status: number, body: unknown): Answer {
  return { status, body };
}

/** A query parameter: every upgrade to that request-target is refused with 403, SPDY and WebSocket alike. */
export const REFUSE_UPGRADES = 'refuse-upgrades';

/** The text of that refusal, naming the protocol refused (`SPDY/3.1`, `websocket`) so a client can tell which attempt answered. */
export function upgradeRefusedText(protocol: string): string {
  return `upgrade refused by the test upstream (${protocol.toLowerCase()})`;
}

/** The default answers: a small apiserver and kubelet. */
function defaultAnswer(r: SeenRequest, o: PipelinedUpstreamOptions): Answer {
  if (r.upgrade) {
    if (new URLSearchParams(r.target.split('?')[1] ?? '').has(REFUSE_UPGRADES)) return { status: 403, body: upgradeRefusedText(headerOf(r, 'upgrade') ?? '') };
    if (!STREAM_PATH.test(r.path)) return json(404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 404, reason: 'NotFound' });
    const upgrade = (headerOf(r, 'upgrade') ?? '').toLowerCase();
    if (upgrade === 'websocket') {
      const key = headerOf(r, 'sec-websocket-key') ?? '';
      const offered = headersOf(r, 'sec-websocket-protocol').join(',').split(',').map((p) => p.trim()).filter((p) => p !== '');
      return {
        switchProtocols: {
          Upgrade: 'websocket',
          Connection: 'Upgrade',
          'Sec-WebSocket-Accept': createHash('sha1').update(key + WS_GUID).digest('base64'),
          ...(offered[0] ? { 'Sec-WebSocket-Protocol': offered[0] } : {}),
        },
      };
    }
    const versions = headersOf(r, 'x-stream-protocol-version').join(',').split(',').map((p) => p.trim());
    const chosen = STREAM_PROTOCOLS.find((p) => versions.includes(p));
    if (!chosen) return { status: 403, body: 'unable to upgrade: unable to negotiate protocol: client supports ' + JSON.stringify(versions) };
    return { switchProtocols: { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': chosen } };
  }
  if (r.method === 'POST' && r.path === '/apis/authentication.k8s.io/v1/tokenreviews') {
    const token = (JSON.parse(r.body.toString() || '{}') as { spec?: { token?: string } }).spec?.token ?? '';
    const user = o.tokens?.[token];
    const uid = user?.uid ?? `uid-${user?.username}`;
    const reviewed = user && { username: user.username, ...(uid !== '' ? { uid } : {}), groups: user.groups ?? [], ...(user.extra ? { extra: user.extra } : {}) };
    return json(201, { kind: 'TokenReview', apiVersion: 'authentication.k8s.io/v1', status: reviewed ? { authenticated: true, user: reviewed } : { authenticated: false } });
  }
  if (r.method === 'POST' && r.path === '/apis/authorization.k8s.io/v1/subjectaccessreviews') {
    const spec = (JSON.parse(r.body.toString() || '{}') as { spec?: { user?: string } }).spec ?? {};
    const allowed = !(o.deniedUsers ?? []).includes(spec.user ?? '');
    return json(201, { kind: 'SubjectAccessReview', apiVersion: 'authorization.k8s.io/v1', status: { allowed, ...(allowed ? {} : { reason: 'denied by the test upstream' }) } });
  }
  const pod = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/.exec(r.path);
  if (r.method === 'GET' && pod) {
    return json(200, { kind: 'Pod', apiVersion: 'v1', metadata: { namespace: pod[1], name: pod[2], uid: 'pod-uid' }, spec: { nodeName: 'node-1', containers: [{ name: 'main' }] }, status: { phase: 'Running' } });
  }
  if (r.method === 'GET' && r.path === '/api/v1/nodes/node-1') {
    return json(200, { kind: 'Node', apiVersion: 'v1', metadata: { name: 'node-1' }, status: { addresses: [{ type: 'InternalIP', address: '127.0.0.1' }], daemonEndpoints: { kubeletEndpoint: { Port: o.kubeletPort ?? 10250 } } } });
  }
  if (r.method === 'GET' && r.path === '/apis/things.example.com/v1') {
    return json(200, { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: 'things.example.com/v1', resources: [{ name: 'widgets', singularName: 'widget', namespaced: true, kind: 'Widget', verbs: ['get', 'list', 'create'] }] });
  }
  return json(200, { kind: 'Status', apiVersion: 'v1', status: 'Success', code: 200, message: `${r.method} ${r.path}` });
}

function serialize(a: Extract<Answer, { status: number }>, isHead: boolean): Buffer {
  const body = a.body === undefined ? '' : typeof a.body === 'string' ? a.body : JSON.stringify(a.body);
  const type = typeof a.body === 'string' ? 'text/plain; charset=utf-8' : 'application/json';
  const headers = { 'Content-Type': type, 'Content-Length': String(Buffer.byteLength(body)), ...(a.close ? { Connection: 'close' } : {}), ...a.headers };
  const head = `HTTP/1.1 ${a.status} X\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), isHead ? Buffer.alloc(0) : Buffer.from(body, 'utf8')]);
}

/** Start it on 127.0.0.1. */
export async function startPipelinedUpstream(o: PipelinedUpstreamOptions = {}): Promise<PipelinedUpstream> {
  const requests: SeenRequest[] = [];
  const upgraded = new Map<number, Buffer>();
  const anomalies = new Map<number, string>();
  const sockets = new Set<Socket>();
  const closedConns = new Set<number>();
  const closeWaiters = new Map<number, Array<() => void>>();
  let conns = 0;
  const serve = (socket: Socket): void => {
    const conn = ++conns;
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      closedConns.add(conn);
      for (const w of closeWaiters.get(conn) ?? []) w();
      closeWaiters.delete(conn);
    });
    socket.on('error', () => {});
    const tls = socket as TLSSocket;
    const cert = typeof tls.getPeerCertificate === 'function' && tls.authorized ? tls.getPeerCertificate() : undefined;
    const clientCN = cert && typeof cert.subject?.CN === 'string' ? cert.subject.CN : undefined;
    const parser = new Http1RequestParser();
    let index = 0;
    let switched = false;
    const onData = (chunk: Buffer): void => {
      if (switched) {
        upgraded.set(conn, Buffer.concat([upgraded.get(conn) ?? Buffer.alloc(0), chunk]));
        socket.write(chunk);
        return;
      }
      parser.push(chunk);
      for (let r = parser.next(); r; r = parser.next()) {
        const seen: SeenRequest = { ...r, conn, index: index++, path: r.target.split('?')[0]!, ...(clientCN ? { clientCN } : {}) };
        const authorization = headerOf(r, 'authorization');
        if (authorization !== undefined) seen.authorization = authorization;
        requests.push(seen);
        const answer = o.answer?.(seen) ?? defaultAnswer(seen, o);
        if ('hang' in answer) return;
        if ('drop' in answer) {
          if (answer.drop === 'reset') socket.resetAndDestroy();
          else socket.destroy();
          return;
        }
        if ('switchProtocols' in answer) {
          switched = true;
          socket.write(`HTTP/1.1 101 Switching Protocols\r\n${Object.entries(answer.switchProtocols).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`);
          const rest = parser.takePending();
          if (rest.length > 0) onData(rest);
          return;
        }
        socket.write(serialize(answer, r.method === 'HEAD'));
        const closes = headersOf(r, 'connection').join(',').toLowerCase().split(',').some((t) => t.trim() === 'close');
        if (answer.close || closes) {
          socket.end();
          return;
        }
      }
      if (parser.anomaly !== undefined && !anomalies.has(conn)) {
        anomalies.set(conn, parser.anomaly);
        socket.end(serialize({ status: 400, body: `bad request: ${parser.anomaly}`, close: true }, false));
      }
    };
    socket.on('data', onData);
  };
  const server: Server = o.tls
    ? createTlsServer({ cert: o.tls.cert, key: o.tls.key, ...(o.tls.clientCa ? { ca: o.tls.clientCa, requestCert: true, rejectUnauthorized: false } : {}), ALPNProtocols: ['http/1.1'] }, serve)
    : createNetServer(serve);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${o.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    port,
    requests,
    upgraded,
    anomalies,
    closed: (conn) =>
      closedConns.has(conn) ? Promise.resolve() : new Promise<void>((resolve) => closeWaiters.set(conn, [...(closeWaiters.get(conn) ?? []), resolve])),
    callerRequests: () => requests.filter((r) => !isReviewOrLookup(r)),
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
