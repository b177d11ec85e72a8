/**
 * The tunnel in-process: a real AgentListener (plain on loopback, and TLS), a real TunnelAgent
 * and a scripted TCP upstream. Half-close and reset carry across, a plain request rides a stream
 * (the string-write workaround), a failed apiserver dial comes back as UpstreamUnreachableError,
 * and the refusals are Status answers. Each carrier: the raw upgrade and the WebSocket (`ws://`,
 * `wss://`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { UpstreamUnreachableError } from '../../src/errors.js';
import { createMetrics } from '../../src/metrics.js';
import { Upstream } from '../../src/routing/upstream.js';
import { TunnelAgent, type AgentLogger } from '../../src/tunnel/agent.js';
import { AgentListener } from '../../src/tunnel/agent-listener.js';
import { AgentRegistry } from '../../src/tunnel/agent-registry.js';
import { AgentTokenFile } from '../../src/tunnel/agent-tokens.js';
import { ClusterTunnelRoute } from '../../src/tunnel/tunnel-route.js';
import { createCa, createServerCert } from '../helpers/certs.js';
import { counterValue } from '../helpers/metrics.js';

const quiet: AgentLogger = { info: () => {}, warn: () => {} };

interface Rig {
  registry: AgentRegistry;
  listener: AgentListener;
  agent: TunnelAgent;
  route: ClusterTunnelRoute;
  registryMetrics: Registry;
  upstreamSockets: Socket[];
  /** The listener's `host:port`. */
  address: string;
  /** The rig's work folder. */
  dir: string;
  /** What the listener logged (`msg {fields}`). */
  proxyLog: string[];
}

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

function workDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ksp-tunnel-unit-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function listen<T extends Server | HttpServer>(server: T): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as AddressInfo).port;
}

/** The whole tunnel in-process, toward `upstreamUrl`. */
async function rig(upstreamUrl: string, o: { tls?: boolean; websocket?: boolean } = {}): Promise<Rig> {
  const dir = workDir();
  writeFileSync(join(dir, 'tokens.csv'), 'secret,one\n');
  writeFileSync(join(dir, 'token'), 'secret\n');
  const registryMetrics = new Registry();
  const metrics = createMetrics(registryMetrics, { processMetrics: false });
  const registry = new AgentRegistry(metrics);
  let tls: { cert: Buffer; key: Buffer } | undefined;
  let ca: Buffer | undefined;
  if (o.tls) {
    const caPair = await createCa(dir);
    tls = await createServerCert(dir, caPair);
    ca = caPair.cert;
  }
  const proxyLog: string[] = [];
  const record = (obj: object, msg: string): void => void proxyLog.push(`${msg} ${JSON.stringify(obj)}`);
  const listener = new AgentListener({
    listen: { host: '127.0.0.1', port: 0 },
    tokens: new AgentTokenFile(join(dir, 'tokens.csv')),
    registry,
    metrics,
    log: { info: record, warn: record },
    ...(tls ? { tls } : {}),
  });
  const address = await listener.listen();
  const connected = registry.nextTunnel('one');
  const agent = new TunnelAgent({
    proxyUrl: new URL(`${o.websocket ? (tls ? 'wss' : 'ws') : tls ? 'https' : 'http'}://${address}`),
    ...(ca ? { proxyCa: ca } : {}),
    clusterName: 'one',
    tokenFile: join(dir, 'token'),
    upstream: new Upstream(new URL(upstreamUrl), undefined),
    log: quiet,
  });
  cleanups.push(async () => {
    await agent.stop();
    await registry.closeAll(100);
    await listener.close();
  });
  await connected;
  return {
    registry,
    listener,
    agent,
    registryMetrics,
    upstreamSockets: [],
    address,
    dir,
    proxyLog,
    route: new ClusterTunnelRoute({ cluster: 'one', registry, upstreamHost: 'apiserver.example', metrics }),
  };
}

/** A TCP upstream that records what it receives and hands out its sockets. */
async function tcpUpstream(): Promise<{ url: string; next: () => Promise<Socket> }> {
  const waiting: ((s: Socket) => void)[] = [];
  const arrived: Socket[] = [];
  // Half-open capable, as an apiserver connection is: a FIN from us does not end its side.
  const server = createServer({ allowHalfOpen: true }, (s) => {
    const w = waiting.shift();
    if (w) w(s);
    else arrived.push(s);
  });
  server.on('connection', (s) => cleanups.push(() => void s.destroy()));
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, next: () => new Promise((r) => (arrived.length ? r(arrived.shift()!) : waiting.push(r))) };
}

function readAll(s: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  s.on('data', (d: Buffer) => parts.push(d));
  return new Promise((r) => s.once('end', () => r(Buffer.concat(parts))));
}

