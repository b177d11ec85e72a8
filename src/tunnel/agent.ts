/**
 * The agent (`kube-stream-proxy agent`): runs next to a cluster's apiserver, dials OUT to the
 * proxy's agent listener, authenticates for its cluster and then serves the proxy's tunnel streams
 * as the HTTP/2 server on the connection it dialed (`http2.performServerHandshake`). Each CONNECT
 * stream is served by `agent-stream.ts`: connected to the agent's own apiserver (`--upstream`, never an address the proxy names)
 * and relayed byte for byte; the proxy's UpgradeAwareProxy, translator and tunnel do the HTTP work
 * on top (docs/agent.md explains why the 101 check there covers the agent).
 *
 * The connect request rides the raw upgrade (`https://`) or a WebSocket (`wss://`,
 * `websocket-carrier.ts`) and authenticates with the token file and/or a client certificate, all
 * re-read on every connect. One TunnelAgent is one tunnel to one proxy address; `agent-pool.ts`
 * keeps one per proxy replica.
 *
 * The tunnel is kept alive with PINGs and re-dialed after any loss with jittered exponential
 * backoff (`backoff.ts`); a refusal (bad token) is logged with the proxy's reason and retried the
 * same way, so a fixed token file heals without a restart.
 */
import { readFileSync } from 'node:fs';
import { performServerHandshake, type ServerHttp2Session } from 'node:http2';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { readResponseHead } from '../wire/response-head.js';
import type { AgentLogger } from './agent-logger.js';
import type { Upstream } from '../routing/upstream.js';
import { reconnectDelayMs, RECONNECT_RESET_AFTER_MS } from './backoff.js';
import { keepTunnelAlive } from './keepalive.js';
import { jsStreamOver } from './socket-stream.js';
import { dialWebSocketCarrier, isWebSocketUrl } from './websocket-carrier.js';
import { serveTunnelStream } from './agent-stream.js';
import type { AccessAs } from './agent-request.js';
import {
  ACCESS_AS_HEADER,
  AGENT_CONNECT_PATH,
  CLUSTER_HEADER,
  TUNNEL_HTTP2_OPTIONS,
  TUNNEL_SESSION_WINDOW_BYTES,
  TUNNEL_UPGRADE_PROTOCOL,
  UPSTREAM_HOST_HEADER,
} from './protocol.js';

/** Deadline for dialing the proxy and receiving its answer to the connect request. */
export const AGENT_CONNECT_TIMEOUT_MS = 10_000;

export type { AgentLogger } from './agent-logger.js';

/** Options of {@link TunnelAgent}. */
export interface TunnelAgentOptions {
  /**
   * `https://host:port` (or `http://` on loopback) of the proxy's agent listener; `wss://` (`ws://`
   * on loopback) for the WebSocket carrier.
   */
  proxyUrl: URL;
  /**
   * The address to dial instead of the URL's host: one replica behind a DNS name (`agent-pool.ts`).
   * The TLS server name and the `Host` header stay the URL's.
   */
  dialAddress?: string;
  /** CA bundle verifying the proxy's serving certificate (default: Node's roots). */
  proxyCa?: Buffer;
  clusterName: string;
  /**
   * File holding the agent token (re-read on every connect, so rotation needs no restart); may be
   * absent when the agent authenticates with a client certificate.
   */
  tokenFile?: string;
  /** Client certificate and key files presented to the proxy (re-read on every connect). */
  clientCertFile?: string;
  clientKeyFile?: string;
  /** The cluster's apiserver: every tunnel stream is connected here. */
  upstream: Upstream;
  /** `--access-as` (default passthrough): told to the proxy at connect, applied to every request. */
  accessAs?: AccessAs;
  log: AgentLogger;
  /** Random source for the backoff jitter (tests). */
  random?: () => number;
  /** PING period (tests); default TUNNEL_PING_INTERVAL_MS. */
  pingIntervalMs?: number;
}

/** The outcome of one connect attempt that got an answer. */
type Attempt = { kind: 'connected'; session: ServerHttp2Session } | { kind: 'refused'; status: number; message: string };

/** One agent: one tunnel to one proxy, re-dialed for as long as it runs. */
export class TunnelAgent {
  readonly #o: TunnelAgentOptions;
  #stopped = false;
  #session: ServerHttp2Session | undefined;
  /** Sessions the proxy sent GOAWAY on, still finishing their streams. */
  readonly #draining = new Set<ServerHttp2Session>();
  #wake: (() => void) | undefined;
  readonly #done: Promise<void>;
  /** Tunnels established so far (1 = the first, more = reconnects). */
  connections = 0;
  /** Set while a tunnel is up. */
  connected = false;
  /** `origin` or `origin (address)`, for logs. */
  readonly proxy: string;

