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
async function rig(upstreamUrl: string, o: { tls?: boolean; websocket?: boolean; impersonate?: { agentToken: string } } = {}): Promise<Rig> {
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
    ...(o.impersonate ? { authn: 'impersonate' as const } : {}),
  });
  const address = await listener.listen();
  const connected = registry.nextTunnel('one');
  const agent = new TunnelAgent({
    proxyUrl: new URL(`${o.websocket ? (tls ? 'wss' : 'ws') : tls ? 'https' : 'http'}://${address}`),
    ...(ca ? { proxyCa: ca } : {}),
    clusterName: 'one',
    tokenFile: join(dir, 'token'),
    upstream: new Upstream(new URL(upstreamUrl), undefined, o.impersonate ? async () => ({ Authorization: `Bearer ${o.impersonate!.agentToken}` }) : undefined),
    ...(o.impersonate ? { accessAs: 'impersonate' as const } : {}),
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

/** Read `s` up to and including the first blank line; the rest is put back. */
function readHead(s: Socket | NodeJS.ReadableStream & { unshift(b: Buffer): void }): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      s.off('data', onData);
      s.off('end', onEnd);
      s.pause();
      if (buf.length > end + 4) s.unshift(buf.subarray(end + 4));
      resolve(buf.subarray(0, end + 4).toString('latin1'));
    };
    const onEnd = (): void => reject(new Error(`ended inside a head: ${JSON.stringify(buf.toString('latin1'))}`));
    s.on('data', onData);
    s.once('end', onEnd);
  });
}

const EXEC_UPGRADE =
  'POST /api/v1/namespaces/default/pods/alpha/exec?command=sh HTTP/1.1\r\nHost: apiserver.example\r\n' +
  'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n';
const SWITCHED = 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n';

/** An exec upgrade through the tunnel, switched by the scripted apiserver: the raw byte stream both ways. */
async function switched(r: Rig, up: { next: () => Promise<Socket> }): Promise<{ stream: Awaited<ReturnType<ClusterTunnelRoute['dial']>>; server: Socket; requestHead: string }> {
  const stream = await r.route.dial();
  stream.write(EXEC_UPGRADE);
  const server = await up.next();
  const requestHead = await readHead(server);
  server.write(SWITCHED);
  expect(await readHead(stream as unknown as Socket)).toBe(SWITCHED);
  stream.resume();
  server.resume();
  return { stream, server, requestHead };
}

function readAll(s: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  s.on('data', (d: Buffer) => parts.push(d));
  s.resume();
  return new Promise((r) => s.once('end', () => r(Buffer.concat(parts))));
}

