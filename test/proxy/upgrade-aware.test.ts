import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import type { RunningServer } from '../../src/server.js';
import {
  RawClient,
  headValues,
  isCompleteAnswer,
  parseAnswer,
  spdyUpgradeRequest,
  startProxy,
  startScriptedUpstream,
  type ScriptedUpstream,
} from './scripted-upstream.js';

const SWITCHING = 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n';
/** The first bytes of a SPDY/3 SETTINGS control frame: what a kubelet sends right after the 101. */
const SPDY_FRAME = Buffer.from([0x80, 0x03, 0x00, 0x04, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01]);

let upstream: ScriptedUpstream;
let proxy: RunningServer;

beforeEach(async () => {
  upstream = await startScriptedUpstream();
  proxy = await startProxy(upstream.url, { upgradeResponseTimeout: '2s' });
});

afterEach(async () => {
  await proxy.close();
  await upstream.close();
});

describe('UpgradeAwareProxy against a scripted upstream', () => {
  it('relays a 101 and the first frame sent in the same TCP write intact, the client\'s early bytes only after the 101, then copies both ways', async () => {
    const client = await RawClient.connect(proxy.url);
    const early = Buffer.from('early-client-bytes');
    client.socket.write(Buffer.concat([Buffer.from(spdyUpgradeRequest(), 'latin1'), early]));
    const conn = await upstream.next();

    expect(conn.head).toMatch(/^POST \/api\/v1\/namespaces\/default\/pods\/demo\/exec\?command=sh HTTP\/1\.1\r\n/);
    expect(headValues(conn.head, 'x-stream-protocol-version')).toEqual(['v4.channel.k8s.io', 'v3.channel.k8s.io']);
    expect(headValues(conn.head, 'connection')).toEqual(['Upgrade']);
    expect(headValues(conn.head, 'upgrade')).toEqual(['SPDY/3.1']);
    expect(headValues(conn.head, 'host')).toEqual([`127.0.0.1:${upstream.port}`]);
    expect(headValues(conn.head, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    // Bytes the client sent with the request head wait for the 101 (issue 25): the head went up alone.
    expect(conn.rest).toEqual(Buffer.alloc(0));
    const upstreamSeen = new RawClientSink(conn.socket, conn.rest);

    const answer = Buffer.concat([Buffer.from(SWITCHING, 'latin1'), SPDY_FRAME]);
    conn.socket.write(answer);
    const got = await client.atLeast(answer.length);
    expect(got).toEqual(answer);
    // Then they are the upgraded stream's first bytes.
    await upstreamSeen.atLeast(early.length);
    expect(upstreamSeen.received.subarray(0, early.length)).toEqual(early);

    client.socket.write('ping-from-client');
    await upstreamSeen.atLeast(early.length + 16);
    expect(upstreamSeen.received.subarray(early.length).toString()).toBe('ping-from-client');
    conn.socket.write('pong-from-upstream');
    await client.atLeast(answer.length + 18);
    expect(client.received.subarray(answer.length).toString()).toBe('pong-from-upstream');
    client.socket.destroy();
  });

  it('relays an upstream 403 with a JSON body byte for byte and starts no copy', async () => {
    const client = await RawClient.connect(proxy.url);
    client.socket.write(spdyUpgradeRequest());
    const conn = await upstream.next();
    const body = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"demo\\" is forbidden","reason":"Forbidden","code":403}\n';
    const answer = Buffer.from(
      `HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nX-Odd-Header:  kept  as-is\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      'latin1',
    );
    const sink = new RawClientSink(conn.socket, conn.rest);
    // Head plus part of the body first, the rest once that arrived: the body is streamed, not re-framed.
    const split = answer.indexOf('\r\n\r\n') + 4 + 20;
    conn.socket.write(answer.subarray(0, split));
    await client.atLeast(split);
    conn.socket.write(answer.subarray(split));
    const got = await client.end();
    expect(got.toString('latin1')).toBe(answer.toString('latin1'));
    // No copying: the upstream connection is closed by the proxy and got nothing after the request.
    await sink.end();
    expect(sink.received.length).toBe(0);
  });

  it('answers a Status when the upstream closes before the end of the head', async () => {
    const client = await RawClient.connect(proxy.url);
    client.socket.write(spdyUpgradeRequest());
    const conn = await upstream.next();
    conn.socket.end('HTTP/1.1 101 Switching Protocols\r\nConnection: Up');
    const { status, head, body } = parseAnswer(await client.until(isCompleteAnswer));
    expect(status).toBe(500);
    expect(head).toMatch(/content-type: application\/json/i);
    const s = JSON.parse(body.toString());
    expect(s).toMatchObject({ kind: 'Status', status: 'Failure', code: 500 });
    expect(s.message).toMatch(/upstream closed the connection after 48 bytes/);
  });

  it('answers 503 when the upstream is unreachable', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const p2 = await startProxy(`http://127.0.0.1:${port}`);
    try {
      const client = await RawClient.connect(p2.url);
      client.socket.write(spdyUpgradeRequest());
      const { status, body } = parseAnswer(await client.until(isCompleteAnswer));
      expect(status).toBe(503);
      const s = JSON.parse(body.toString());
      expect(s).toMatchObject({ kind: 'Status', reason: 'ServiceUnavailable', code: 503 });
      expect(s.message).toMatch(/^error trying to reach service: error dialing backend: connect ECONNREFUSED/);
    } finally {
      await p2.close();
    }
  });

  it('answers 504 when the upstream stays silent past --upgrade-response-timeout', async () => {
    const p2 = await startProxy(upstream.url, { upgradeResponseTimeout: '300ms' });
    try {
      const client = await RawClient.connect(p2.url);
      const started = performance.now();
      client.socket.write(spdyUpgradeRequest());
      const conn = await upstream.next();
      const sink = new RawClientSink(conn.socket, conn.rest);
      const { status, body } = parseAnswer(await client.until(isCompleteAnswer));
      const elapsed = performance.now() - started;
      expect(status).toBe(504);
      expect(JSON.parse(body.toString())).toMatchObject({ reason: 'Timeout', code: 504 });
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(elapsed).toBeLessThan(5000);
      await sink.end(); // the upstream connection is dropped
    } finally {
      await p2.close();
    }
  });

  it('accepts `connection: upgrade` in lower case (nginx) from both sides', async () => {
    const client = await RawClient.connect(proxy.url);
    client.socket.write(
      'GET /api/v1/namespaces/default/pods/demo/exec?command=ls HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n' +
        'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\nsec-websocket-protocol: v4.channel.k8s.io\r\n\r\n',
    );
    const conn = await upstream.next();
    expect(headValues(conn.head, 'sec-websocket-protocol')).toEqual(['v4.channel.k8s.io']);
    expect(headValues(conn.head, 'upgrade')).toEqual(['websocket']);
    const answer = 'HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nsec-websocket-protocol: v4.channel.k8s.io\r\n\r\n';
    conn.socket.write(answer);
    expect((await client.atLeast(answer.length)).toString('latin1')).toBe(answer);
    client.socket.destroy();
  });

  it.each([
    ['a 101 switching to another protocol', 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n', 500, /upstream switched to "websocket", requested "spdy\/3.1"/],
    ['a 101 without Connection: upgrade', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\n\r\n', 500, /no Connection: upgrade/],
    ['a 200', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok', 500, /^invalid upgrade response: status code 200$/],
    ['a redirect (not followed)', 'HTTP/1.1 302 Found\r\nLocation: http://elsewhere/\r\nContent-Length: 0\r\n\r\n', 500, /^invalid upgrade response: status code 302$/],
    ['a garbage status line', 'SSH-2.0-OpenSSH_9.6\r\n\r\n', 500, /malformed HTTP response: bad status line/],
  ])('answers a Status for %s', async (_name, answer, code, message) => {
    const client = await RawClient.connect(proxy.url);
    client.socket.write(spdyUpgradeRequest());
    const conn = await upstream.next();
    conn.socket.write(answer);
    const { status, body } = parseAnswer(await client.until(isCompleteAnswer));
    expect(status).toBe(code);
    const s = JSON.parse(body.toString());
    expect(s.kind).toBe('Status');
    expect(s.message).toMatch(message);
  });

  it('answers a Status when the upstream head exceeds the byte cap', async () => {
    const client = await RawClient.connect(proxy.url);
    client.socket.write(spdyUpgradeRequest());
    const conn = await upstream.next();
    conn.socket.write('HTTP/1.1 101 Switching Protocols\r\n');
    conn.socket.write(`X-Big: ${'a'.repeat(70 * 1024)}\r\n`);
    const { status, body } = parseAnswer(await client.until(isCompleteAnswer));
    expect(status).toBe(500);
    expect(JSON.parse(body.toString()).message).toMatch(/response head exceeds 65536 bytes/);
  });

  it('closes both connections when the upstream ends, after delivering what it sent (no half-close)', async () => {
    const client = await RawClient.connect(proxy.url);
    client.socket.write(spdyUpgradeRequest());
    const conn = await upstream.next();
    const sink = new RawClientSink(conn.socket, conn.rest);
    // Large enough that part of it is still queued in the proxy when the upstream's FIN arrives.
    const last = Buffer.alloc(8 * 1024 * 1024, 0x61);
    conn.socket.end(Buffer.concat([Buffer.from(SWITCHING), last]));
    const got = await client.end();
    expect(got.length).toBe(SWITCHING.length + last.length);
    expect(got.subarray(SWITCHING.length).equals(last)).toBe(true);
    await sink.end();
  });

  it('closes both connections when the client half-closes', async () => {
    const client = await RawClient.connect(proxy.url);
    client.socket.write(spdyUpgradeRequest());
    const conn = await upstream.next();
    const sink = new RawClientSink(conn.socket, conn.rest);
    conn.socket.write(SWITCHING);
    await client.atLeast(SWITCHING.length);
    client.socket.end('bye');
    await sink.end();
    expect(sink.received.toString()).toBe('bye');
    // The proxy closed the client side too, although the upstream never closed its own.
    await client.end();
  });

  it('answers 400 `Upgrade request required` to a plain request', async () => {
    const res = await fetch(`${proxy.url}/api/v1/namespaces/default/pods/demo/exec?command=ls`, { method: 'POST' });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ kind: 'Status', message: 'Upgrade request required', reason: 'BadRequest', code: 400 });
  });

  it.each([
    ['an encoded slash in the name', '/api/v1/namespaces/default/pods/a%2Fb/exec'],
    ['a dot-dot name', '/api/v1/namespaces/default/pods/../exec'],
    ['an encoded dot-dot namespace', '/api/v1/namespaces/%2E%2E/pods/demo/attach'],
    ['an upper-case namespace', '/api/v1/namespaces/Default/pods/demo/portforward'],
    ['a 64-character namespace', `/api/v1/namespaces/${'n'.repeat(64)}/pods/demo/exec`],
    ['a trailing slash', '/api/v1/namespaces/default/pods/demo/exec/'],
  ])('refuses %s with a 400 Status before dialling', async (_name, path) => {
    const client = await RawClient.connect(proxy.url);
    client.socket.write(spdyUpgradeRequest(path));
    const { status, body } = parseAnswer(await client.until(isCompleteAnswer));
    expect(status).toBe(400);
    expect(JSON.parse(body.toString())).toMatchObject({ kind: 'Status', code: 400 });
  });

  it('runs onRequest hooks for upgrade requests before the handler hijacks', async () => {
    const seen: string[] = [];
    const p2 = await startProxy(upstream.url, {}, {
      configure: (app) => {
        app.addHook('onRequest', async (request) => {
          seen.push(`${request.method} ${request.url}`);
        });
      },
    });
    try {
      const client = await RawClient.connect(p2.url);
      client.socket.write(spdyUpgradeRequest('/api/v1/namespaces/default/pods/demo/attach?stdout=true'));
      const conn = await upstream.next();
      expect(seen).toEqual(['POST /api/v1/namespaces/default/pods/demo/attach?stdout=true']);
      conn.socket.write(SWITCHING);
      await client.atLeast(SWITCHING.length);
      client.socket.destroy();
    } finally {
      await p2.close();
    }
  });
});

/** Collects what arrives on an upstream-side socket (whose first bytes may already be in `rest`). */
class RawClientSink {
  received: Buffer;
  ended = false;
  readonly #waiters: Array<() => void> = [];
  constructor(socket: import('node:net').Socket, rest: Buffer) {
    this.received = Buffer.from(rest);
    socket.on('data', (c: Buffer) => {
      this.received = Buffer.concat([this.received, c]);
      this.#wake();
    });
    const done = (): void => {
      this.ended = true;
      this.#wake();
    };
    socket.on('end', done);
    socket.on('close', done);
    socket.resume();
  }
  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }
  async atLeast(n: number): Promise<void> {
    while (this.received.length < n) {
      if (this.ended) throw new Error(`ended after ${this.received.length} bytes, wanted ${n}`);
      await new Promise<void>((r) => this.#waiters.push(r));
    }
  }
  async end(): Promise<void> {
    while (!this.ended) await new Promise<void>((r) => this.#waiters.push(r));
  }
}