describe.each([
  { tls: false, websocket: false },
  { tls: true, websocket: false },
  { tls: false, websocket: true },
  { tls: true, websocket: true },
])('agent tunnel (tls: $tls, WebSocket carrier: $websocket)', ({ tls, websocket }) => {
  it('carries bytes both ways, and a half-close each way', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url, { tls, websocket });
    expect(r.proxyLog.find((l) => l.startsWith('agent connected'))).toContain(`"carrier":"${websocket ? 'websocket' : 'raw'}"`);
    const stream = await r.route.dial();
    const server = await up.next();
    const atServer = readAll(server);
    const big = Buffer.alloc(3_000_000, 7);
    stream.write(big);
    stream.end();
    // stdin EOF: the upstream sees the end of what the proxy sent, and can still answer.
    expect((await atServer).equals(big)).toBe(true);
    const atProxy = readAll(stream);
    const closed = once(stream, 'close');
    server.end('answer after EOF');
    expect((await atProxy).toString()).toBe('answer after EOF');
    await closed;
    expect((stream as unknown as { rstCode: number }).rstCode).toBe(0); // NGHTTP2_NO_ERROR: both ends closed cleanly
    expect(counterValue(await r.registryMetrics.metrics(), 'kube_stream_proxy_tunnel_streams_opened_total', { cluster: 'one' })).toBe(1);
  });

  it('a reset on the proxy side closes the upstream connection', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url, { tls, websocket });
    const stream = await r.route.dial();
    const server = await up.next();
    // The agent destroys its apiserver connection: the apiserver reads EOF.
    const ended = once(server, 'end');
    server.resume();
    stream.destroy();
    await ended;
  });

  it('an upstream reset resets the tunnel stream', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url, { tls, websocket });
    const stream = await r.route.dial();
    const server = await up.next();
    stream.on('error', () => {});
    const closed = once(stream, 'close');
    server.resetAndDestroy();
    await closed;
    expect((stream as unknown as { rstCode: number }).rstCode).toBe(8); // NGHTTP2_CANCEL, not a clean end
  });
});

describe('agent tunnel', () => {
  it('a plain HTTP/1.1 request rides one stream, request line intact', async () => {
    const seen: string[] = [];
    const http = createHttpServer((req, res) => {
      seen.push(`${req.method} ${req.url} host=${req.headers.host}`);
      res.end('ok');
    });
    const port = await listen(http);
    const r = await rig(`http://127.0.0.1:${port}`);
    const req = r.route.request({ method: 'GET', path: '/api/v1/pods?watch=false', headers: { Host: r.route.host } });
    req.end();
    const [res] = (await once(req, 'response')) as [NodeJS.ReadableStream & { statusCode: number }];
    expect(res.statusCode).toBe(200);
    expect((await readAll(res)).toString()).toBe('ok');
    expect(seen).toEqual(['GET /api/v1/pods?watch=false host=apiserver.example']);
  });

  it('the agent failing to reach its apiserver is an UpstreamUnreachableError naming the cluster', async () => {
    const dead = createServer();
    const port = await listen(dead);
    await new Promise<void>((res) => dead.close(() => res()));
    const r = await rig(`http://127.0.0.1:${port}`);
    const err = await r.route.dial().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamUnreachableError);
    expect((err as Error).message).toMatch(/agent answered 502: error trying to reach service.*ECONNREFUSED/);
    expect((err as UpstreamUnreachableError).toStatus().code).toBe(503);
  });

  it('GOAWAY (proxy drain): the stream in flight runs on, new requests are refused here, the agent reconnects at once', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url);
    const old = r.registry.pick('one')!;
    const stream = await r.route.dial();
    const server = await up.next();
    const reconnected = r.registry.nextTunnel('one');
    r.registry.goAway();
    expect(r.registry.pick('one')).toBeUndefined();
    await expect(r.route.dial()).rejects.toThrow(/not connected/);
    // The stream in flight still carries bytes both ways after the GOAWAY.
    const atServer = readAll(server);
    stream.end('after goaway');
    expect((await atServer).toString()).toBe('after goaway');
    const atProxy = readAll(stream);
    server.end('reply');
    expect((await atProxy).toString()).toBe('reply');
    const fresh = await reconnected;
    expect(fresh.session).not.toBe(old.session);
    const again = await r.route.dial();
    const server2 = await up.next();
    const got = readAll(server2);
    again.end('new tunnel');
    expect((await got).toString()).toBe('new tunnel');
  });

  it('a tunnel that closes leaves the registry; dials then fail at once', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url);
    const session = r.registry.pick('one')!.session;
    const closed = once(session, 'close');
    await r.agent.stop();
    await closed;
    expect(counterValue(await r.registryMetrics.metrics(), 'kube_stream_proxy_tunnel_agents', { cluster: 'one' })).toBe(0);
    await expect(r.route.dial()).rejects.toThrow(/cluster "one" is not connected/);
  });

  it('WebSocket carrier: a wrong token gets the 401 Status before the handshake; a WebSocket without the tunnel subprotocol gets 400', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url);
    writeFileSync(join(r.dir, 'wrong-token'), 'not-the-token\n');
    const refused = new Promise<{ obj: object; msg: string }>((resolve) => {
      const agent = new TunnelAgent({
        proxyUrl: new URL(`ws://${r.address}`),
        clusterName: 'one',
        tokenFile: join(r.dir, 'wrong-token'),
        upstream: new Upstream(new URL(up.url), undefined),
        log: { info: () => {}, warn: (obj, msg) => (msg === 'proxy refused the agent' ? resolve({ obj, msg }) : undefined) },
      });
      cleanups.push(() => agent.stop());
    });
    expect((await refused).obj).toMatchObject({ status: 401, message: 'Unauthorized: unknown agent token' });
    // A WebSocket for another subprotocol (kubectl's, say) is not a tunnel, even with a good token.
    const [host, port] = r.address.split(':') as [string, string];
    const sock = connect({ host, port: Number(port) });
    sock.write(
      'GET /agent/connect HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\nAuthorization: Bearer secret\r\nKube-Stream-Proxy-Cluster: one\r\n\r\n',
    );
    const answer = (await readAll(sock)).toString();
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('subprotocol kube-stream-proxy-tunnel');
  });
});