describe.each([
  { tls: false, websocket: false },
  { tls: true, websocket: false },
  { tls: false, websocket: true },
  { tls: true, websocket: true },
])('agent tunnel (tls: $tls, WebSocket carrier: $websocket)', ({ tls, websocket }) => {
  it('after a 101, carries bytes both ways, and a half-close each way', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url, { tls, websocket });
    expect(r.proxyLog.find((l) => l.startsWith('agent connected'))).toContain(`"carrier":"${websocket ? 'websocket' : 'raw'}"`);
    const { stream, server, requestHead } = await switched(r, up);
    expect(requestHead).toContain('Connection: Upgrade\r\n');
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

  it.each(['before the request', 'after a 101'])('an upstream reset %s resets the tunnel stream', async (when) => {
    const up = await tcpUpstream();
    const r = await rig(up.url, { tls, websocket });
    const { stream, server } = when === 'after a 101' ? await switched(r, up) : { stream: await r.route.dial(), server: await up.next() };
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
      seen.push(`${req.method} ${req.url} host=${req.headers.host} connection=${req.headers.connection}`);
      res.end('ok');
    });
    const port = await listen(http);
    const r = await rig(`http://127.0.0.1:${port}`);
    const req = r.route.request({ method: 'GET', path: '/api/v1/pods?watch=false', headers: { Host: r.route.host } });
    req.end();
    const [res] = (await once(req, 'response')) as [NodeJS.ReadableStream & { statusCode: number }];
    expect(res.statusCode).toBe(200);
    expect((await readAll(res)).toString()).toBe('ok');
    expect(seen).toEqual([`GET /api/v1/pods?watch=false host=127.0.0.1:${port} connection=close`]);
    // A second request opens a stream of its own (the proxy never reuses a stream).
    const again = r.route.request({ method: 'GET', path: '/version', headers: { Host: r.route.host } });
    again.end();
    const [res2] = (await once(again, 'response')) as [NodeJS.ReadableStream & { statusCode: number }];
    expect((await readAll(res2)).toString()).toBe('ok');
    expect(counterValue(await r.registryMetrics.metrics(), 'kube_stream_proxy_tunnel_streams_opened_total', { cluster: 'one' })).toBe(2);
  });

  it('the 101 check at the agent: a 403 to an exec upgrade comes back verbatim, nothing is relayed after it', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url);
    const stream = await r.route.dial();
    // The client's first upgraded-protocol bytes arrive with its head: held until the apiserver answers.
    stream.write(EXEC_UPGRADE + 'EARLY-SPDY-FRAME');
    const server = await up.next();
    const head = await readHead(server);
    expect(head.startsWith('POST /api/v1/namespaces/default/pods/alpha/exec?command=sh HTTP/1.1\r\n')).toBe(true);
    const atServer = readAll(server);
    const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 403, reason: 'Forbidden', message: 'pods "alpha" is forbidden' });
    const answer = `HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const atProxy = readAll(stream);
    server.write(answer);
    // Verbatim, then the stream ends (the apiserver kept its connection open: the agent framed the answer).
    expect((await atProxy).toString('latin1')).toBe(answer);
    stream.end('AFTER-THE-403');
    // The apiserver never received a byte after the request head, and its connection was closed.
    expect((await atServer).length).toBe(0);
  });

  it('a path outside the Kubernetes API is refused at the agent with a 403 Status; the apiserver gets nothing', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url);
    const stream = await r.route.dial();
    const server = await up.next();
    const atServer = readAll(server);
    const atProxy = readAll(stream);
    stream.end('GET /logs/kube-apiserver.log HTTP/1.1\r\nHost: x\r\n\r\n');
    const text = (await atProxy).toString('latin1');
    expect(text).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
    const status = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { code: number; reason: string; message: string };
    expect(status).toMatchObject({ code: 403, reason: 'Forbidden' });
    expect(status.message).toContain('cluster "one"');
    expect(status.message).toContain('"/logs/kube-apiserver.log"');
    expect((await atServer).length).toBe(0);
  });

  it('a malformed head gets a 400 Status from the agent', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url);
    const stream = await r.route.dial();
    const atProxy = readAll(stream);
    stream.end('GET http://elsewhere.example/api HTTP/1.1\r\n\r\n');
    const text = (await atProxy).toString('latin1');
    expect(text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(text).toContain('"reason":"BadRequest"');
  });

  it('one request per stream: exactly its body reaches the apiserver, a pipelined second request never does', async () => {
    const up = await tcpUpstream();
    const r = await rig(up.url);
    const stream = await r.route.dial();
    stream.write('POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabcGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
    const server = await up.next();
    const head = await readHead(server);
    expect(head).toContain('Connection: close\r\n');
    expect(head).not.toContain('keep-alive');
    const atServer = readAll(server);
    const atProxy = readAll(stream);
    stream.end();
    expect((await atServer).toString('latin1')).toBe('abc');
    server.end('HTTP/1.1 201 Created\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
    expect((await atProxy).toString('latin1')).toBe('HTTP/1.1 201 Created\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
  });

  it('--access-as impersonate: the caller\'s Authorization is replaced by the agent\'s, Impersonate-* passes', async () => {
    const seen: Record<string, string | string[] | undefined>[] = [];
    const http = createHttpServer((req, res) => {
      seen.push({ authorization: req.headers.authorization, user: req.headers['impersonate-user'], group: req.headers['impersonate-group'], raw: req.rawHeaders.filter((_, i) => i % 2 === 0) });
      res.end('ok');
    });
    const port = await listen(http);
    const r = await rig(`http://127.0.0.1:${port}`, { impersonate: { agentToken: 'agent-sa' } });
    const req = r.route.request({
      method: 'GET',
      path: '/api/v1/pods',
      headers: { Host: r.route.host, Authorization: 'Bearer smuggled-by-a-caller', 'Impersonate-User': 'alice', 'Impersonate-Group': 'devs' },
    });
    req.end();
    const [res] = (await once(req, 'response')) as [NodeJS.ReadableStream & { statusCode: number }];
    expect((await readAll(res)).toString()).toBe('ok');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ authorization: 'Bearer agent-sa', user: 'alice', group: 'devs' });
    expect((seen[0]!.raw as string[]).filter((n) => n.toLowerCase() === 'authorization')).toHaveLength(1);
  });

  it('an agent whose --access-as does not match the proxy\'s --authn is refused with 400 and says why', async () => {
    const dir = workDir();
    writeFileSync(join(dir, 'tokens.csv'), 'secret,one\n');
    writeFileSync(join(dir, 'token'), 'secret\n');
    const proxyWarnings: string[] = [];
    const listener = new AgentListener({
      listen: { host: '127.0.0.1', port: 0 },
      tokens: new AgentTokenFile(join(dir, 'tokens.csv')),
      registry: new AgentRegistry(),
      log: { info: () => {}, warn: (o: object, msg: string) => void proxyWarnings.push(`${msg} ${JSON.stringify(o)}`) },
    });
    const address = await listener.listen();
    let refused!: (m: string) => void;
    const refusal = new Promise<string>((resolve) => (refused = resolve));
    const agent = new TunnelAgent({
      proxyUrl: new URL(`http://${address}`),
      clusterName: 'one',
      tokenFile: join(dir, 'token'),
      upstream: new Upstream(new URL('http://127.0.0.1:1'), undefined, async () => ({ Authorization: 'Bearer x' })),
      accessAs: 'impersonate',
      log: { info: () => {}, warn: (o: object, msg: string) => void (msg === 'proxy refused the agent' && refused(JSON.stringify(o))) },
    });
    cleanups.push(async () => {
      await agent.stop();
      await listener.close();
    });
    const logged = JSON.parse(await refusal) as { status: number; message: string };
    expect(logged.status).toBe(400);
    expect(logged.message).toContain('the agent\'s --access-as "impersonate" does not match this proxy\'s --authn=passthrough');
    expect(proxyWarnings.some((w) => w.startsWith('agent refused') && w.includes('"reason":"bad_request"') && w.includes('does not match'))).toBe(true);
    expect(agent.connected).toBe(false);
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
    const { stream, server } = await switched(r, up);
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
    const { stream: again, server: server2 } = await switched(r, up);
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
