/**
 * Issue 8 item 1, "upstream accepts TCP but never answers the upgrade": a TCP server that accepts and
 * never writes. Each path must answer a 504 Status within the configured `--upgrade-response-timeout`
 * (1 s here): passthrough and tunnel as the HTTP answer, translation (whose client WebSocket is
 * already open, as kube-apiserver does it) on channel 3 followed by close 1000.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { spdyUpgradeRequest, startProxy } from '../proxy/scripted-upstream.js';
import { TunnelTestClient } from '../translator/stream-tunnel-client.js';
import { connect } from 'node:net';
import { once } from 'node:events';
import { execPath, startSilentUpstream, wsExec } from './fault-fixture.js';

const TIMEOUT_MS = 1_000;
/** Timer and scheduling slack on top of the configured timeout. */
const SLACK_MS = 500;

let silent: Awaited<ReturnType<typeof startSilentUpstream>>;
let proxy: RunningServer;

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
  });
  afterAll(async () => {
    await proxy?.close();
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
    const s = await wsExec(proxy.url, execPath(['cat']));
    const { code, at } = await s.closed;
    const elapsed = at - started;
    console.log(`translation: close ${code} after ${elapsed.toFixed(0)} ms, channel 3 ${s.status}`);
    const status = JSON.parse(s.status) as Status;
    expect(status).toMatchObject({ status: 'Failure', code: 504, reason: 'Timeout' });
    expect(code).toBe(1000);
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + SLACK_MS);
  });

  it('tunnel (SPDY/3.1+portforward.k8s.io): HTTP 504 with a Timeout Status within the timeout', async () => {
    const started = performance.now();
    const client = await TunnelTestClient.open(proxy.url);
    await client.closed();
    const elapsed = performance.now() - started;
    const status = JSON.parse(client.body.toString('utf8')) as Status;
    console.log(`tunnel: HTTP ${client.status} after ${elapsed.toFixed(0)} ms: ${JSON.stringify(status)}`);
    expect(client.status).toBe(504);
    expect(status).toMatchObject({ status: 'Failure', code: 504, reason: 'Timeout' });
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + SLACK_MS);
  });
});