  constructor(o: TunnelAgentOptions) {
    this.#o = o;
    this.proxy = o.dialAddress !== undefined ? `${o.proxyUrl.origin} (${o.dialAddress})` : o.proxyUrl.origin;
    this.#done = this.#run();
  }

  /** Stop: GOAWAY on the tunnel (streams in flight may finish), no more reconnects. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#wake?.();
    this.#session?.close();
    for (const s of this.#draining) s.close();
    await this.#done;
  }

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#stopped) {
      const started = Date.now();
      try {
        const result = await this.#connect();
        if (result.kind === 'refused') {
          this.#o.log.warn({ proxy: this.proxy, cluster: this.#o.clusterName, status: result.status, message: result.message }, 'proxy refused the agent');
        } else {
          await this.#serve(result.session);
        }
      } catch (e) {
        this.#o.log.warn({ proxy: this.proxy, err: (e as Error).message }, 'tunnel to the proxy failed');
      }
      if (this.#stopped) break;
      if (Date.now() - started >= RECONNECT_RESET_AFTER_MS) attempt = 0;
      const delay = reconnectDelayMs(attempt++, (this.#o.random ?? Math.random)());
      this.#o.log.info({ proxy: this.proxy, delayMs: delay }, 'reconnecting');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }

  #dialProxy(clientCert: { cert: Buffer; key: Buffer } | undefined): Socket {
    const url = this.#o.proxyUrl;
    const name = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const host = this.#o.dialAddress ?? name;
    const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    if (url.protocol === 'https:') {
      return tlsConnect({
        host,
        port,
        ALPNProtocols: ['http/1.1'],
        ...(isIP(name) ? {} : { servername: name }),
        ...(this.#o.proxyCa ? { ca: this.#o.proxyCa } : {}),
        ...clientCert,
      });
    }
    return netConnect({ host, port });
  }

  /** The token and client certificate, read now (files may have been rotated since the last connect). */
  #credentials(): { token?: string; clientCert?: { cert: Buffer; key: Buffer } } {
    const o = this.#o;
    return {
      ...(o.tokenFile !== undefined ? { token: readFileSync(o.tokenFile, 'utf8').trim() } : {}),
      ...(o.clientCertFile !== undefined && o.clientKeyFile !== undefined ? { clientCert: { cert: readFileSync(o.clientCertFile), key: readFileSync(o.clientKeyFile) } } : {}),
    };
  }

  /** The headers of the connect request, either carrier. */
  #connectHeaders(token: string | undefined): Record<string, string> {
    return {
      ...(token !== undefined ? { Authorization: `Bearer ${token}` } : {}),
      [CLUSTER_HEADER]: this.#o.clusterName,
      [ACCESS_AS_HEADER]: this.#o.accessAs ?? 'passthrough',
      [UPSTREAM_HOST_HEADER]: this.#o.upstream.host,
    };
  }

  async #connect(): Promise<Attempt> {
    const { token, clientCert } = this.#credentials();
    if (isWebSocketUrl(this.#o.proxyUrl)) return this.#connectWebSocket(token, clientCert);
    const socket = this.#dialProxy(clientCert);
    socket.on('error', () => {});
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`no answer from the proxy within ${AGENT_CONNECT_TIMEOUT_MS} ms`)), AGENT_CONNECT_TIMEOUT_MS);
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once(this.#o.proxyUrl.protocol === 'https:' ? 'secureConnect' : 'connect', resolve);
        socket.once('error', reject);
        controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
      });
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 30_000);
      socket.write(
        `GET ${AGENT_CONNECT_PATH} HTTP/1.1\r\n` +
          `Host: ${this.#o.proxyUrl.host}\r\n` +
          `Connection: Upgrade\r\n` +
          `Upgrade: ${TUNNEL_UPGRADE_PROTOCOL}\r\n` +
          Object.entries(this.#connectHeaders(token))
            .map(([k, v]) => `${k}: ${v}\r\n`)
            .join('') +
          `\r\n`,
      );
      const response = await readResponseHead(socket, controller.signal);
      const { statusCode, headers } = response.head;
      if (statusCode !== 101 || (headers.get('upgrade') ?? '').toLowerCase() !== TUNNEL_UPGRADE_PROTOCOL) {
        const body = await readSome(socket, response.rest, controller.signal);
        socket.destroy();
        return { kind: 'refused', status: statusCode, message: refusalMessage(body) };
      }
      if (response.rest.length > 0) socket.unshift(response.rest);
      // Reversed roles: the agent dialed and is the HTTP/2 server on this connection.
      const session = performServerHandshake(this.#o.proxyUrl.protocol === 'https:' ? jsStreamOver(socket) : socket, TUNNEL_HTTP2_OPTIONS);
      return { kind: 'connected', session };
    } catch (e) {
      socket.destroy();
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The `wss://` carrier (`websocket-carrier.ts`): HTTP/2 over a WebSocket. */
  async #connectWebSocket(token: string | undefined, clientCert: { cert: Buffer; key: Buffer } | undefined): Promise<Attempt> {
    const signal = AbortSignal.timeout(AGENT_CONNECT_TIMEOUT_MS);
    const result = await dialWebSocketCarrier({
      url: this.#o.proxyUrl,
      ...(this.#o.dialAddress !== undefined ? { dialAddress: this.#o.dialAddress } : {}),
      headers: this.#connectHeaders(token),
      ...(this.#o.proxyCa ? { ca: this.#o.proxyCa } : {}),
      ...(clientCert ? { clientCert } : {}),
      signal,
    }).catch((e: unknown) => {
      throw signal.aborted ? new Error(`no answer from the proxy within ${AGENT_CONNECT_TIMEOUT_MS} ms`) : e;
    });
    if (result.kind === 'refused') return { kind: 'refused', status: result.status, message: refusalMessage(result.body) };
    // Reversed roles, as on the raw carrier.
    return { kind: 'connected', session: performServerHandshake(result.stream, TUNNEL_HTTP2_OPTIONS) };
  }

  /** Serve the tunnel until it closes. */
  async #serve(session: ServerHttp2Session): Promise<void> {
    this.#session = session;
    this.connections++;
    this.connected = true;
    this.#o.log.info({ proxy: this.proxy, cluster: this.#o.clusterName }, 'tunnel established');
    session.on('error', (err) => this.#o.log.info({ proxy: this.proxy, err: err.message }, 'tunnel error'));
    session.once('localSettings', () => session.setLocalWindowSize(TUNNEL_SESSION_WINDOW_BYTES));
    const streamContext = { upstream: this.#o.upstream, clusterName: this.#o.clusterName, accessAs: this.#o.accessAs ?? 'passthrough', log: this.#o.log } as const;
    session.on('stream', (stream, headers) => serveTunnelStream(stream, headers, streamContext));
    keepTunnelAlive(session, {
      ...(this.#o.pingIntervalMs !== undefined ? { intervalMs: this.#o.pingIntervalMs } : {}),
      onDead: (reason) => this.#o.log.warn({ proxy: this.proxy, reason }, 'tunnel dead'),
    });
    if (this.#stopped) session.close();
    // A GOAWAY from the proxy (its graceful shutdown) means: open a new tunnel now. The old session
    // keeps serving its streams in flight until they end.
    const goaway = await new Promise<boolean>((resolve) => {
      session.once('close', () => resolve(false));
      session.once('goaway', () => resolve(true));
    });
    this.connected = false;
    if (this.#session === session) this.#session = undefined;
    if (goaway) {
      this.#draining.add(session);
      session.once('close', () => this.#draining.delete(session));
    }
    this.#o.log.info({ proxy: this.proxy, goaway }, goaway ? 'proxy sent GOAWAY: reconnecting, streams in flight finish' : 'tunnel closed');
  }
}

/** The message of a refusal's body: a Status's `message`, else the text. Pure. */
function refusalMessage(body: Buffer): string {
  const text = body.toString('utf8').trim();
  try {
    return (JSON.parse(text) as { message?: string }).message ?? text;
  } catch {
    return text; // not a Status
  }
}

/** What arrived with a refusal's head plus whatever follows within a short wait (at most 4 KiB). */
async function readSome(socket: Duplex, first: Buffer, signal: AbortSignal): Promise<Buffer> {
  let body = first;
  await new Promise<void>((resolve) => {
    const t = setTimeout(done, 1_000);
    function done(): void {
      clearTimeout(t);
      socket.off('data', onData);
      socket.off('end', done);
      socket.off('close', done);
      signal.removeEventListener('abort', done);
      resolve();
    }
    const onData = (d: Buffer): void => {
      body = Buffer.concat([body, d]);
      if (body.length >= 4096) done();
    };
    socket.on('data', onData);
    socket.once('end', done);
    socket.once('close', done);
    signal.addEventListener('abort', done, { once: true });
    socket.resume();
  });
  return body.subarray(0, 4096);
}
