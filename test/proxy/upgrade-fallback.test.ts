/**
 * `UpgradeAwareProxy.tryUpgrade` with `fallbackFrom` (issue 32): an upstream answer before its 101
 * that the caller will fall back from is not relayed — nothing is written to the client, the upstream
 * connection is dropped, the client's early bytes stay unread in its socket — and the outcome says
 * `refused-before-upgrade` with the code. A 401 is relayed whatever the caller asks; a 101 is spliced.
 * Driven directly on a Node upgrade listener against a scripted upstream (real loopback sockets).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { once } from 'node:events';
import { UpgradeAwareProxy, type UpgradeOutcome } from '../../proxy/upgrade-aware.js';
import { upstreamFromFiles } from '../../src/routing/upstream.js';
import { RawClient, startScriptedUpstream, type ScriptedUpstream, type UpstreamConnection } from './scripted-upstream.js';
import { waitFor } from '../helpers/wait.js';

const V5_UPGRADE =
  'GET /api/v1/namespaces/default/pods/demo/exec?command=sh&stdout=true HTTP/1.1\r\nHost: proxy\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
  'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n';
const EARLY = Buffer.from([0x82, 0x81, 1, 2, 3, 4, 0x01]);

let upstream: ScriptedUpstream;
let server: Server;
let outcomes: Array<{ outcome: UpgradeOutcome; socket: Duplex; clientWrites: number }>;

beforeEach(async () => {
  upstream = await startScriptedUpstream();
  const proxy = new UpgradeAwareProxy({ upstream: upstreamFromFiles({ url: upstream.url }), maxBytesPerSec: 0, responseTimeoutMs: 2_000 });
  outcomes = [];
  server = createServer();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    let clientWrites = 0;
    const write = socket.write.bind(socket);
    socket.write = ((...args: Parameters<Duplex['write']>) => {
      clientWrites++;
      return write(...args);
    }) as Duplex['write'];
    void proxy
      .tryUpgrade(req, socket, head, { remoteAddress: '127.0.0.1', proto: 'http', host: 'proxy' }, undefined, { fallbackFrom: (r) => r.statusCode !== 418 && r.status?.reason !== 'NotFound' })
      .then((outcome) => outcomes.push({ outcome, socket, clientWrites }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
});

afterEach(async () => {
  server.closeAllConnections();
  server.close();
  await upstream.close();
});

async function attempt(answer: string, ...more: string[]): Promise<{ client: RawClient; conn: UpstreamConnection }> {
  const client = await RawClient.connect((server.address() as AddressInfo).port);
  client.socket.write(Buffer.concat([Buffer.from(V5_UPGRADE, 'latin1'), EARLY]));
  const conn = await upstream.next();
  conn.socket.write(answer);
  // Later parts in later turns (separate segments on loopback, usually): the body is read in pieces.
  for (const part of more) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    conn.socket.write(part);
  }
  await waitFor('the outcome', async () => (outcomes.length > 0 ? true : undefined), 5_000, 10);
  return { client, conn };
}

describe('UpgradeAwareProxy: fallback before the 101', () => {
  it.each([400, 403, 404, 500, 503])('an upstream %i is not relayed: nothing reaches the client, the upstream connection is dropped, the early bytes stay held', async (code) => {
    const body = `{"kind":"Status","code":${code}}`;
    const { client, conn } = await attempt(`HTTP/1.1 ${code} X\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    const [{ outcome, socket, clientWrites }] = outcomes as [(typeof outcomes)[0]];
    expect(outcome.kind).toBe('refused-before-upgrade');
    expect(outcome.statusCode).toBe(code);
    if (outcome.kind === 'refused-before-upgrade') expect(outcome.response.head.statusCode).toBe(code);
    expect(clientWrites).toBe(0);
    // The upstream saw the head alone and then its connection closed.
    expect(conn.rest.length).toBe(0);
    const closed = conn.socket.destroyed ? Promise.resolve() : once(conn.socket, 'close');
    conn.socket.resume();
    await closed;
    // The client's connection is open, paused, its early bytes unread: the next attempt gets them.
    expect(socket.destroyed).toBe(false);
    expect(socket.isPaused()).toBe(true);
    expect(client.received.length).toBe(0);
    socket.destroy();
  });

  it.each([
    ['a 401, even though the caller would fall back', 'HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}', 401],
    ['an answer the caller does not fall back from', "HTTP/1.1 418 I'm a teapot\r\nContent-Length: 0\r\n\r\n", 418],
  ])('%s is relayed byte for byte', async (_name, answer, code) => {
    const { client } = await attempt(answer);
    expect(outcomes[0]!.outcome).toMatchObject({ kind: 'forwarded', statusCode: code });
    await client.closed();
    expect(client.received.toString('latin1')).toBe(answer);
  });

  it('the refusal is handed back with its Status, its body read whole even when it comes in pieces', async () => {
    const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason: 'Forbidden', code: 403, message: 'm' });
    await attempt(`HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`, body.slice(0, 10), body.slice(10));
    const { outcome } = outcomes[0]!;
    expect(outcome.kind).toBe('refused-before-upgrade');
    if (outcome.kind === 'refused-before-upgrade') expect(outcome.refusal).toEqual({ statusCode: 403, status: JSON.parse(body) });
  });

  it.each([
    ['an empty 403 (OpenShift, the kubelet\'s WebSocket handshake)', 'HTTP/1.1 403 Forbidden\r\n\r\n'],
    ['a text body', 'HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nupgrade failed'],
    ['JSON that is no Status', 'HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'],
    ['a chunked Status (not read)', 'HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n'],
  ])('%s: no Status', async (_name, answer) => {
    await attempt(answer);
    const { outcome } = outcomes[0]!;
    expect(outcome.kind).toBe('refused-before-upgrade');
    if (outcome.kind === 'refused-before-upgrade') expect(outcome.refusal.status).toBeUndefined();
  });

  it('a Status the caller does not fall back from is relayed byte for byte, its body read first (in pieces)', async () => {
    const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason: 'NotFound', code: 404, message: 'pods "demo" not found' });
    const head = `HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const { client } = await attempt(head, body.slice(0, 7), body.slice(7));
    expect(outcomes[0]!.outcome).toMatchObject({ kind: 'forwarded', statusCode: 404 });
    await client.closed();
    expect(client.received.toString('latin1')).toBe(head + body);
  });

  it('a 101 is spliced, the early bytes after it', async () => {
    const answer = 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n';
    const { client, conn } = await attempt(answer);
    expect(outcomes[0]!.outcome.kind).toBe('upgraded');
    await client.atLeast(answer.length);
    expect(client.received.toString('latin1')).toBe(answer);
    const got: Buffer[] = [];
    conn.socket.on('data', (d: Buffer) => got.push(d));
    conn.socket.resume();
    await waitFor('the early bytes upstream', async () => (Buffer.concat(got).length >= EARLY.length ? true : undefined), 5_000, 10);
    expect(Buffer.concat(got)).toEqual(EARLY);
    client.socket.destroy();
  });
});
