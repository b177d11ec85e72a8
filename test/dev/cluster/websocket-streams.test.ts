import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough, Writable } from 'node:stream';
import { Attach, Exec, KubeConfig, PortForward, type V1Status } from '@kubernetes/client-node';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';

let cluster: DevCluster;
let kc: KubeConfig;
beforeAll(async () => {
  // The kubelet's legacy WebSocket protocols as such: a 1.29 cluster, where nothing speaks v5
  // (client-node offers v5 first; against a 1.36 cluster it gets it, see the last describe).
  cluster = await startDevCluster({ apiserverVersion: '1.29' });
  kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'dev', server: cluster.url, skipTLSVerify: true }],
    users: [{ name: 'dev' }],
    contexts: [{ name: 'dev', cluster: 'dev', user: 'dev' }],
    currentContext: 'dev',
  });
});
afterAll(async () => {
  await cluster.close();
});

/** A Writable that collects bytes. */
function sink() {
  const chunks: Buffer[] = [];
  const w = new Writable({
    write(c: Buffer, _e, cb) {
      chunks.push(Buffer.from(c));
      cb();
    },
  });
  return { w, text: () => Buffer.concat(chunks).toString(), bytes: () => Buffer.concat(chunks) };
}

/** Run an exec through client-node and wait for its status and socket close. */
async function clientExec(command: string[], stdin?: PassThrough, onOpen?: (ws: WebSocket) => void) {
  const out = sink();
  const err = sink();
  let status: V1Status | undefined;
  const ws = (await new Exec(kc).exec('default', 'demo', 'demo', command, out.w, err.w, stdin ?? null, false, (s) => (status = s))) as unknown as WebSocket;
  onOpen?.(ws);
  const closeCode = await new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  return { out, err, status, protocol: ws.protocol, closeCode };
}

/** Open a raw WebSocket to a streaming path and collect its messages until close. */
function rawSocket(path: string, protocols?: string | string[]) {
  const ws = new WebSocket(cluster.url.replace('http', 'ws') + path, protocols);
  const messages: { data: Buffer; binary: boolean }[] = [];
  ws.on('message', (data: Buffer, binary) => messages.push({ data, binary }));
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  const response = new Promise<{ code: number; body: string }>((resolve) => {
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
    });
  });
  return { ws, messages, opened, closed, response };
}

describe('exec over WebSocket with @kubernetes/client-node', () => {
  it('lands on v4.channel.k8s.io and returns stdout, stderr and the exit code', async () => {
    const r = await clientExec(['sh', '-c', 'echo out; echo err >&2; exit 3']);
    expect(r.protocol).toBe('v4.channel.k8s.io');
    expect(r.out.text()).toBe('out\n');
    expect(r.err.text()).toBe('err\n');
    expect(r.status).toMatchObject({ status: 'Failure', reason: 'NonZeroExitCode' });
    expect(r.status?.details?.causes).toEqual([{ reason: 'ExitCode', message: '3' }]);
  });

  it('reports Success and runs in the pod working directory with the pod env', async () => {
    const r = await clientExec(['sh', '-c', 'pwd; echo $HOME $HOSTNAME']);
    const dir = cluster.pods.get('default', 'demo')!.workDir;
    expect(r.out.text()).toBe(`${dir}\n${dir} demo\n`);
    expect(r.status).toEqual({ metadata: {}, status: 'Success' });
  });

  it('reports a missing executable as InternalError', async () => {
    const r = await clientExec(['no-such-command-xyz']);
    expect(r.status).toMatchObject({ status: 'Failure', reason: 'InternalError', code: 500 });
    expect(r.status?.message).toContain('no-such-command-xyz');
  });

  it('feeds stdin to cat (stdin ends when the socket closes)', async () => {
    const stdin = new PassThrough();
    const out = sink();
    const ws = (await new Exec(kc).exec('default', 'demo', 'demo', ['cat'], out.w, null, stdin, false)) as unknown as WebSocket;
    const echoed = new Promise<void>((resolve) => {
      ws.on('message', () => {
        if (out.text() === 'hello cat\n') resolve();
      });
    });
    stdin.write('hello cat\n');
    await echoed;
    ws.close();
    expect(out.text()).toBe('hello cat\n');
  });

  it('moves 1 MiB through exec byte-exact', async () => {
    const data = randomBytes(1024 * 1024);
    const stdin = new PassThrough();
    const chunk = 64 * 1024;
    for (let i = 0; i < data.length; i += chunk) stdin.write(data.subarray(i, i + chunk));
    // stdin is not ended: with v4 that would close the socket; head exits after reading it all
    const r = await clientExec(['head', '-c', String(data.length)], stdin);
    expect(r.out.bytes().length).toBe(data.length);
    expect(createHash('sha256').update(r.out.bytes()).digest('hex')).toBe(createHash('sha256').update(data).digest('hex'));
    expect(r.status?.status).toBe('Success');
  });

  it('streams large output with backpressure', async () => {
    const size = 64 * 1024 * 1024;
    const r = await clientExec(['head', '-c', String(size), '/dev/zero']);
    expect(r.out.bytes().length).toBe(size);
    expect(r.status?.status).toBe('Success');
  });
});

