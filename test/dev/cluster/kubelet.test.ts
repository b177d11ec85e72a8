/**
 * The dev cluster's kubelet listener over real mTLS on loopback: handshake rules, the kubelet's
 * own exec/attach/portForward paths over SPDY/3.1 and WebSocket, nodes in the API, and what the
 * request log records.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { SpdyConnection, type SpdyStream } from '../../../src/spdy/index.js';
import { portForwardEcho } from './stream-clients.js';
import { createCa, createClientCert, createTestPki, type CertAndKey, type TestPki } from '../../helpers/certs.js';

let dir: string;
let pki: TestPki;
let foreign: CertAndKey;
let cluster: DevCluster;
let echo: TcpServer;
let echoPort: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dev-cluster-kubelet-'));
  pki = await createTestPki(dir, { apiserver: { cn: 'system:kube-apiserver-kubelet-client', groups: ['system:masters'] } });
  const otherCa = await createCa(dir, 'other CA', 'other-ca');
  foreign = await createClientCert(dir, otherCa, { cn: 'intruder', name: 'intruder' });
  cluster = await startDevCluster({
    kubelet: { tls: { cert: pki.server.cert, key: pki.server.key }, clientCa: pki.ca.cert },
  });
  cluster.pods.create({
    name: 'two',
    containers: [
      { name: 'first', image: 'busybox', stdin: true, stdinOnce: false, tty: false },
      { name: 'second', image: 'busybox', stdin: true, stdinOnce: false, tty: false },
    ],
  });
  echo = createTcpServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as { port: number }).port;
});
afterAll(async () => {
  await cluster?.close();
  await new Promise((r) => echo?.close(r));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const client = (): CertAndKey => pki.clients.apiserver!;

/** Open a TLS connection to the kubelet with a client certificate (or none). */
function dial(cert: CertAndKey | undefined): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: cluster.kubeletPort!, ca: pki.ca.cert, ...(cert ? { cert: cert.cert, key: cert.key } : {}) }, () => resolve(s));
    s.once('error', reject);
  });
}

interface RawAnswer {
  status: number;
  head: string;
  body: string;
}

