/**
 * port-forward over the kubelet's legacy WebSocket protocols (`""`, `v4.channel.k8s.io`,
 * `v4.base64.channel.k8s.io`): for the i-th port, channel 2i carries data both ways and 2i+1 errors
 * from the server. The first message on every channel is the port (uint16 little-endian). One TCP
 * connection to 127.0.0.1:port per port; the socket closes once every port is done.
 */
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { WebSocket, WebSocketServer } from 'ws';
import type { PortForwardContext } from './spdy-port-forward.js';
import { channelWriter, decodeChannelMessage, sendChannel } from './ws-channels.js';
import { acceptKubeletWebSocket } from './ws-subprotocol.js';

/** The subprotocols the kubelet accepts for port-forward, besides the empty one. */
export const PORT_FORWARD_WS_PROTOCOLS = ['v4.channel.k8s.io', 'v4.base64.channel.k8s.io'] as const;

/** Upgrade and forward `ctx.ports` (validated non-empty by the caller). */
export function serveWebSocketPortForward(
  wss: WebSocketServer,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  ctx: PortForwardContext,
): void {
  acceptKubeletWebSocket(wss, req, socket, head, PORT_FORWARD_WS_PROTOCOLS, ctx.cluster, (ws, protocol) =>
    forward(ws, protocol.includes('base64'), ctx),
  );
}

async function forward(ws: WebSocket, base64: boolean, ctx: PortForwardContext): Promise<void> {
  ws.on('error', () => undefined);
  const conns: Socket[] = [];
  const waiting = new Set<Socket>();
  let blocked = 0; // ports whose TCP socket is full: the WebSocket is paused while > 0
  const block = (): void => {
    if (blocked++ === 0) ws.pause();
  };
  const unblock = (): void => {
    if (--blocked === 0) ws.resume();
  };
  const onClusterClose = (): void => {
    ws.terminate();
  };
  ctx.cluster.signal.addEventListener('abort', onClusterClose, { once: true });

  const done = ctx.ports.map((port, i) => {
    const data = 2 * i;
    const error = data + 1;
    const prefix = Buffer.from([port & 0xff, port >> 8]);
    sendChannel(ws, data, prefix, base64);
    sendChannel(ws, error, prefix, base64);
    const tcp = connect({ host: '127.0.0.1', port, noDelay: true });
    conns[i] = tcp;
    const writer = channelWriter(ws, data, base64);
    tcp.pipe(writer, { end: false });
    return new Promise<void>((resolve) => {
      tcp.once('error', (err) => {
        const msg = `error forwarding port ${port} to pod ${ctx.pod.name}, uid ${ctx.pod.uid}: ${err.message}`;
        sendChannel(ws, error, Buffer.from(msg), base64);
      });
      tcp.once('close', () => {
        writer.end(); // everything the port sent goes out before the close frame
        finished(writer).then(resolve, resolve);
      });
    });
  });

  ws.on('message', (raw: Buffer | ArrayBuffer | Buffer[]) => {
    const msg = decodeChannelMessage(Buffer.isBuffer(raw) ? raw : Buffer.from(raw as ArrayBuffer), base64);
    if (!msg || msg.channel % 2 !== 0) return; // only data channels are readable
    const tcp = conns[msg.channel / 2];
    if (!tcp || tcp.destroyed || msg.payload.length === 0) return;
    if (!tcp.write(msg.payload) && !waiting.has(tcp)) {
      waiting.add(tcp);
      block();
      const release = (): void => {
        tcp.off('drain', release);
        tcp.off('close', release);
        waiting.delete(tcp);
        unblock();
      };
      tcp.on('drain', release);
      tcp.on('close', release);
    }
  });
  ws.once('close', () => {
    for (const tcp of conns) tcp.destroy();
  });

  await Promise.all(done);
  ctx.cluster.signal.removeEventListener('abort', onClusterClose);
  if (ws.readyState === ws.OPEN) ws.close(1000);
}
