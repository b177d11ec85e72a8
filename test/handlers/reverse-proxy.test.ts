import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request, type IncomingMessage } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningServer } from '../../src/server.js';
import { headValues, startProxy, startScriptedUpstream, type ScriptedUpstream } from '../proxy/scripted-upstream.js';

let upstream: ScriptedUpstream;
let proxy: RunningServer;

beforeEach(async () => {
  upstream = await startScriptedUpstream();
  proxy = await startProxy(upstream.url);
});

afterEach(async () => {
  await proxy.close();
  await upstream.close();
});

/** Send a request through the proxy with exact header lines; resolves at the response head. */
function send(path: string, headers: string[] = [], method = 'GET', body?: Buffer): Promise<IncomingMessage> {
  const u = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    // A raw header array gets no automatic Host; HTTP/1.1 requires one.
    const lines = headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === 'host') ? headers : ['Host', u.host, ...headers];
    const req = request({ host: u.hostname, port: u.port, method, path, headers: lines, agent: false }, resolve);
    req.on('error', reject);
    req.end(body);
  });
}

/** Resolves with the next chunk of a response body. */
function nextChunk(res: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    res.once('data', resolve);
    res.once('error', reject);
  });
}

async function bodyOf(res: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('catch-all reverse proxy', () => {
  it('streams a chunked watch event by event while the upstream keeps the response open', async () => {
    const pending = send('/api/v1/namespaces/default/pods?watch=true');
    const conn = await upstream.next();
    expect(conn.head).toMatch(/^GET \/api\/v1\/namespaces\/default\/pods\?watch=true HTTP\/1\.1\r\n/);
    conn.socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
    const res = await pending; // the head arrives before any event
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');

    const event1 = '{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a"}}}\n';
    conn.socket.write(`${Buffer.byteLength(event1).toString(16)}\r\n${event1}\r\n`);
    expect((await nextChunk(res)).toString()).toBe(event1);

    const event2 = '{"type":"DELETED","object":{"kind":"Pod","metadata":{"name":"a"}}}\n';
    conn.socket.write(`${Buffer.byteLength(event2).toString(16)}\r\n${event2}\r\n`);
    expect((await nextChunk(res)).toString()).toBe(event2);

    conn.socket.write('0\r\n\r\n');
    await once(res, 'end');
  });

  it('drops the upstream request when the watching client goes away', async () => {
    const pending = send('/api/v1/pods?watch=true');
    const conn = await upstream.next();
    conn.socket.resume();
    conn.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
    const res = await pending;
    expect((await nextChunk(res)).toString()).toBe('hello');
    res.destroy();
    await once(conn.socket, 'close');
  });

  it('forwards status, headers and body as they come, and POST bodies upstream', async () => {
    const pending = send('/api/v1/namespaces/default/configmaps', ['Content-Type', 'application/json', 'Content-Length', '13'], 'POST', Buffer.from('{"kind":"x"}\n'));
    const conn = await upstream.next();
    // Read the request body the proxy streamed up.
    let up = Buffer.from(conn.rest);
    conn.socket.on('data', (c: Buffer) => (up = Buffer.concat([up, c])));
    conn.socket.resume();
    while (up.length < 13) await once(conn.socket, 'data');
    expect(up.toString()).toBe('{"kind":"x"}\n');
    const body = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \\"x\\" already exists","reason":"AlreadyExists","code":409}';
    conn.socket.write(
      `HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nAudit-Id: 1234\r\nWarning: 299 - "one"\r\nWarning: 299 - "two"\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    const res = await pending;
    expect(res.statusCode).toBe(409);
    expect(res.headers['audit-id']).toBe('1234');
    expect(res.rawHeaders.filter((_, i, a) => i % 2 === 1 && a[i - 1]!.toLowerCase() === 'warning')).toEqual(['299 - "one"', '299 - "two"']);
    expect((await bodyOf(res)).toString()).toBe(body);
  });

  it('removes hop-by-hop headers both ways and adds X-Forwarded-For/Proto/Host', async () => {
    const pending = send('/version', [
      'Connection', 'X-Hop',
      'X-Hop', 'client-secret',
      'Keep-Alive', 'timeout=5',
      'TE', 'trailers',
      'Proxy-Authorization', 'Basic eA==',
      'X-Forwarded-For', '10.1.2.3',
      'Host', 'proxy.example:6443',
      'Accept', 'application/json',
    ]);
    const conn = await upstream.next();
    for (const h of ['x-hop', 'keep-alive', 'te', 'proxy-authorization', 'upgrade', 'transfer-encoding']) {
      expect(headValues(conn.head, h), h).toEqual([]);
    }
    expect(headValues(conn.head, 'accept')).toEqual(['application/json']);
    expect(headValues(conn.head, 'x-forwarded-for')).toEqual(['10.1.2.3, 127.0.0.1']);
    expect(headValues(conn.head, 'x-forwarded-proto')).toEqual(['http']);
    expect(headValues(conn.head, 'x-forwarded-host')).toEqual(['proxy.example:6443']);
    expect(headValues(conn.head, 'host')).toEqual([`127.0.0.1:${upstream.port}`]);
    conn.socket.write(
      'HTTP/1.1 200 OK\r\nConnection: X-Upstream-Hop\r\nX-Upstream-Hop: 1\r\nKeep-Alive: timeout=99\r\nProxy-Authenticate: Basic\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok',
    );
    const res = await pending;
    expect(res.headers['x-upstream-hop']).toBeUndefined();
    expect(res.headers['proxy-authenticate']).toBeUndefined();
    expect(res.headers['keep-alive']).not.toBe('timeout=99');
    expect(res.headers['x-kept']).toBe('yes');
    expect((await bodyOf(res)).toString()).toBe('ok');
  });

  it('relays a redirect without following it', async () => {
    const pending = send('/somewhere');
    const conn = await upstream.next();
    conn.socket.write('HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/elsewhere\r\nContent-Length: 0\r\n\r\n');
    const res = await pending;
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe('http://127.0.0.1:1/elsewhere');
    await bodyOf(res);
  });

  it('answers 503 `error trying to reach service` when the upstream cannot be dialled', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const p2 = await startProxy(`http://127.0.0.1:${port}`);
    try {
      const res = await fetch(`${p2.url}/api/v1/namespaces`);
      expect(res.status).toBe(503);
      const s = (await res.json()) as { message: string };
      expect(s).toMatchObject({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'ServiceUnavailable', code: 503 });
      expect(s.message).toMatch(/^error trying to reach service: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
    } finally {
      await p2.close();
    }
  });

  it('passthrough: forwards the caller\'s credentials unchanged and never adds the proxy\'s own token', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ksp-token-'));
    writeFileSync(join(dir, 'token'), 'proxy-token\n');
    const p2 = await startProxy(upstream.url, { upstreamTokenFile: join(dir, 'token') });
    try {
      const u = new URL(p2.url);
      const send = (headers: Record<string, string>): Promise<IncomingMessage> =>
        new Promise<IncomingMessage>((resolve, reject) => {
          request({ host: u.hostname, port: u.port, path: '/api', headers, agent: false }, resolve).on('error', reject).end();
        });
      const withToken = send({ Authorization: 'Bearer client-token', 'Impersonate-User': 'jane' });
      let conn = await upstream.next();
      expect(headValues(conn.head, 'authorization')).toEqual(['Bearer client-token']);
      expect(headValues(conn.head, 'impersonate-user')).toEqual(['jane']);
      // Connection: close, so that the next request arrives on a new upstream connection.
      conn.socket.end('HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n');
      expect((await withToken).statusCode).toBe(204);
      // An anonymous caller stays anonymous upstream, even though the proxy has a token of its own.
      const anonymous = send({});
      conn = await upstream.next();
      expect(headValues(conn.head, 'authorization')).toEqual([]);
      conn.socket.write('HTTP/1.1 204 No Content\r\n\r\n');
      expect((await anonymous).statusCode).toBe(204);
    } finally {
      await p2.close();
    }
  });

  it('refuses pod streaming subresources reached through a non-canonical path', async () => {
    for (const path of ['/api/v1/namespaces/default/pods/demo/exec/', '//api/v1/namespaces/default/pods/demo/%65xec']) {
      const res = await fetch(`${proxy.url}${path}`, { method: 'PUT' });
      expect(res.status, path).toBe(400);
      expect(((await res.json()) as { kind: string }).kind).toBe('Status');
    }
  });
});
