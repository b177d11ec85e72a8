/**
 * The port-forward tunnel end to end through the in-process proxy, against a scripted raw upstream
 * whose every byte the test writes, and a raw WebSocket client (see stream-tunnel-client.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import type { RunningServer } from '../../src/server.js';
import { headValues, startProxy, startScriptedUpstream, type ScriptedUpstream, type UpstreamConnection } from '../proxy/scripted-upstream.js';
import { Op, TunnelTestClient, clientFrame, closeFrame, headerValues } from './stream-tunnel-client.js';

const PATH = '/api/v1/namespaces/default/pods/demo/portforward';
const SWITCHING = 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n';
/** A SPDY/3 SETTINGS frame: what a kubelet may send right behind its 101. */
const SPDY_SETTINGS = Buffer.from([0x80, 0x03, 0x00, 0x04, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01]);

/** Collects what the upstream side of a connection receives after the request head. */
class UpstreamSide {
  received: Buffer;
  ended = false;
  closed = false;
  readonly #waiters: Array<() => void> = [];
  constructor(readonly socket: Socket, rest: Buffer) {
    this.received = rest;
    socket.on('data', (c: Buffer) => ((this.received = Buffer.concat([this.received, c])), this.#wake()));
    socket.on('end', () => ((this.ended = true), this.#wake()));
    socket.on('close', () => ((this.closed = true), this.#wake()));
    socket.resume();
  }
  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }
  async until(p: () => boolean): Promise<void> {
    while (!p()) await new Promise<void>((r) => this.#waiters.push(r));
  }
}

let upstream: ScriptedUpstream;
let proxy: RunningServer;

async function tunnelCount(code: string): Promise<number> {
  const text = await (await fetch(`${proxy.url}/metrics`)).text();
  const m = new RegExp(`^apiserver_stream_tunnel_requests_total\\{code="${code}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** Open a tunnel whose upstream answered `SWITCHING` (+ `early`); returns both ends. */
async function openTunnel(early = Buffer.alloc(0)): Promise<{ client: TunnelTestClient; conn: UpstreamConnection; up: UpstreamSide }> {
  const client = await TunnelTestClient.open(proxy.url, PATH);
  const conn = await upstream.next();
  const up = new UpstreamSide(conn.socket, conn.rest);
  conn.socket.write(Buffer.concat([Buffer.from(SWITCHING, 'latin1'), early]));
  await client.until(() => client.status !== 0, 'the 101');
  expect(client.status, client.head).toBe(101);
  return { client, conn, up };
}

describe('StreamTunnelProxy against a scripted upstream', () => {
  beforeEach(async () => {
    upstream = await startScriptedUpstream();
    proxy = await startProxy(upstream.url, { upgradeResponseTimeout: '2s', upstreamStreaming: 'spdy' });
  });
  afterEach(async () => {
    await proxy.close();
    await upstream.close();
  });

  it('re-issues the request as a SPDY/3.1 POST and answers 101 only after the upstream did', async () => {
    const client = await TunnelTestClient.open(proxy.url, `${PATH}?foo=bar`, 'SPDY/3.1+portforward.k8s.io', 'Authorization: Bearer caller\r\nImpersonate-User: alice\r\n');
    const conn = await upstream.next();
    expect(conn.head).toMatch(/^POST \/api\/v1\/namespaces\/default\/pods\/demo\/portforward\?foo=bar HTTP\/1\.1\r\n/);
    expect(headValues(conn.head, 'upgrade')).toEqual(['SPDY/3.1']);
    expect(headValues(conn.head, 'connection')).toEqual(['Upgrade']);
    expect(headValues(conn.head, 'x-stream-protocol-version')).toEqual(['portforward.k8s.io']);
    expect(headValues(conn.head, 'content-length')).toEqual(['0']);
    expect(headValues(conn.head, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    expect(headValues(conn.head, 'authorization')).toEqual(['Bearer caller']);
    expect(headValues(conn.head, 'impersonate-user')).toEqual(['alice']);
    expect(conn.head.toLowerCase()).not.toContain('sec-websocket');
    expect(client.status).toBe(0); // nothing answered before the upstream
    conn.socket.write(SWITCHING);
    await client.until(() => client.status !== 0, 'the 101');
    expect(client.status).toBe(101);
    expect(headerValues(client.head, 'sec-websocket-protocol')).toEqual(['SPDY/3.1+portforward.k8s.io']);
    expect(headerValues(client.head, 'upgrade')).toEqual(['websocket']);
    expect(client.head).not.toContain('SPDY/3.1\r\n'); // the upstream head is swallowed
    expect(await tunnelCount('101')).toBe(1);
    client.socket.destroy();
  });

  it('delivers SPDY bytes sent in the same write as the 101, then relays both ways', async () => {
    const { client, up } = await openTunnel(SPDY_SETTINGS);
    await client.until(() => client.binaryLength >= SPDY_SETTINGS.length, 'the early bytes');
    expect(client.binary).toEqual(SPDY_SETTINGS);
    // Client message boundaries need not match anything upstream: split one "frame" in three messages.
    const payload = randomBytes(70_000);
    client.send(Buffer.concat([clientFrame(Op.BINARY, payload.subarray(0, 8)), clientFrame(Op.BINARY, payload.subarray(8, 1000)), clientFrame(Op.BINARY, payload.subarray(1000))]));
    await up.until(() => up.received.length >= payload.length);
    expect(up.received.equals(payload)).toBe(true); // toEqual on big Buffers is slow
    const back = randomBytes(200_000);
    up.socket.write(back);
    await client.until(() => client.binaryLength >= SPDY_SETTINGS.length + back.length, 'the upstream bytes');
    expect(client.binary.subarray(SPDY_SETTINGS.length).equals(back)).toBe(true);
    client.socket.destroy();
  });

  it('moves 8 MiB each way byte-exact with fragmented client messages', async () => {
    const { client, up } = await openTunnel();
    const toUp = randomBytes(8 << 20);
    const frames: Buffer[] = [];
    for (let off = 0, i = 0; off < toUp.length; i++) {
      const n = Math.min(toUp.length - off, 1 + ((i * 7919) % 65_000));
      // Every fifth message is sent in two fragments.
      if (i % 5 === 0 && n > 1) frames.push(clientFrame(Op.BINARY, toUp.subarray(off, off + 1), false), clientFrame(Op.CONT, toUp.subarray(off + 1, off + n)));
      else frames.push(clientFrame(Op.BINARY, toUp.subarray(off, off + n)));
      off += n;
    }
    client.send(Buffer.concat(frames));
    const toClient = randomBytes(8 << 20);
    up.socket.write(toClient);
    await up.until(() => up.received.length >= toUp.length);
    await client.until(() => client.binaryLength >= toClient.length, '8 MiB');
    expect(up.received.equals(toUp)).toBe(true);
    expect(client.binary.equals(toClient)).toBe(true);
    client.socket.destroy();
  });

  it('replays an upstream 403 JSON verbatim and counts 403', async () => {
    const client = await TunnelTestClient.open(proxy.url, PATH);
    const conn = await upstream.next();
    const body = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden","reason":"Forbidden","code":403}\n';
    const answer = `HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nX-Odd:  kept\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    conn.socket.write(answer);
    await client.closed();
    expect(client.head + client.body.toString('latin1')).toBe(answer);
    expect(await tunnelCount('403')).toBe(1);
    expect(await tunnelCount('101')).toBe(0);
  });

  it('answers a 101 without upgrade headers with a 500 Status', async () => {
    const client = await TunnelTestClient.open(proxy.url, PATH);
    const conn = await upstream.next();
    conn.socket.write('HTTP/1.1 101 Switching Protocols\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n');
    await client.closed();
    expect(client.status).toBe(500);
    expect(JSON.parse(client.body.toString())).toMatchObject({ kind: 'Status', code: 500, reason: 'InternalError' });
    expect(await tunnelCount('500')).toBe(1);
  });

  it("answers another non-101 with a Status and counts the upstream's code", async () => {
    const client = await TunnelTestClient.open(proxy.url, PATH);
    const conn = await upstream.next();
    conn.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    await client.closed();
    expect(client.status).toBe(500);
    expect(JSON.parse(client.body.toString()).message).toBe('invalid upgrade response: status code 200');
    expect(await tunnelCount('200')).toBe(1);
  });

  it('answers a 101 without a subprotocol when the upstream named no protocol', async () => {
    const client = await TunnelTestClient.open(proxy.url, PATH);
    const conn = await upstream.next();
    conn.socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
    await client.until(() => client.status !== 0, 'the 101');
    expect(client.status).toBe(101);
    expect(headerValues(client.head, 'sec-websocket-protocol')).toEqual([]);
    client.socket.destroy();
  });

  it('closes 1003 on a text message and drops the upstream', async () => {
    const { client, up } = await openTunnel();
    client.send(clientFrame(Op.TEXT, Buffer.from('hello')));
    await client.until(() => client.closeCode !== undefined, 'a close frame');
    expect(client.closeCode).toBe(1003);
    await up.until(() => up.closed);
    expect(up.received.length).toBe(0);
  });

  it('treats close 1000 as EOF: what was sent reaches the upstream, then it ends', async () => {
    const { client, up } = await openTunnel();
    client.send(Buffer.concat([clientFrame(Op.BINARY, Buffer.from('last bytes')), closeFrame(1000)]));
    await up.until(() => up.ended);
    expect(up.received.toString()).toBe('last bytes');
    await client.until(() => client.closeCode !== undefined, 'the close reply');
    expect(client.closeCode).toBe(1000);
  });

  it('turns upstream EOF into close 1000 after the last bytes', async () => {
    const { client, up } = await openTunnel();
    up.socket.end('goodbye');
    await client.closed();
    expect(client.binary.toString()).toBe('goodbye');
    expect(client.closeCode).toBe(1000);
  });

  it('does not tunnel legacy WebSocket v4 (client-node): the request passes through unchanged', async () => {
    const client = await TunnelTestClient.open(proxy.url, `${PATH}?ports=80`, 'v4.channel.k8s.io, v4.base64.channel.k8s.io');
    const conn = await upstream.next();
    expect(conn.head).toMatch(/^GET .*\?ports=80 HTTP\/1\.1\r\n/);
    expect(headValues(conn.head, 'upgrade')).toEqual(['websocket']);
    expect(headValues(conn.head, 'sec-websocket-protocol')).toEqual(['v4.channel.k8s.io, v4.base64.channel.k8s.io']);
    conn.socket.destroy();
    await client.closed();
    expect(await tunnelCount('101')).toBe(0);
  });
});

describe('StreamTunnelProxy with PortForwardWebsockets=false', () => {
  beforeEach(async () => {
    upstream = await startScriptedUpstream();
    proxy = await startProxy(upstream.url, { upgradeResponseTimeout: '2s', featureGates: 'PortForwardWebsockets=false' });
  });
  afterEach(async () => {
    await proxy.close();
    await upstream.close();
  });

  it('passes the WebSocket request through as it came', async () => {
    const client = await TunnelTestClient.open(proxy.url, PATH);
    const conn = await upstream.next();
    expect(conn.head).toMatch(/^GET /);
    expect(headValues(conn.head, 'sec-websocket-protocol')).toEqual(['SPDY/3.1+portforward.k8s.io']);
    conn.socket.write('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n');
    await client.closed();
    expect(client.status).toBe(400);
    expect(await tunnelCount('400')).toBe(0);
  });
});

describe('StreamTunnelProxy with --max-connection-bytes-per-sec', () => {
  const MIB = 1024 * 1024;
  beforeEach(async () => {
    upstream = await startScriptedUpstream();
    proxy = await startProxy(upstream.url, { maxConnectionBytesPerSec: String(MIB), upstreamStreaming: 'spdy' });
  });
  afterEach(async () => {
    await proxy.close();
    await upstream.close();
  });

  it('limits each direction (2 MiB both ways at 1 MiB/s takes ≥ 1.8 s)', async () => {
    const { client, up } = await openTunnel();
    const toClient = randomBytes(2 * MIB);
    const toUp = randomBytes(2 * MIB);
    const started = performance.now();
    up.socket.write(toClient);
    const frames: Buffer[] = [];
    for (let off = 0; off < toUp.length; off += 32 * 1024) frames.push(clientFrame(Op.BINARY, toUp.subarray(off, off + 32 * 1024)));
    client.send(Buffer.concat(frames));
    await Promise.all([client.until(() => client.binaryLength >= toClient.length, '2 MiB'), up.until(() => up.received.length >= toUp.length)]);
    const seconds = (performance.now() - started) / 1000;
    expect(seconds).toBeGreaterThanOrEqual(1.8);
    expect(seconds).toBeLessThan(10);
    expect(client.binary.equals(toClient)).toBe(true);
    expect(up.received.equals(toUp)).toBe(true);
    client.socket.destroy();
  });
});
