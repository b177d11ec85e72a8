/**
 * A gateway in front of a real upstream (the dev cluster, another proxy) that refuses one streaming
 * protocol before its 101, as OpenShift does with a WebSocket exec (403) or a WebSocket-only gateway
 * does with SPDY, and pipes every other connection to the upstream byte for byte. The first request
 * head of every connection is recorded (an upgrade always comes on a connection of its own). Loopback,
 * plain TCP on both sides.
 */
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

/** The first request of one connection, as the gateway read it. */
export interface GatewayRequest {
  method: string;
  target: string;
  /** `websocket` or `spdy` for an upgrade (by its `Upgrade` line), else undefined. */
  upgrade?: 'websocket' | 'spdy';
  /** `Sec-WebSocket-Protocol` (WebSocket) or `X-Stream-Protocol-Version` (SPDY) values, in order. */
  protocols: string[];
  /** The status the gateway answered with itself, when it refused. */
  refusedWith?: number;
}

/** Which upgrades to refuse, with which status; changeable while the gateway runs. */
export interface GatewayRefusals {
  websocket?: number;
  spdy?: number;
  /**
   * What the refusal's body is: `field` (default) as the upstreams in the field write it — a WebSocket
   * refusal empty (OpenShift relays its kubelet's x/net/websocket handshake failure), a SPDY refusal a
   * line of text (a gateway); `forbidden` a Kubernetes `Status` with reason Forbidden, as kube-apiserver's
   * authorizer refuses a user.
   */
  body?: 'field' | 'forbidden';
}

/** A running gateway. */
export interface StreamingGateway {
  url: string;
  refuse: GatewayRefusals;
  /** Every connection's first request, in arrival order. */
  requests: GatewayRequest[];
  /** The upgrades only. */
  upgrades(): GatewayRequest[];
  close(): Promise<void>;
}

/** The Status body kube-apiserver's authorizer writes when it refuses a user. */
export function forbiddenBody(code: number): string {
  return JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `refused by the test gateway (${code})`, reason: 'Forbidden', code });
}

/** The text a gateway answers a SPDY upgrade it cannot carry with. */
export const GATEWAY_SPDY_REFUSAL = 'SPDY upgrades are not supported by the test gateway\n';

/** The whole refusal: status line, head and body, per {@link GatewayRefusals.body}. */
function refusalAnswer(code: number, upgrade: 'websocket' | 'spdy', body: GatewayRefusals['body']): string {
  if (body === 'forbidden') {
    const json = forbiddenBody(code);
    return `HTTP/1.1 ${code} Refused\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`;
  }
  if (upgrade === 'websocket') return `HTTP/1.1 ${code} ${code === 403 ? 'Forbidden' : 'Refused'}\r\n\r\n`;
  return `HTTP/1.1 ${code} Refused\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(GATEWAY_SPDY_REFUSAL)}\r\nConnection: close\r\n\r\n${GATEWAY_SPDY_REFUSAL}`;
}

function parseHead(head: string): GatewayRequest {
  const [requestLine = '', ...lines] = head.split('\r\n');
  const [method = '', target = ''] = requestLine.split(' ');
  const values = (name: string): string[] =>
    lines.filter((l) => l.toLowerCase().startsWith(`${name}:`)).flatMap((l) => l.slice(name.length + 1).split(',')).map((v) => v.trim()).filter((v) => v !== '');
  const upgrade = values('upgrade')[0]?.toLowerCase();
  const kind = upgrade === 'websocket' ? 'websocket' : upgrade === 'spdy/3.1' ? 'spdy' : undefined;
  return {
    method,
    target,
    ...(kind ? { upgrade: kind } : {}),
    protocols: kind === 'websocket' ? values('sec-websocket-protocol') : kind === 'spdy' ? values('x-stream-protocol-version') : [],
  };
}

/** Start a gateway to `upstream` (an `http://host:port` URL) on 127.0.0.1. */
export async function startStreamingGateway(upstream: string, refuse: GatewayRefusals = {}): Promise<StreamingGateway> {
  const target = new URL(upstream);
  const requests: GatewayRequest[] = [];
  const sockets = new Set<Socket>();
  const gateway: StreamingGateway = {
    url: '',
    refuse,
    requests,
    upgrades: () => requests.filter((r) => r.upgrade !== undefined),
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
  };
  const server = createServer((client) => {
    track(client);
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      client.pause();
      const request = parseHead(buffered.toString('latin1', 0, end));
      requests.push(request);
      const code = request.upgrade ? gateway.refuse[request.upgrade] : undefined;
      if (code !== undefined && request.upgrade) {
        request.refusedWith = code;
        client.end(refusalAnswer(code, request.upgrade, gateway.refuse.body));
        return;
      }
      const up = connect({ host: target.hostname, port: Number(target.port) });
      track(up);
      up.write(buffered);
      client.pipe(up);
      up.pipe(client);
      client.resume();
      client.on('close', () => up.destroy());
      up.on('close', () => client.destroy());
    };
    client.on('data', onData);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  gateway.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return gateway;
}
