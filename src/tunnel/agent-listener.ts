/**
 * The proxy's agent listener (`serve --agent-listen`): agents dial in, authenticate for the cluster
 * they name — with a client certificate verified by `--agent-client-ca-file` whose CN is that
 * cluster (`agent-client-cert.ts`), or a bearer token from `--agent-token-file` — and on `101` the
 * connection (a raw upgrade, or a WebSocket: `websocket-carrier.ts`) becomes an HTTP/2 session
 * with the proxy as the client (see `protocol.ts`). The session is registered for its cluster once
 * the agent's HTTP/2 SETTINGS arrived, until it closes or stops answering PINGs. Refusals are
 * Kubernetes Status answers, logged with the reason (never the token).
 */
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { connect as http2Connect } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import { closeAfterAnswer } from '../wire/close-after-answer.js';
import type { HostPort } from '../listen-address.js';
import type { TunnelMetrics, TunnelRefusalReason } from '../metrics.js';
import { errorStatus } from '../status.js';
import { clientCertificateIdentity } from './agent-client-cert.js';
import type { AgentRegistry } from './agent-registry.js';
import type { AgentTokenFile } from './agent-tokens.js';
import { keepTunnelAlive } from './keepalive.js';
import { jsStreamOver } from './socket-stream.js';
import type { AuthnMode } from '../auth/request-auth.js';
import { TUNNEL_WEBSOCKET_PROTOCOL, WebSocketCarrierServer } from './websocket-carrier.js';
import {
  ACCESS_AS_HEADER,
  AGENT_CONNECT_PATH,
  CLUSTER_HEADER,
  isValidClusterName,
  TUNNEL_HTTP2_OPTIONS,
  TUNNEL_SESSION_WINDOW_BYTES,
  TUNNEL_SETTINGS_TIMEOUT_MS,
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
  /** Agent tokens (`--agent-token-file`); absent = client certificates only. */
  tokens?: AgentTokenFile;
  /** CA bundle verifying agents' client certificates (`--agent-client-ca-file`; TLS only). */
  clientCa?: Buffer;
  registry: AgentRegistry;
  metrics?: TunnelMetrics;
  log: TunnelLogger;
  /** `--authn`: every agent's `--access-as` must match it (default passthrough). */
  authn?: AuthnMode;
}

/** What the listener knows of a tunnel it accepted. */
interface TunnelInfo {
  cluster: string;
  upstreamHost: string;
  auth: 'certificate' | 'token';
  carrier: 'raw' | 'websocket';
  remoteAddress: string | undefined;
}

/** The agent listener. */
export class AgentListener {
  readonly #o: AgentListenerOptions;
  readonly #webSockets = new WebSocketCarrierServer();
  readonly #server: Server;
  readonly #pending = new Set<Duplex>();
  #draining = false;

