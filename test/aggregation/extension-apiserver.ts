/**
 * A small extension API server for the aggregation tests (real HTTPS on loopback): group
 * `things.example.com/v1` with a list, a redirect, a streaming watch, a KubeVirt-style WebSocket
 * console (`plain.kubevirt.io`, binary frames echoed), a SPDY-style raw upgrade (bytes echoed) and a
 * refused upgrade answered with a JSON Status. Every request is recorded with its TLS facts.
 */
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import WebSocket, { WebSocketServer } from 'ws';

/** One request as the backend saw it. */
export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  rawHeaders: string[];
  /** SNI the client sent. */
  servername: string | false;
  /** CN of the verified client certificate, if any. */
  clientCN: string | undefined;
}

/** A running backend. */
export interface ExtensionApiServer {
  port: number;
  requests: SeenRequest[];
  /** Resolve the pending watch: write its second event and end it. */
  releaseWatch(): void;
  close(): Promise<void>;
}

const RESOURCES = {
  kind: 'APIResourceList',
  apiVersion: 'v1',
  groupVersion: 'things.example.com/v1',
  resources: [
    { name: 'widgets', singularName: 'widget', namespaced: true, kind: 'Widget', verbs: ['get', 'list', 'watch'] },
    { name: 'widgets/console', singularName: '', namespaced: true, kind: 'Widget', verbs: ['get'] },
  ],
};

/** Start it with `tls` (cert/key, and the CA that client certificates must chain to), on `port` (0 = free). */
export async function startExtensionApiServer(tls: { cert: Buffer; key: Buffer; clientCa: Buffer }, port = 0): Promise<ExtensionApiServer> {
  const requests: SeenRequest[] = [];
  let release: (() => void) | undefined;
  const record = (req: IncomingMessage): void => {
    const socket = req.socket as TLSSocket;
    const peer = socket.getPeerCertificate?.();
    requests.push({
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      rawHeaders: [...req.rawHeaders],
      servername: socket.servername ?? false,
      clientCN: socket.authorized && peer?.subject ? String(peer.subject.CN) : undefined,
    });
  };
  const server: Server = createServer({ cert: tls.cert, key: tls.key, ca: tls.clientCa, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    record(req);
    const path = (req.url ?? '').split('?')[0];
    const json = (code: number, body: unknown, headers: Record<string, string> = {}): void => {
      res.writeHead(code, { 'Content-Type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    // Like an old server without aggregated discovery that refuses the aggregated type outright.
    if (path === '/apis') return json(406, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'not acceptable', reason: 'NotAcceptable', code: 406 });
    if (path === '/apis/things.example.com/v1') return json(200, RESOURCES);
    if (path === '/apis/things.example.com/v1/namespaces/default/widgets') {
      if ((req.url ?? '').includes('watch=true')) {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
        res.write(`${JSON.stringify({ type: 'ADDED', object: { kind: 'Widget', metadata: { name: 'w1' } } })}\n`);
        release = () => {
          res.end(`${JSON.stringify({ type: 'ADDED', object: { kind: 'Widget', metadata: { name: 'w2' } } })}\n`);
        };
        return;
      }
      return json(200, { kind: 'WidgetList', apiVersion: 'things.example.com/v1', items: [{ metadata: { name: 'w1' } }], seenUser: req.headers['x-remote-user'] ?? null });
    }
    if (path === '/apis/things.example.com/v1/redirect') return json(302, {}, { Location: 'https://elsewhere.example/' });
    return json(404, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'the server could not find the requested resource', reason: 'NotFound', code: 404 });
  });
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (protocols) => (protocols.has('plain.kubevirt.io') ? 'plain.kubevirt.io' : false) });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    record(req);
    const path = (req.url ?? '').split('?')[0];
    if (path === '/apis/things.example.com/v1/namespaces/default/widgets/w1/console') {
      wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (data, isBinary) => ws.send(data as Buffer, { binary: isBinary })));
      return;
    }
    if (path === '/apis/things.example.com/v1/namespaces/default/widgets/w1/portforward') {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
      if (head.length > 0) socket.write(head);
      socket.pipe(socket);
      return;
    }
    const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'VMI is not running', reason: 'Conflict', code: 409 });
    socket.end(`HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const sockets = new Set<Socket>();
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    releaseWatch: () => release?.(),
    close: async () => {
      for (const c of wss.clients) c.terminate();
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/** The console path of widget w1 (a KubeVirt-style WebSocket subresource of the test group). */
export const CONSOLE_PATH = '/apis/things.example.com/v1/namespaces/default/widgets/w1/console';

/** Open the w1 console through `proxyUrl`; `echo(text)` sends a binary frame and resolves with the reply. */
export async function openConsole(proxyUrl: string): Promise<{ ws: WebSocket; echo(text: string): Promise<string> }> {
  const ws = new WebSocket(`${proxyUrl.replace('http', 'ws')}${CONSOLE_PATH}`, ['plain.kubevirt.io']);
  await once(ws, 'open');
  return {
    ws,
    echo: async (text) => {
      const reply = once(ws, 'message');
      ws.send(Buffer.from(text), { binary: true });
      return String((await reply)[0]);
    },
  };
}
