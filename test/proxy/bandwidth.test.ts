import { afterEach, beforeEach, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { RawClient, spdyUpgradeRequest, startProxy, startScriptedUpstream, type ScriptedUpstream } from './scripted-upstream.js';

const MIB = 1024 * 1024;
const SWITCHING = 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n';

let upstream: ScriptedUpstream;
let proxy: RunningServer;

beforeEach(async () => {
  upstream = await startScriptedUpstream();
  proxy = await startProxy(upstream.url, { maxConnectionBytesPerSec: String(MIB) });
});

afterEach(async () => {
  await proxy.close();
  await upstream.close();
});

it('limits an upgraded connection to --max-connection-bytes-per-sec (10 MiB at 1 MiB/s takes ≥ 9 s)', { timeout: 60_000 }, async () => {
  const client = await RawClient.connect(proxy.url);
  client.socket.write(spdyUpgradeRequest());
  const conn = await upstream.next();
  conn.socket.write(SWITCHING);
  await client.atLeast(SWITCHING.length);
  const payload = Buffer.alloc(10 * MIB, 0x5a);
  const started = performance.now();
  conn.socket.write(payload);
  await client.atLeast(SWITCHING.length + payload.length);
  const seconds = (performance.now() - started) / 1000;
  expect(seconds).toBeGreaterThanOrEqual(9);
  expect(seconds).toBeLessThan(30);
  expect(client.received.length).toBe(SWITCHING.length + payload.length);
  client.socket.destroy();
});