describe('legacy WebSocket protocol details', () => {
  const exec = '/api/v1/namespaces/default/pods/demo/exec';

  it('refuses v5-only clients with 403 and an empty body (a 1.29 kubelet)', async () => {
    const s = rawSocket(`${exec}?command=true&stdout=1`, ['v5.channel.k8s.io']);
    const res = await s.response;
    expect(res).toEqual({ code: 403, body: '' });
  });

  it('picks the first legacy protocol of the client list that it supports', async () => {
    const s = rawSocket(`${exec}?command=true&stdout=1`, ['v9.channel.k8s.io', 'base64.channel.k8s.io', 'v4.channel.k8s.io']);
    await s.opened;
    expect(s.ws.protocol).toBe('base64.channel.k8s.io');
    await s.closed;
  });

  it('refuses a list with no protocol it supports with 403 and an empty body', async () => {
    const s = rawSocket(`${exec}?command=true&stdout=1`, ['v9.channel.k8s.io']);
    expect(await s.response).toEqual({ code: 403, body: '' });
  });

  it('sends the initial frame, then v1 text status on failure (binary, no subprotocol)', async () => {
    const s = rawSocket(`${exec}?command=sh&command=-c&command=echo%20x%3B%20exit%205&stdout=1`);
    await s.opened;
    expect(s.ws.protocol).toBe('');
    expect(await s.closed).toBe(1000);
    expect(s.messages[0]).toEqual({ data: Buffer.from([1]), binary: true });
    expect(s.messages[1]).toEqual({ data: Buffer.from('\x01x\n'), binary: true });
    expect(s.messages[2]!.data[0]).toBe(3);
    expect(s.messages[2]!.data.subarray(1).toString()).toMatch(/^command terminated with non-zero exit code: .*5$/);
    expect(s.messages).toHaveLength(3);
  });

  it('sends nothing on channel 3 on success with channel.k8s.io', async () => {
    const s = rawSocket(`${exec}?command=true&stderr=1`, 'channel.k8s.io');
    expect(await s.closed).toBe(1000);
    expect(s.messages.map((m) => m.data)).toEqual([Buffer.from([2])]); // initial frame on stderr
  });

  it('frames v4.base64 as text with ASCII channel digits and a JSON status', async () => {
    const s = rawSocket(`${exec}?command=echo&command=hi&stdout=1`, 'v4.base64.channel.k8s.io');
    expect(await s.closed).toBe(1000);
    const texts = s.messages.map((m) => [m.binary, m.data.toString()]);
    expect(texts).toEqual([
      [false, '1'],
      [false, '1' + Buffer.from('hi\n').toString('base64')],
      [false, '3' + Buffer.from('{"metadata":{},"status":"Success"}').toString('base64')],
    ]);
  });

  it('decodes base64 stdin and applies resize to a tty exec', async () => {
    const s = rawSocket(`${exec}?command=sh&stdin=1&stdout=1&tty=1`, 'v4.base64.channel.k8s.io');
    await s.opened;
    s.ws.send('4' + Buffer.from('{"Width":100,"Height":30}').toString('base64'));
    s.ws.send('0' + Buffer.from('stty size; exit 4\n').toString('base64'));
    expect(await s.closed).toBe(1000);
    const out = s.messages
      .filter((m) => m.data.toString()[0] === '1')
      .map((m) => Buffer.from(m.data.toString().slice(1), 'base64').toString())
      .join('');
    expect(out).toContain('30 100');
    const status = s.messages.at(-1)!.data.toString();
    expect(status[0]).toBe('3');
    expect(JSON.parse(Buffer.from(status.slice(1), 'base64').toString())).toMatchObject({ reason: 'NonZeroExitCode' });
  });

  it('validates pod and query before upgrading', async () => {
    expect((await rawSocket('/api/v1/namespaces/default/pods/nope/exec?command=ls&stdout=1', 'v4.channel.k8s.io').response).code).toBe(404);
    const noStream = await rawSocket(`${exec}?command=ls`, 'v4.channel.k8s.io').response;
    expect(noStream.code).toBe(400);
    expect(JSON.parse(noStream.body).message).toBe('you must specify at least 1 of stdin, stdout, stderr');
    const noPorts = await rawSocket('/api/v1/namespaces/default/pods/demo/portforward', 'v4.channel.k8s.io').response;
    expect([noPorts.code, JSON.parse(noPorts.body).message]).toEqual([400, 'query parameter "port" is required']);
  });
});