/** A plain request over mTLS; resolves with status and body. */
function get(path: string, cert: CertAndKey | null = client()): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      `${cluster.kubeletUrl}${path}`,
      { ca: pki.ca.cert, ...(cert ? { cert: cert.cert, key: cert.key } : {}), agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, head: JSON.stringify(res.headers), body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Send a SPDY upgrade; resolves with the connection on 101, or the refusal. */
async function spdyUpgrade(
  method: string,
  path: string,
  protocols: string[],
): Promise<{ ok: true; connection: SpdyConnection; protocol: string } | { ok: false; answer: RawAnswer }> {
  const socket = await dial(client());
  socket.write(
    [`${method} ${path} HTTP/1.1`, `Host: 127.0.0.1:${cluster.kubeletPort}`, 'Connection: Upgrade', 'Upgrade: SPDY/3.1', ...protocols.map((p) => `X-Stream-Protocol-Version: ${p}`), '', ''].join('\r\n'),
  );
  let buf = Buffer.alloc(0);
  const head = await new Promise<{ head: string; rest: Buffer }>((resolve, reject) => {
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      const end = buf.indexOf('\r\n\r\n');
      if (end >= 0) {
        socket.off('data', onData);
        socket.pause();
        resolve({ head: buf.subarray(0, end).toString('latin1'), rest: buf.subarray(end + 4) });
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
  const status = Number(head.head.split(' ')[1]);
  if (status === 101) {
    const protocol = /\r\nX-Stream-Protocol-Version: ([^\r]+)/i.exec(head.head)?.[1] ?? '';
    const connection = new SpdyConnection(socket, { isServer: false, head: head.rest });
    socket.resume();
    return { ok: true, connection, protocol };
  }
  let body = head.rest.toString('utf8');
  socket.setEncoding('utf8').on('data', (c: string) => (body += c));
  socket.resume();
  await new Promise((r) => socket.once('close', r));
  return { ok: false, answer: { status, head: head.head, body } };
}

function readAll(stream: SpdyStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  return new Promise((resolve, reject) => {
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.once('end', () => resolve(Buffer.concat(chunks)));
    stream.once('error', reject);
  });
}

/** Open a WebSocket to the kubelet with the client certificate and collect messages until close. */
function wsOpen(path: string, protocols: string[], method?: string) {
  const ws = new WebSocket(`wss://127.0.0.1:${cluster.kubeletPort}${path}`, protocols, {
    ca: pki.ca.cert,
    cert: client().cert,
    key: client().key,
    ...(method ? { method } : {}),
  } as ConstructorParameters<typeof WebSocket>[2]);
  const messages: Buffer[] = [];
  ws.on('message', (d: Buffer) => messages.push(Buffer.from(d)));
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  return { ws, messages, opened, closed };
}
const channel = (messages: Buffer[], ch: number): string =>
  Buffer.concat(messages.filter((m) => m[0] === ch).map((m) => m.subarray(1))).toString();

describe('the TLS handshake', () => {
  it('accepts a client certificate from the configured CA', async () => {
    expect(cluster.kubeletUrl).toBe(`https://127.0.0.1:${cluster.kubeletPort}`);
    const r = await get('/healthz');
    expect(r.status).toBe(200);
    expect(r.body).toBe('ok');
  });

  it('fails without a client certificate, before any request is read', async () => {
    await expect(get('/healthz?marker=nocert', null)).rejects.toThrow(/certificate required|socket hang up|ECONNRESET/i);
    expect(cluster.requests.filter((r) => r.url === '/healthz?marker=nocert')).toEqual([]);
  });

  it('fails with a certificate from another CA, before any request is read', async () => {
    await expect(get('/healthz?marker=foreign', foreign)).rejects.toThrow(/unknown ca|alert|socket hang up|ECONNRESET/i);
    expect(cluster.requests.filter((r) => r.url === '/healthz?marker=foreign')).toEqual([]);
  });

  it('records the client certificate subject and user, and that no Authorization header came', async () => {
    const from = cluster.requests.length;
    await get('/healthz?marker=log');
    const entry = cluster.requests.slice(from).find((r) => r.url === '/healthz?marker=log');
    expect(entry).toMatchObject({
      listener: 'kubelet',
      method: 'GET',
      upgrade: false,
      user: 'system:kube-apiserver-kubelet-client',
      groups: ['system:masters'],
      clientCertSubject: 'CN=system:kube-apiserver-kubelet-client,O=system:masters',
    });
    expect(entry!.headers.authorization).toBeUndefined();
  });
});

describe('nodes in the API', () => {
  it('serves the node with its kubelet endpoint, InternalIP first', async () => {
    const node = (await (await fetch(`${cluster.url}/api/v1/nodes/dev-node`)).json()) as any;
    expect(node).toMatchObject({ kind: 'Node', apiVersion: 'v1', metadata: { name: 'dev-node' } });
    expect(node.status.addresses).toEqual([
      { type: 'InternalIP', address: '127.0.0.1' },
      { type: 'Hostname', address: 'dev-node' },
    ]);
    expect(node.status.daemonEndpoints).toEqual({ kubeletEndpoint: { Port: cluster.kubeletPort } });
    const list = (await (await fetch(`${cluster.url}/api/v1/nodes`)).json()) as any;
    expect(list).toMatchObject({ kind: 'NodeList', items: [{ metadata: { name: 'dev-node' } }] });
    const missing = await fetch(`${cluster.url}/api/v1/nodes/other`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as any).message).toBe('nodes "other" not found');
  });

  it('reads through @kubernetes/client-node', async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'dev', server: cluster.url, skipTLSVerify: true }],
      users: [{ name: 'dev' }],
      contexts: [{ name: 'dev', cluster: 'dev', user: 'dev' }],
      currentContext: 'dev',
    });
    const node = await kc.makeApiClient(CoreV1Api).readNode({ name: 'dev-node' });
    expect(node.status?.addresses?.map((a) => `${a.type}=${a.address}`)).toEqual(['InternalIP=127.0.0.1', 'Hostname=dev-node']);
    expect(node.status?.daemonEndpoints?.kubeletEndpoint?.Port).toBe(cluster.kubeletPort);
  });

  it('puts pods on the node and lists nodes in discovery', async () => {
    const pod = (await (await fetch(`${cluster.url}/api/v1/namespaces/default/pods/demo`)).json()) as any;
    expect(pod.spec.nodeName).toBe(cluster.nodeName);
    expect(pod.spec.containers.map((c: { name: string }) => c.name)).toEqual(['demo']);
    const core = (await (await fetch(`${cluster.url}/api/v1`)).json()) as any;
    expect(core.resources.find((r: { name: string }) => r.name === 'nodes')).toMatchObject({ namespaced: false, kind: 'Node' });
  });
});

