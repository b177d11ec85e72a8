/**
 * The proxy's agent listener (`serve --agent-listen`): agents dial in, authenticate with a bearer
 * token from `--agent-token-file` for the cluster they name, and on `101` the connection becomes
 * an HTTP/2 session with the proxy as the client (see `protocol.ts`). The session is registered
 * for its cluster until it closes. Refusals are Kubernetes Status answers, logged with the reason
 * (never the token).
 */
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { connect as http2Connect } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { closeAfterAnswer } from '../../proxy/close-after-answer.js';
import type { HostPort } from '../listen-address.js';
import type { TunnelMetrics, TunnelRefusalReason } from '../metrics.js';
import { errorStatus } from '../status.js';
import type { AgentRegistry } from './agent-registry.js';
import type { AgentTokenFile } from './agent-tokens.js';
import { keepTunnelAlive } from './keepalive.js';
import { jsStreamOver } from './socket-stream.js';
import {
  AGENT_CONNECT_PATH,
  CLUSTER_HEADER,
  isValidClusterName,
  TUNNEL_HTTP2_OPTIONS,
  TUNNEL_SESSION_WINDOW_BYTES,
  TUNNEL_UPGRADE_PROTOCOL,
  UPSTREAM_HOST_HEADER,
} from './protocol.js';

/** What the listener logs through (Fastify's logger fits). */
export interface TunnelLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Options of {@link AgentListener}. */
export interface AgentListenerOptions {
  listen: HostPort;
  /** Serving certificate; absent = plain TCP (the configuration allows that on loopback only). */
  tls?: { cert: Buffer; key: Buffer };
  tokens: AgentTokenFile;
  registry: AgentRegistry;
  metrics?: TunnelMetrics;
  log: TunnelLogger;
}

/** The agent listener. */
export class AgentListener {
  readonly #o: AgentListenerOptions;
  readonly #server: Server;
  readonly #pending = new Set<Duplex>();

  constructor(o: AgentListenerOptions) {
    this.#o = o;
    const server = o.tls ? createHttpsServer({ cert: o.tls.cert, key: o.tls.key }) : createHttpServer();
    this.#server = server as unknown as Server;
    this.#server.on('request', (req: IncomingMessage, res) => {
      res.writeHead(400, { 'Content-Type': 'application/json', Connection: 'close' });
      res.end(JSON.stringify(errorStatus(400, `agents connect with GET ${AGENT_CONNECT_PATH} and Upgrade: ${TUNNEL_UPGRADE_PROTOCOL}`, 'BadRequest')));
      this.#refused(req, 'bad_request', 'not an upgrade request');
    });
    this.#server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.#upgrade(req, socket, head));
  }

  /** Start listening; resolves with the bound address as `host:port`. */
  async listen(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#o.listen.port, this.#o.listen.host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const a = this.#server.address() as AddressInfo;
    return a.family === 'IPv6' ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
  }

  /** Stop accepting and drop connections still authenticating (tunnels close via the registry). */
  async close(): Promise<void> {
    for (const s of this.#pending) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #refused(req: IncomingMessage, reason: TunnelRefusalReason, why: string): void {
    this.#o.metrics?.incTunnelAgentRefusal(reason);
    this.#o.log.warn({ remoteAddress: req.socket.remoteAddress, cluster: req.headers[CLUSTER_HEADER.toLowerCase()], reason, why }, 'agent refused');
  }

  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => {});
    const refuse = (code: number, reason: TunnelRefusalReason, message: string): void => {
      this.#refused(req, reason, message);
      closeAfterAnswer(socket, errorStatus(code, message));
    };
    const path = (req.url ?? '').split('?')[0];
    const upgrade = (req.headers.upgrade ?? '').toLowerCase();
    if (req.method !== 'GET' || path !== AGENT_CONNECT_PATH || upgrade !== TUNNEL_UPGRADE_PROTOCOL) {
      return refuse(400, 'bad_request', `agents connect with GET ${AGENT_CONNECT_PATH} and Upgrade: ${TUNNEL_UPGRADE_PROTOCOL}`);
    }
    const cluster = req.headers[CLUSTER_HEADER.toLowerCase()];
    if (typeof cluster !== 'string' || !isValidClusterName(cluster)) {
      return refuse(400, 'bad_request', `${CLUSTER_HEADER}: a cluster name (DNS-1123 subdomain) is required`);
    }
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!m) return refuse(401, 'unauthorized', 'Unauthorized: no agent bearer token');
    const tokenCluster = this.#o.tokens.clusterFor(m[1]!);
    if (this.#o.tokens.lastError) this.#o.log.warn({ path: this.#o.tokens.path, err: this.#o.tokens.lastError }, 'agent token file not re-read; using the last good one');
    if (tokenCluster === undefined) return refuse(401, 'unauthorized', 'Unauthorized: unknown agent token');
    if (tokenCluster !== cluster) return refuse(403, 'forbidden', `Forbidden: the agent token is not valid for cluster "${cluster}"`);
    const upstreamHostHeader = req.headers[UPSTREAM_HOST_HEADER.toLowerCase()];
    const upstreamHost = typeof upstreamHostHeader === 'string' && /^[A-Za-z0-9.:[\]-]+$/.test(upstreamHostHeader) ? upstreamHostHeader : cluster;
    this.#accept(req, socket, head, cluster, upstreamHost);
  }

  #accept(req: IncomingMessage, socket: Duplex, head: Buffer, cluster: string, upstreamHost: string): void {
    const remoteAddress = req.socket.remoteAddress;
    (socket as Socket).setNoDelay?.(true);
    // Node's HTTP server makes its sockets half-open capable; HTTP/2 has no half-closed connection,
    // and with it on an agent that died (FIN) left the session, and every stream on it, hanging.
    if (!this.#o.tls) (socket as Socket).allowHalfOpen = false;
    this.#pending.add(socket);
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${TUNNEL_UPGRADE_PROTOCOL}\r\n\r\n`);
    if (head.length > 0) socket.unshift(head);
    // Reversed roles: the agent dialed, the proxy is the HTTP/2 client on that connection.
    const carrier = this.#o.tls ? jsStreamOver(socket) : socket;
    const session = http2Connect('http://agent.invalid', { ...TUNNEL_HTTP2_OPTIONS, createConnection: () => carrier });
    session.on('error', (err) => this.#o.log.info({ cluster, remoteAddress, err: err.message }, 'agent tunnel error'));
    session.once('connect', () => {
      this.#pending.delete(socket);
      session.setLocalWindowSize(TUNNEL_SESSION_WINDOW_BYTES);
      this.#o.registry.add({ cluster, session, remoteAddress, upstreamHost, connectedAt: Date.now(), socket });
      this.#o.metrics?.incTunnelAgentConnection(cluster);
      this.#o.log.info({ cluster, remoteAddress }, 'agent connected');
      keepTunnelAlive(session, { onDead: (reason) => this.#o.log.warn({ cluster, remoteAddress, reason }, 'agent tunnel dead') });
    });
    session.once('close', () => {
      this.#pending.delete(socket);
      this.#o.log.info({ cluster, remoteAddress }, 'agent disconnected');
    });
  }
}
