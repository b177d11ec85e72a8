/**
 * WebSocket subprotocol negotiation as apimachinery `wsstream` does it: the first entry of the
 * client's list that the server supports wins; no header at all selects `""` (binary v1); a list
 * with no supported entry is refused (x/net/websocket answers 403 with an empty body).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import { withWebSocketProtocols } from '../../src/auth/websocket-bearer.js';
import { writeRawResponse } from '../../src/wire/http-response.js';
import type { DevClusterRuntime } from './cluster-runtime.js';

/**
 * The chosen subprotocol: `''` when the client sent no `Sec-WebSocket-Protocol`, `null` when none
 * of its entries is in `supported`. Like x/net/websocket, only the first header line is read.
 */
export function negotiateSubprotocol(req: IncomingMessage, supported: readonly string[]): string | null {
  const lines = req.headersDistinct['sec-websocket-protocol'];
  const first = lines?.[0];
  if (first === undefined || first.trim() === '') return '';
  for (const entry of first.split(',')) {
    const p = entry.trim();
    if (p !== '' && supported.includes(p)) return p;
  }
  return null;
}

/** `Connection: upgrade` and `Upgrade: websocket`: apimachinery's `wsstream.IsWebSocketRequest`. */
export function isWebSocketRequest(req: Pick<IncomingMessage, 'headers'>): boolean {
  const tokens = (v: string | string[] | undefined): string[] => (Array.isArray(v) ? v.join(',') : (v ?? '')).split(',').map((t) => t.trim().toLowerCase());
  return tokens(req.headers.connection).includes('upgrade') && tokens(req.headers.upgrade).includes('websocket');
}

/**
 * Replace the request's subprotocol list by `protocols` (raw lines and parsed headers), as
 * kube-apiserver's `websocket.ProtocolAuthenticator` does once the bearer token entry is verified:
 * `req.Header.Set("Sec-WebSocket-Protocol", strings.Join(filteredProtocols, ","))`. The token
 * therefore can never be chosen or echoed back, nor reach the handler.
 */
export function setWebSocketProtocols(req: Pick<IncomingMessage, 'rawHeaders' | 'headers' | 'headersDistinct'>, protocols: readonly string[]): void {
  req.rawHeaders.splice(0, req.rawHeaders.length, ...withWebSocketProtocols(req.rawHeaders, protocols));
  const joined = protocols.join(',');
  req.headers['sec-websocket-protocol'] = joined;
  req.headersDistinct['sec-websocket-protocol'] = [joined];
}

/** Subprotocol chosen per request, read back by the server's `handleProtocols`. */
export const chosenProtocols = new WeakMap<IncomingMessage, string>();

/**
 * Negotiate as the kubelet does and upgrade: no supported subprotocol → 403 with an empty body;
 * otherwise the socket is tracked by the cluster and `run(ws, protocol)` is a task `close()` waits for.
 */
export function acceptKubeletWebSocket(
  wss: WebSocketServer,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  supported: readonly string[],
  cluster: DevClusterRuntime,
  run: (ws: WebSocket, protocol: string) => Promise<void>,
): void {
  const protocol = negotiateSubprotocol(req, supported);
  if (protocol === null) {
    writeRawResponse(socket, 403, {}, '');
    return;
  }
  cluster.track(socket);
  chosenProtocols.set(req, protocol);
  wss.handleUpgrade(req, socket, head, (ws) => {
    cluster.trackTask(run(ws, protocol));
  });
}
