/**
 * Aggregated APIs of a cluster behind an agent: `/clusters/NAME/apis/<group>/…` belongs to THAT
 * cluster, whose own apiserver aggregates its extension API servers. The proxy's router places the
 * request on the cluster's tunnel before its own aggregator is asked, so a plain request and an
 * upgrade (KubeVirt's console is a WebSocket under `/apis/subresources.kubevirt.io/…`) reach the
 * cluster's apiserver and its answer comes back as it wrote it — the same bytes as asked directly.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { get, startTunnelFixture, type TunnelFixture } from './tunnel-fixture.js';

const METRICS_PATH = '/apis/metrics.k8s.io/v1beta1/namespaces/default/pods';
const CONSOLE_PATH = '/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm1/console';

/** Send a WebSocket upgrade request and return the raw answer (the peer closes or 2 s pass). */
function upgradeAnswer(base: string, path: string): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let got = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(got);
    }, 2_000);
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      // A complete non-101 answer with a Content-Length body is all we compare.
      const end = got.indexOf('\r\n\r\n');
      const len = /\r\ncontent-length: *(\d+)/i.exec(got);
      if (end >= 0 && len && got.length >= end + 4 + Number(len[1])) {
        clearTimeout(timer);
        socket.destroy();
        resolve(got);
      }
    });
    socket.on('error', reject);
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: plain.kubevirt.io\r\n\r\n`,
    );
  });
}

/** The parts of an HTTP answer that must be the same whichever way it came: status line and body. */
function statusAndBody(raw: string): { status: string; body: string } {
  const end = raw.indexOf('\r\n\r\n');
  return { status: raw.slice(0, raw.indexOf('\r\n')), body: raw.slice(end + 4) };
}

describe('aggregated APIs of a cluster behind an agent', () => {
  let fx: TunnelFixture;
  beforeAll(async () => {
    fx = await startTunnelFixture({ one: ['alpha'] });
    await fx.startAgent('one').waitForOutput(/tunnel established/, 20_000);
  }, 60_000);
  afterAll(async () => {
    await fx?.close();
  });

  it('a request for an aggregated group reaches the cluster\'s apiserver and its answer comes back unchanged', async () => {
    const direct = await get(fx.clusters.one!.url, METRICS_PATH);
    const before = fx.clusters.one!.requests.filter((r) => r.url === METRICS_PATH).length;
    const via = await get(fx.proxy.url, `/clusters/one${METRICS_PATH}`);
    expect(via).toEqual(direct);
    expect(fx.clusters.one!.requests.filter((r) => r.url === METRICS_PATH).length).toBe(before + 1);
  });

  it('an upgrade under an aggregated group (a KubeVirt console) reaches the cluster, whose refusal comes back as it wrote it', async () => {
    const direct = statusAndBody(await upgradeAnswer(fx.clusters.one!.url, CONSOLE_PATH));
    expect(direct.status).toMatch(/^HTTP\/1\.1 [45]\d\d /);
    const before = fx.clusters.one!.requests.filter((r) => r.url === CONSOLE_PATH).length;
    const via = statusAndBody(await upgradeAnswer(fx.proxy.url, `/clusters/one${CONSOLE_PATH}`));
    expect(via).toEqual(direct);
    expect(fx.clusters.one!.requests.filter((r) => r.url === CONSOLE_PATH).length).toBe(before + 1);
  });
});
