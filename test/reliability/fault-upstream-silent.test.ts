/**
 * Issue 8 item 1, "upstream accepts TCP but never answers the upgrade": a TCP server that accepts and
 * never writes. Each path must answer a 504 Status within the configured `--upgrade-response-timeout`
 * (1 s here): passthrough and tunnel as the HTTP answer, translation (whose client WebSocket is
 * already open, as kube-apiserver does it) on channel 3 followed by close 1000.
 *
 * The translation row is about the proxy's translator: its proxy runs with `--upstream-streaming
 * spdy` (issue 32), which dials the upstream in SPDY at once. With the default (`auto`) v5 is first
 * passed through, and a timeout is no refusal before a 101 (no fallback): that row answers the
 * handshake with the HTTP 504, after one upstream connection.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { spdyUpgradeRequest, startProxy } from '../proxy/scripted-upstream.js';
import { TunnelTestClient } from '../translator/stream-tunnel-client.js';
import { connect } from 'node:net';
import { once } from 'node:events';
import WebSocket from 'ws';
import { execPath, startSilentUpstream, wsExec } from './fault-fixture.js';

const TIMEOUT_MS = 1_000;
/** Timer and scheduling slack on top of the configured timeout. */
const SLACK_MS = 500;

let silent: Awaited<ReturnType<typeof startSilentUpstream>>;
let proxy: RunningServer;
/** `--upstream-streaming spdy`: v5 translated here, the upstream dialled in SPDY. */
let translating: RunningServer;

/** A v5 WebSocket handshake that is not answered with a 101: its status and body. */
function wsHandshakeAnswer(baseUrl: string, path: string): Promise<{ status: number; body: string }> {
  const url = new URL(path, baseUrl);
  url.protocol = 'ws:';
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false });
    ws.on('error', () => undefined);
    ws.once('open', () => {
      ws.terminate();
      reject(new Error('the handshake was answered with a 101'));
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
  });
}

interface Status {
  status: string;
  code: number;
  reason?: string;
  message?: string;
}

describe('fault: upstream accepts TCP but never answers the upgrade', () => {
  beforeAll(async () => {
    silent = await startSilentUpstream();
    proxy = await startProxy(silent.url, { upgradeResponseTimeout: `${TIMEOUT_MS}ms` });
    translating = await startProxy(silent.url, { upgradeResponseTimeout: `${TIMEOUT_MS}ms`, upstreamStreaming: 'spdy' });
  });
  afterAll(async () => {
    await proxy?.close();
    await translating?.close();
    await silent?.close();
  });

  it('passthrough (SPDY): HTTP 504 with a Timeout Status within the timeout', async () => {
    const u = new URL(proxy.url);
    const socket = connect({ host: u.hostname, port: Number(u.port) });
    await once(socket, 'connect');
    const started = performance.now();
    socket.write(spdyUpgradeRequest(execPath(['cat'])));
    let raw = '';
    socket.on('data', (c: Buffer) => (raw += c.toString('latin1')));
    await once(socket, 'close');
    const elapsed = performance.now() - started;
    const status = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as Status;
    console.log(`passthrough: ${raw.split('\r\n')[0]} after ${elapsed.toFixed(0)} ms: ${JSON.stringify(status)}`);
    expect(raw).toMatch(/^HTTP\/1\.1 504 /);
    expect(status).toMatchObject({ status: 'Failure', code: 504, reason: 'Timeout' });
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + SLACK_MS);
  });

  it('translation (WebSocket v5): a 504 Timeout Status on channel 3, then close 1000, within the timeout', async () => {
    const started = performance.now();
    const s = await wsExec(translating.url, execPath(['cat']));
    const { code, at } = await s.closed;
    const elapsed = at - started;
    console.log(`translation: close ${code} after ${elapsed.toFixed(0)} ms, channel 3 ${s.status}`);
    const status = JSON.parse(s.status) as Status;
    expect(status).toMatchObject({ status: 'Failure', code: 504, reason: 'Timeout' });
    expect(code).toBe(1000);
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + SLACK_MS);
  });

  it('passthrough (WebSocket v5, the default): HTTP 504 with a Timeout Status within the timeout, no second attempt', async () => {
    const acceptedBefore = silent.accepted;
    const started = performance.now();
    const answer = await wsHandshakeAnswer(proxy.url, execPath(['cat']));
    const elapsed = performance.now() - started;
    console.log(`v5 passthrough: HTTP ${answer.status} after ${elapsed.toFixed(0)} ms: ${answer.body}`);
    expect(answer.status).toBe(504);
    expect(JSON.parse(answer.body) as Status).toMatchObject({ status: 'Failure', code: 504, reason: 'Timeout' });
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    expect(silent.accepted - acceptedBefore).toBe(1);
  });

  it.each([
    ['tunnel (SPDY/3.1+portforward.k8s.io)', () => translating],
    ['tunnel passed through (the default)', () => proxy],
  ])('%s: HTTP 504 with a Timeout Status within the timeout, one upstream connection', async (name, through) => {
    const acceptedBefore = silent.accepted;
    const started = performance.now();
    const client = await TunnelTestClient.open(through().url);
    await client.closed();
    const elapsed = performance.now() - started;
    const status = JSON.parse(client.body.toString('utf8')) as Status;
    console.log(`${name}: HTTP ${client.status} after ${elapsed.toFixed(0)} ms: ${JSON.stringify(status)}`);
    expect(client.status).toBe(504);
    expect(status).toMatchObject({ status: 'Failure', code: 504, reason: 'Timeout' });
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    expect(silent.accepted - acceptedBefore).toBe(1);
  });
});
