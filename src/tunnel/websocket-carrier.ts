/**
 * The `wss://` carrier of the agent tunnel (issue 14 item 1), for L7 load balancers that pass
 * WebSockets but not other upgrades (AWS ALB, GCP HTTPS LB, most Ingress controllers): instead of
 * `Upgrade: kube-stream-proxy-tunnel` the agent opens a WebSocket to `GET /agent/connect` with
 * subprotocol `kube-stream-proxy-tunnel` and the same authentication headers; after the 101 the
 * HTTP/2 session (roles reversed as on the raw carrier) runs over `ws.createWebSocketStream`, one
 * binary message per write. Refusals are the same Status answers, before the handshake completes.
 */
import { isIP, connect as netConnect, type NetConnectOpts } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import WebSocket, { createWebSocketStream, WebSocketServer } from 'ws';
import { AGENT_CONNECT_PATH } from './protocol.js';

/** The WebSocket subprotocol of the tunnel carrier. */
export const TUNNEL_WEBSOCKET_PROTOCOL = 'kube-stream-proxy-tunnel';

/** Largest WebSocket message either end accepts (http2 writes are far smaller; this bounds a bad peer). */
export const TUNNEL_WEBSOCKET_MAX_PAYLOAD = 16 * 1024 * 1024;

/** True for `ws:`/`wss:` proxy URLs (the WebSocket carrier). */
export function isWebSocketUrl(url: URL): boolean {
  return url.protocol === 'wss:' || url.protocol === 'ws:';
}

/** How the agent dials a WebSocket carrier. */
export interface WebSocketDialOptions {
  /** `wss://host:port` (or `ws://` on loopback). */
  url: URL;
  /** Dial this address instead of the URL's host; the TLS server name and `Host` stay the URL's. */
  dialAddress?: string;
  /** Request headers (authentication, cluster, upstream host). */
  headers: Record<string, string>;
  ca?: Buffer;
  clientCert?: { cert: Buffer; key: Buffer };
  signal: AbortSignal;
}

/** The result of a WebSocket carrier dial that got an answer. */
export type WebSocketDialResult = { kind: 'open'; stream: Duplex } | { kind: 'refused'; status: number; body: Buffer };

/** Open the WebSocket carrier; rejects on a network/TLS/handshake failure or abort. */
export function dialWebSocketCarrier(o: WebSocketDialOptions): Promise<WebSocketDialResult> {
  const target = new URL(AGENT_CONNECT_PATH, o.url);
  const name = o.url.hostname.replace(/^\[(.*)\]$/, '$1');
  const secure = o.url.protocol === 'wss:';
  const ws = new WebSocket(target, [TUNNEL_WEBSOCKET_PROTOCOL], {
    headers: o.headers,
    perMessageDeflate: false,
    followRedirects: false,
    maxPayload: TUNNEL_WEBSOCKET_MAX_PAYLOAD,
    ...(o.ca ? { ca: o.ca } : {}),
    ...(o.clientCert ?? {}),
    // Dial the replica's address; TLS still checks the URL's name.
    createConnection: ((opts: ConnectionOptions & NetConnectOpts) => {
      const host = o.dialAddress ?? name;
      if (!secure) return netConnect({ ...opts, host } as NetConnectOpts);
      return tlsConnect({ ...opts, host, servername: isIP(name) ? '' : name, ALPNProtocols: ['http/1.1'] });
    }) as never,
  });
  return new Promise<WebSocketDialResult>((resolve, reject) => {
    const onAbort = (): void => {
      ws.terminate();
      reject(o.signal.reason);
    };
    o.signal.addEventListener('abort', onAbort, { once: true });
    const settle = (): void => o.signal.removeEventListener('abort', onAbort);
    ws.once('unexpected-response', (_req, res: IncomingMessage) => {
      const parts: Buffer[] = [];
      let size = 0;
      const done = (): void => {
        settle();
        res.destroy();
        ws.terminate();
        resolve({ kind: 'refused', status: res.statusCode ?? 0, body: Buffer.concat(parts).subarray(0, 4096) });
      };
      res.on('data', (d: Buffer) => {
        parts.push(d);
        size += d.length;
        if (size >= 4096) done();
      });
      res.once('end', done);
      res.once('error', done);
    });
    ws.once('error', (err) => {
      settle();
      reject(err);
    });
    ws.once('open', () => {
      settle();
      ws.removeAllListeners('error');
      resolve({ kind: 'open', stream: carrierStream(ws) });
    });
  });
}

/** The Duplex http2 runs over: binary messages in, one message per write out. */
function carrierStream(ws: WebSocket): Duplex {
  const stream = createWebSocketStream(ws, { allowHalfOpen: false });
  stream.on('error', () => {});
  return stream;
}

/** The proxy's side: completes WebSocket handshakes the listener has already authenticated. */
export class WebSocketCarrierServer {
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: TUNNEL_WEBSOCKET_MAX_PAYLOAD,
    handleProtocols: (protocols) => (protocols.has(TUNNEL_WEBSOCKET_PROTOCOL) ? TUNNEL_WEBSOCKET_PROTOCOL : false),
  });

  /** True when `req` asks for the tunnel subprotocol (the listener checks this before authenticating). */
  static offersTunnelProtocol(req: IncomingMessage): boolean {
    const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
    return offered.includes(TUNNEL_WEBSOCKET_PROTOCOL);
  }

  /** Answer 101 and hand the carrier stream to `onOpen`. */
  accept(req: IncomingMessage, socket: Duplex, head: Buffer, onOpen: (stream: Duplex) => void): void {
    this.#wss.handleUpgrade(req, socket, head, (ws) => onOpen(carrierStream(ws)));
  }
}
