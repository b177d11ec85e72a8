/**
 * Issue 32, item 5, at the kubelet listener itself (mTLS, the kubelet's own paths): a modern kubelet
 * (1.36) serves WebSocket v5 exec (stdin EOF by CLOSE `[255, 0]`) and the
 * `SPDY/3.1+portforward.k8s.io` tunnel, counting each in `kubelet_websocket_streaming_requests_total`
 * on its `/metrics`; an older one (1.35) answers them as a 1.35 kubelet does — v5 with the CRI
 * streaming server's negotiation failure (403, empty body), the tunnel request (no `port`) with 400 —
 * and counts nothing.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import { connect, type TLSSocket } from 'node:tls';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { SpdyConnection } from '../../../src/spdy/index.js';
import { createTestPki, type TestPki } from '../../helpers/certs.js';
import { counterValue } from '../../helpers/metrics.js';
import { Op, clientFrame, headerValues, takeResponseHead, takeServerFrame } from '../../translator/stream-tunnel-client.js';
import { portForwardEcho } from './stream-clients.js';

let dir: string;
let pki: TestPki;
let modern: DevCluster;
let older: DevCluster;
let echo: TcpServer;
let echoPort: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dev-kubelet-ws-'));
  pki = await createTestPki(dir, { apiserver: { cn: 'system:kube-apiserver-kubelet-client', groups: ['system:masters'] } });
  const kubelet = { tls: { cert: pki.server.cert, key: pki.server.key }, clientCa: pki.ca.cert };
  modern = await startDevCluster({ kubelet });
  older = await startDevCluster({ kubelet, kubeletVersion: '1.35' });
  echo = createTcpServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as { port: number }).port;
});
afterAll(async () => {
  await modern?.close();
  await older?.close();
  await new Promise((r) => echo?.close(r));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const tlsOptions = () => ({ ca: pki.ca.cert, cert: pki.clients.apiserver!.cert, key: pki.clients.apiserver!.key });

/** The kubelet listener's `/metrics` counter for `subresource`. */
function kubeletCount(cluster: DevCluster, subresource: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${cluster.kubeletUrl}/metrics`, { ...tlsOptions(), agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => (res.statusCode === 200 ? resolve(counterValue(body, 'kubelet_websocket_streaming_requests_total', { subresource })) : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A v5 WebSocket to the kubelet; messages collected until close, or the refusal's status and body. */
function v5(cluster: DevCluster, path: string) {
  const ws = new WebSocket(`wss://127.0.0.1:${cluster.kubeletPort}${path}`, ['v5.channel.k8s.io'], tlsOptions());
  const messages: Buffer[] = [];
  ws.on('message', (d: Buffer) => messages.push(Buffer.from(d)));
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  const refused = new Promise<{ status: number; body: string }>((resolve) => {
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
  });
  const channel = (ch: number): string => Buffer.concat(messages.filter((m) => m[0] === ch).map((m) => m.subarray(1))).toString();
  return { ws, messages, opened, closed, refused, channel };
}

/**
 * A raw WebSocket over mTLS offering the tunnel protocol (ws's client refuses `SPDY/3.1+…`): the
 * response head, and on 101 a Duplex of the binary messages' bytes (what SPDY runs on).
 */
async function tunnel(cluster: DevCluster, path: string): Promise<{ head: string; status: number; body: Buffer; stream?: Duplex }> {
  const socket: TLSSocket = await new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: cluster.kubeletPort!, ...tlsOptions() }, () => resolve(s));
    s.once('error', reject);
  });
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n\r\n`,
  );
  let buf = Buffer.alloc(0);
  const head = await new Promise<NonNullable<ReturnType<typeof takeResponseHead>>>((resolve, reject) => {
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      const r = takeResponseHead(buf);
      if (!r) return;
      socket.off('data', onData);
      resolve(r);
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
  if (head.status !== 101) {
    let body = head.rest;
    socket.on('data', (c: Buffer) => (body = Buffer.concat([body, c])));
    await new Promise((r) => socket.once('close', r));
    return { head: head.head, status: head.status, body };
  }
  let pending = head.rest;
  const stream = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, done) {
      socket.write(clientFrame(Op.BINARY, chunk), done);
    },
    final(done) {
      socket.end(clientFrame(Op.CLOSE, Buffer.from([0x03, 0xe8])));
      done();
    },
  });
  const drain = (): void => {
    for (let next = takeServerFrame(pending); next; next = takeServerFrame(pending)) {
      pending = next.rest;
      if (next.frame.opcode === Op.BINARY || next.frame.opcode === Op.CONT) stream.push(next.frame.payload);
      if (next.frame.opcode === Op.CLOSE) stream.push(null);
    }
  };
  socket.on('data', (c: Buffer) => {
    pending = Buffer.concat([pending, c]);
    drain();
  });
  socket.on('close', () => stream.destroy());
  drain();
  return { head: head.head, status: 101, body: Buffer.alloc(0), stream };
}

describe('a modern kubelet listener (1.36)', () => {
  it('serves v5 exec: stdin, then CLOSE [255, 0] ends it; Success on channel 3, close 1000; counted once', async () => {
    const before = await kubeletCount(modern, 'exec');
    const c = v5(modern, '/exec/default/demo/demo?command=cat&input=1&output=1&error=1');
    await c.opened;
    expect(c.ws.protocol).toBe('v5.channel.k8s.io');
    c.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('to the kubelet\n')]));
    c.ws.send(Buffer.from([255, 0]));
    expect(await c.closed).toBe(1000);
    expect(c.channel(1)).toBe('to the kubelet\n');
    expect(JSON.parse(c.channel(3))).toMatchObject({ status: 'Success' });
    expect((await kubeletCount(modern, 'exec')) - before).toBe(1);
  });

  it('serves the port-forward tunnel: SPDY inside WebSocket messages, to the pod port; counted once', async () => {
    const before = await kubeletCount(modern, 'portforward');
    const t = await tunnel(modern, '/portForward/default/demo');
    expect(t.status, t.head).toBe(101);
    expect(headerValues(t.head, 'sec-websocket-protocol')).toEqual(['SPDY/3.1+portforward.k8s.io']);
    const connection = new SpdyConnection(t.stream!, { isServer: false });
    expect(await portForwardEcho(connection, echoPort, 'tunnel-echo')).toBe('tunnel-echo');
    connection.destroy();
    expect((await kubeletCount(modern, 'portforward')) - before).toBe(1);
  });
});

describe('an older kubelet listener (1.35)', () => {
  it('refuses v5 as the CRI streaming server does (403, empty body) and counts nothing', async () => {
    const c = v5(older, '/exec/default/demo/demo?command=true&output=1');
    await expect(c.refused).resolves.toEqual({ status: 403, body: '' });
    expect(await kubeletCount(older, 'exec')).toBe(0);
  });

  it('refuses the tunnel request, which names no port, with 400 and counts nothing', async () => {
    const t = await tunnel(older, '/portForward/default/demo');
    expect(t.status, t.head).toBe(400);
    expect(t.body.toString()).toContain('query parameter \\"port\\" is required');
    expect(await kubeletCount(older, 'portforward')).toBe(0);
  });
});