describe('attach over WebSocket', () => {
  it('sees the main process output and feeds its stdin', async () => {
    const out = sink();
    const stdin = new PassThrough();
    const ws = (await new Attach(kc).attach('default', 'demo', 'demo', out.w, null, stdin, false)) as unknown as WebSocket;
    expect(ws.protocol).toBe('v4.channel.k8s.io');
    const seen = new Promise<void>((resolve) => {
      ws.on('message', () => {
        if (out.text().includes('attached-ok')) resolve();
      });
    });
    stdin.write('echo attached-ok\n');
    await seen;
    expect(out.text()).toBe('attached-ok\n');
    ws.close();
  });

  it('ends with the main process (then restarted) and reports Success', async () => {
    const s = rawSocket('/api/v1/namespaces/default/pods/demo/attach?stdin=1&stdout=1', 'v4.channel.k8s.io');
    await s.opened;
    const main = cluster.pods.get('default', 'demo')!.mains.get('demo')!;
    const before = main.restartCount;
    const restarted = new Promise<void>((resolve) => main.once('restart', resolve));
    s.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('echo bye; exit 7\n')]));
    expect(await s.closed).toBe(1000);
    const data = s.messages.map((m) => m.data);
    expect(data[0]).toEqual(Buffer.from([1]));
    expect(Buffer.concat(data.filter((d) => d[0] === 1).map((d) => d.subarray(1))).toString()).toBe('bye\n');
    expect(JSON.parse(data.at(-1)!.subarray(1).toString())).toEqual({ metadata: {}, status: 'Success' });
    await restarted;
    expect(main.restartCount).toBe(before + 1);
  });
});

describe('port-forward over WebSocket', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createServer((req, res) => res.end(`hello from ${req.url}`));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('forwards an HTTP request with client-node PortForward', async () => {
    const out = sink();
    const err = sink();
    const input = new PassThrough();
    const ws = (await new PortForward(kc).portForward('default', 'demo', [port], out.w, err.w, input)) as unknown as WebSocket;
    expect(ws.protocol).toBe('v4.channel.k8s.io');
    input.write('GET /pf HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(await new Promise<number>((r) => ws.once('close', r))).toBe(1000);
    expect(out.text()).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(out.text().endsWith('hello from /pf')).toBe(true);
    expect(err.text()).toBe('');
  });

  it('prefixes each channel with the port and reports a refused connection on the error channel', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const s = rawSocket(`/api/v1/namespaces/default/pods/demo/portforward?ports=${deadPort}`, 'v4.channel.k8s.io');
    expect(await s.closed).toBe(1000);
    const le = Buffer.from([deadPort & 0xff, deadPort >> 8]);
    expect(s.messages[0]!.data).toEqual(Buffer.concat([Buffer.from([0]), le]));
    expect(s.messages[1]!.data).toEqual(Buffer.concat([Buffer.from([1]), le]));
    const errText = s.messages[2]!.data;
    expect(errText[0]).toBe(1);
    expect(errText.subarray(1).toString()).toMatch(new RegExp(`^error forwarding port ${deadPort} to pod demo, uid .*ECONNREFUSED`));
  });
});

describe('@kubernetes/client-node against a 1.36 cluster', () => {
  let modern: DevCluster;
  beforeAll(async () => {
    modern = await startDevCluster({});
  });
  afterAll(async () => {
    await modern?.close();
  });

  it('exec lands on v5.channel.k8s.io (passed to the kubelet); stdin EOF by CLOSE ends cat', async () => {
    const mkc = new KubeConfig();
    mkc.loadFromOptions({
      clusters: [{ name: 'dev', server: modern.url, skipTLSVerify: true }],
      users: [{ name: 'dev' }],
      contexts: [{ name: 'dev', cluster: 'dev', user: 'dev' }],
      currentContext: 'dev',
    });
    const out = sink();
    const stdin = new PassThrough();
    let status: V1Status | undefined;
    const ws = (await new Exec(mkc).exec('default', 'demo', 'demo', ['cat'], out.w, null, stdin, false, (s) => (status = s))) as unknown as WebSocket;
    expect(ws.protocol).toBe('v5.channel.k8s.io');
    stdin.end('through the kubelet\n');
    await new Promise<void>((resolve) => ws.once('close', () => resolve()));
    expect(out.text()).toBe('through the kubelet\n');
    expect(status?.status).toBe('Success');
    expect(modern.metrics.apiserver.exposition()).toContain('apiserver_websocket_streaming_requests_total{proxy_type="proxied_to_kubelet",subresource="exec"} 1\n');
    expect(modern.metrics.kubelet.exposition()).toContain('kubelet_websocket_streaming_requests_total{subresource="exec"} 1\n');
  });
});