describe('exec over SPDY at the kubelet', () => {
  it('runs the command in the URL container with kubelet parameters; v4 reports the exit code', async () => {
    const cmd = ['sh', '-c', 'echo out; echo err >&2; exit 3'].map((c) => `command=${encodeURIComponent(c)}`).join('&');
    const up = await spdyUpgrade('POST', `/exec/default/demo/demo?${cmd}&output=1&error=1`, ['v4.channel.k8s.io', 'v3.channel.k8s.io']);
    if (!up.ok) throw new Error(`no upgrade: ${up.answer.status} ${up.answer.body}`);
    expect(up.protocol).toBe('v4.channel.k8s.io');
    const error = await up.connection.openStream({ streamType: 'error' });
    const stdout = await up.connection.openStream({ streamType: 'stdout' });
    const stderr = await up.connection.openStream({ streamType: 'stderr' });
    for (const s of [error, stdout, stderr]) s.end();
    const [out, err, status] = await Promise.all([readAll(stdout), readAll(stderr), readAll(error)]);
    expect(out.toString()).toBe('out\n');
    expect(err.toString()).toBe('err\n');
    expect(JSON.parse(status.toString())).toMatchObject({ status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: '3' }] } });
    up.connection.destroy();
  });

  it('works with GET as well, and with the pod uid in the path', async () => {
    const uid = cluster.pods.get('default', 'two')!.uid;
    const up = await spdyUpgrade('GET', `/exec/default/two/${uid}/second?command=echo&command=second&output=1`, ['v4.channel.k8s.io']);
    if (!up.ok) throw new Error(`no upgrade: ${up.answer.status} ${up.answer.body}`);
    const error = await up.connection.openStream({ streamType: 'error' });
    const stdout = await up.connection.openStream({ streamType: 'stdout' });
    error.end();
    stdout.end();
    const [out, status] = await Promise.all([readAll(stdout), readAll(error)]);
    expect(out.toString()).toBe('second\n');
    expect(JSON.parse(status.toString())).toEqual({ metadata: {}, status: 'Success' });
    up.connection.destroy();
  });

  it.each([
    ['an unknown pod', '/exec/default/nope/demo?command=true&output=1', 404, 'pod does not exist'],
    ['a wrong uid', '/exec/default/demo/not-the-uid/demo?command=true&output=1', 404, 'pod does not exist'],
    ['an unknown container', '/exec/default/two/third?command=true&output=1', 404, 'container not found ("third")'],
    ['apiserver parameter names', '/exec/default/demo/demo?command=true&stdout=true', 400, 'you must specify at least 1 of stdin, stdout, stderr'],
    ['output=true instead of 1', '/exec/default/demo/demo?command=true&output=true', 400, 'you must specify at least 1 of stdin, stdout, stderr'],
  ])('refuses %s with a Status', async (_name, path, code, message) => {
    const up = await spdyUpgrade('POST', path, ['v4.channel.k8s.io']);
    expect(up.ok).toBe(false);
    if (up.ok) return;
    expect(up.answer.status).toBe(code);
    expect(JSON.parse(up.answer.body)).toMatchObject({ kind: 'Status', status: 'Failure', code, message });
  });

  it('has no container defaulting: a path without the container is not a kubelet path', async () => {
    const up = await spdyUpgrade('POST', '/exec/default/demo?command=true&output=1', ['v4.channel.k8s.io']);
    expect(up.ok).toBe(false);
    if (!up.ok) expect(up.answer.status).toBe(404);
  });
});

describe('WebSocket at the kubelet', () => {
  it('runs exec on v4.channel.k8s.io', async () => {
    const c = wsOpen('/exec/default/demo/demo?command=echo&command=hello&output=1', ['v4.channel.k8s.io']);
    await c.opened;
    expect(c.ws.protocol).toBe('v4.channel.k8s.io');
    expect(await c.closed).toBe(1000);
    expect(channel(c.messages, 1)).toBe('hello\n');
    expect(JSON.parse(channel(c.messages, 3))).toEqual({ metadata: {}, status: 'Success' });
  });

  it('attaches to the main process of the URL container', async () => {
    const c = wsOpen('/attach/default/two/first?input=1&output=1', ['v4.channel.k8s.io']);
    await c.opened;
    const got = new Promise<void>((resolve) => {
      c.ws.on('message', () => {
        if (channel(c.messages, 1).includes('attached-to-first\n')) resolve();
      });
    });
    c.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('echo attached-to-first\n')]));
    await got;
    c.ws.close();
    await c.closed;
  });

  it('forwards a port with the port query parameter', async () => {
    const c = wsOpen(`/portForward/default/demo?port=${echoPort}`, ['v4.channel.k8s.io']);
    await c.opened;
    const prefix = Buffer.from([echoPort & 0xff, echoPort >> 8]);
    const back = new Promise<string>((resolve) => {
      c.ws.on('message', () => {
        const data = Buffer.concat(c.messages.filter((m) => m[0] === 0).map((m) => m.subarray(1)));
        if (data.length >= 2 + 5) resolve(data.subarray(2).toString());
      });
    });
    c.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('ping!')]));
    expect(await back).toBe('ping!');
    expect(Buffer.concat(c.messages.filter((m) => m[0] === 0).map((m) => m.subarray(1))).subarray(0, 2)).toEqual(prefix);
    c.ws.close();
    await c.closed;
  });
});

describe('port-forward over SPDY at the kubelet', () => {
  it('takes the port from the stream headers', async () => {
    const up = await spdyUpgrade('POST', '/portForward/default/demo', ['portforward.k8s.io']);
    if (!up.ok) throw new Error(`no upgrade: ${up.answer.status} ${up.answer.body}`);
    expect(up.protocol).toBe('portforward.k8s.io');
    expect(await portForwardEcho(up.connection, echoPort, 'spdy-echo')).toBe('spdy-echo');
    up.connection.destroy();
  });
});

describe('plain requests at the kubelet', () => {
  it('answers a stream path without upgrade with 400 and unknown paths with 404', async () => {
    const plain = await get('/exec/default/demo/demo?command=true&output=1');
    expect(plain.status).toBe(400);
    expect(JSON.parse(plain.body)).toMatchObject({ code: 400, message: 'Upgrade request required' });
    const unknown = await get('/pods');
    expect(unknown.status).toBe(404);
  });
});