  constructor(o: AgentListenerOptions) {
    this.#o = o;
    // With a client CA the handshake asks for a certificate but lets one that fails verification
    // through: the upgrade then answers a 401 Status saying why (a TLS alert says nothing useful).
    const server = o.tls
      ? createHttpsServer({ cert: o.tls.cert, key: o.tls.key, ...(o.clientCa ? { ca: o.clientCa, requestCert: true, rejectUnauthorized: false } : {}) })
      : createHttpServer();
    this.#server = server as unknown as Server;
    this.#server.on('request', (req: IncomingMessage, res) => {
      res.writeHead(400, { 'Content-Type': 'application/json', Connection: 'close' });
      res.end(
        JSON.stringify(
          errorStatus(400, `agents connect with GET ${AGENT_CONNECT_PATH} and Upgrade: ${TUNNEL_UPGRADE_PROTOCOL}, or a WebSocket with subprotocol ${TUNNEL_WEBSOCKET_PROTOCOL}`, 'BadRequest'),
        ),
      );
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

  /**
   * Graceful shutdown began: refuse new tunnels with a 503 Status (the agent backs off and, behind a
   * load balancer or with a tunnel to every replica, is served elsewhere). Tunnels up stay up.
   */
  startDraining(): void {
    this.#draining = true;
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
    if (this.#draining) return refuse(503, 'shutting_down', 'the proxy is shutting down: connect to another replica');
    const path = (req.url ?? '').split('?')[0];
    const upgrade = (req.headers.upgrade ?? '').toLowerCase();
    // Two carriers: the raw upgrade, or a WebSocket with the tunnel subprotocol (websocket-carrier.ts).
    const carrier = upgrade === TUNNEL_UPGRADE_PROTOCOL ? 'raw' : upgrade === 'websocket' && WebSocketCarrierServer.offersTunnelProtocol(req) ? 'websocket' : undefined;
    if (req.method !== 'GET' || path !== AGENT_CONNECT_PATH || carrier === undefined) {
      return refuse(
        400,
        'bad_request',
        `agents connect with GET ${AGENT_CONNECT_PATH} and Upgrade: ${TUNNEL_UPGRADE_PROTOCOL}, or a WebSocket with subprotocol ${TUNNEL_WEBSOCKET_PROTOCOL}`,
      );
    }
    const cluster = req.headers[CLUSTER_HEADER.toLowerCase()];
    if (typeof cluster !== 'string' || !isValidClusterName(cluster)) {
      return refuse(400, 'bad_request', `${CLUSTER_HEADER}: a cluster name (DNS-1123 subdomain) is required`);
    }
    let auth: 'certificate' | 'token';
    const cert = this.#o.clientCa ? clientCertificateIdentity(req.socket as TLSSocket) : { kind: 'none' as const };
    if (cert.kind === 'unverified') return refuse(401, 'unauthorized', `Unauthorized: the agent client certificate is not valid: ${cert.reason}`);
    if (cert.kind === 'verified') {
      // A verified certificate decides alone: a token beside it cannot widen it to another cluster.
      if (cert.commonName !== cluster) {
        return refuse(403, 'forbidden', `Forbidden: the agent client certificate (CN ${JSON.stringify(cert.commonName)}) is not valid for cluster "${cluster}"`);
      }
      auth = 'certificate';
    } else {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
      if (!m || !this.#o.tokens) {
        return refuse(401, 'unauthorized', `Unauthorized: no agent ${this.#o.tokens ? (this.#o.clientCa ? 'client certificate or bearer token' : 'bearer token') : 'client certificate'}`);
      }
      const tokenCluster = this.#o.tokens.clusterFor(m[1]!);
      if (this.#o.tokens.lastError) this.#o.log.warn({ path: this.#o.tokens.path, err: this.#o.tokens.lastError }, 'agent token file not re-read; using the last good one');
      if (tokenCluster === undefined) return refuse(401, 'unauthorized', 'Unauthorized: unknown agent token');
      if (tokenCluster !== cluster) return refuse(403, 'forbidden', `Forbidden: the agent token is not valid for cluster "${cluster}"`);
      auth = 'token';
    }
    const accessAs = req.headers[ACCESS_AS_HEADER.toLowerCase()] ?? 'passthrough';
    const authn = this.#o.authn ?? 'passthrough';
    if (accessAs !== authn) {
      return refuse(
        400,
        'bad_request',
        `the agent's --access-as ${JSON.stringify(accessAs)} does not match this proxy's --authn=${authn}: run the agent with --access-as ${authn}`,
      );
    }
    const upstreamHostHeader = req.headers[UPSTREAM_HOST_HEADER.toLowerCase()];
    const upstreamHost = typeof upstreamHostHeader === 'string' && /^[A-Za-z0-9.:[\]-]+$/.test(upstreamHostHeader) ? upstreamHostHeader : cluster;
    const tunnel: TunnelInfo = { cluster, upstreamHost, auth, carrier, remoteAddress: req.socket.remoteAddress };
    (socket as Socket).setNoDelay?.(true);
    // Node's HTTP server makes its sockets half-open capable; HTTP/2 has no half-closed connection,
    // and with it on an agent that died (FIN) left the session, and every stream on it, hanging.
    if (!this.#o.tls) (socket as Socket).allowHalfOpen = false;
    this.#pending.add(socket);
    if (carrier === 'websocket') {
      this.#webSockets.accept(req, socket, head, (stream) => this.#startSession(socket, stream, tunnel));
      return;
    }
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${TUNNEL_UPGRADE_PROTOCOL}\r\n\r\n`);
    if (head.length > 0) socket.unshift(head);
    this.#startSession(socket, this.#o.tls ? jsStreamOver(socket) : socket, tunnel);
  }

  /**
   * Run the HTTP/2 session over `carrier` (the upgraded `socket`, or a stream over it) and register
   * it once it is proven: the agent's SETTINGS arrived ('remoteSettings'; Node's 'connect' fires as
   * soon as our own preface is written, whether or not anything answers). An agent that got its 101
   * and stays silent is dropped after {@link TUNNEL_SETTINGS_TIMEOUT_MS} and never routable; one
   * whose PING goes unanswered leaves the registry at once.
   */
  #startSession(socket: Duplex, carrier: Duplex, t: TunnelInfo): void {
    const { cluster, upstreamHost, auth, remoteAddress } = t;
    const { registry, metrics, log } = this.#o;
    // Reversed roles: the agent dialed, the proxy is the HTTP/2 client on that connection.
    const session = http2Connect('http://agent.invalid', { ...TUNNEL_HTTP2_OPTIONS, createConnection: () => carrier });
    session.on('error', (err) => log.info({ cluster, remoteAddress, err: err.message }, 'agent tunnel error'));
    session.once('connect', () => session.setLocalWindowSize(TUNNEL_SESSION_WINDOW_BYTES));
    let registered = false;
    const settingsDeadline = setTimeout(() => {
      if (registered || session.destroyed) return;
      metrics?.incTunnelDropped('no_settings');
      log.warn({ cluster, remoteAddress, timeoutMs: TUNNEL_SETTINGS_TIMEOUT_MS }, 'agent tunnel dropped: no HTTP/2 SETTINGS after the 101');
      session.destroy();
      socket.destroy();
    }, TUNNEL_SETTINGS_TIMEOUT_MS);
    settingsDeadline.unref();
    session.once('remoteSettings', () => {
      clearTimeout(settingsDeadline);
      if (session.closed || session.destroyed) return;
      registered = true;
      this.#pending.delete(socket);
      const tunnel = { cluster, session, remoteAddress, upstreamHost, connectedAt: Date.now(), socket };
      registry.add(tunnel);
      metrics?.incTunnelAgentConnection(cluster);
      log.info({ cluster, remoteAddress, auth, carrier: t.carrier }, 'agent connected');
      keepTunnelAlive(session, {
        onDead: (reason) => {
          registry.retire(tunnel);
          metrics?.incTunnelDropped('ping_timeout');
          log.warn({ cluster, remoteAddress, reason }, 'agent tunnel dead');
        },
      });
    });
    session.once('close', () => {
      clearTimeout(settingsDeadline);
      this.#pending.delete(socket);
      if (registered) log.info({ cluster, remoteAddress }, 'agent disconnected');
    });
  }
}
