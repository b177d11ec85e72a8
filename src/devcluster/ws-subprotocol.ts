/**
 * WebSocket subprotocol negotiation as apimachinery `wsstream` does it: the first entry of the
 * client's list that the server supports wins; no header at all selects `""` (binary v1); a list
 * with no supported entry is refused (x/net/websocket answers 403 with an empty body).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import { writeRawResponse } from '../http-response.js';
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
