/**
 * Issue 32, item 5: the upstream behaviours the proxy's apiserver-mode tests need, played by the dev
 * cluster's API listener:
 * - `refuseWebSocketStreaming` (OpenShift-like): v5 and the tunnel get 403 with an empty body (the
 *   kubelet's x/net/websocket handshake, relayed) before any 101; WebSocket v4 and SPDY still work, so
 *   kubectl 1.33 falls back to SPDY and succeeds;
 * - `refuseSpdyStreaming` (a WebSocket-only gateway): SPDY upgrades get 403 and a line of text; kubectl
 *   1.27 fails with that message, kubectl 1.33 works over WebSockets;
 * - `apiserverVersion: '1.29'`: no v5 at the API (the upgrade reaches a 1.29 kubelet, which refuses it
 *   with 403 and an empty body); `'1.30'`: v5 translated here, the tunnel not yet.
 * Raw requests show the answers byte for byte; kubectl shows what a user sees; the counters show
 * which way each session went.
 */
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SPDY_STREAMING_REFUSED } from '../../../dev/cluster/apiserver-streaming.js';
import type { DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../../helpers/http-fixture.js';
import { kubectlE2eSkipReason } from '../../helpers/kubectl.js';
import { TunnelTestClient } from '../../translator/stream-tunnel-client.js';
import { spdyUpgradeAnswer } from './stream-clients.js';
import { startKubectlCluster, withPortForward, type KubectlCluster } from './streaming-ways.js';

const EXEC = '/api/v1/namespaces/default/pods/demo/exec?command=cat&stdin=true&stdout=true';

/** A WebSocket exec offering `protocols`: open (then closed by us) or refused (status, body). */
function wsExec(cluster: DevCluster, protocols: string[]): Promise<{ protocol: string } | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(cluster.url.replace('http', 'ws') + EXEC, protocols);
    ws.once('open', () => {
      resolve({ protocol: ws.protocol });
      ws.close();
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.once('error', reject);
  });
}

/** The tunnel upgrade for port-forward: its status and body. */
async function tunnelAnswer(cluster: DevCluster): Promise<{ status: number; body: string }> {
  const client = await TunnelTestClient.open(cluster.url);
  await client.closed();
  return { status: client.status, body: client.body.toString() };
}

/** What kubectl sent for pod demo's `subresource` since request `from`: "upgrade protocol" per request. */
function upgradesSince(c: KubectlCluster, from: number, subresource: string): string[] {
  return c.cluster.requests
    .slice(from)
    .filter((r) => r.upgrade && r.url.startsWith(`/api/v1/namespaces/default/pods/demo/${subresource}`))
    .map((r) => `${r.headers.upgrade} ${r.headers['sec-websocket-protocol']?.split(',')[0] ?? ''}`.trim());
}

const skipKubectl = kubectlE2eSkipReason() !== undefined;

/** A dev cluster with `options` for the enclosing describe block (started before it, closed after). */
function clusterWith(options: Parameters<typeof startKubectlCluster>[0]): () => KubectlCluster {
  let c: KubectlCluster | undefined;
  beforeAll(async () => {
    c = await startKubectlCluster(options);
  });
  afterAll(async () => {
    await c?.close();
  });
  return () => c!;
}
let bytes: BytesServer;
beforeAll(async () => {
  bytes = await startBytesServer();
});
afterAll(async () => {
  await bytes?.close();
});

describe('refuseWebSocketStreaming (OpenShift-like)', () => {
  const cluster = clusterWith({ refuseWebSocketStreaming: true });

  it('answers v5 and the tunnel 403 with an empty body (no Status) before any 101; v4 is still served', async () => {
    const c = cluster();
    const refused = await wsExec(c.cluster, ['v5.channel.k8s.io', 'v4.channel.k8s.io']);
    expect(refused).toEqual({ status: 403, body: '' });
    const tunnel = await tunnelAnswer(c.cluster);
    expect({ status: tunnel.status, body: tunnel.body }).toEqual({ status: 403, body: '' });
    expect(await wsExec(c.cluster, ['v4.channel.k8s.io'])).toEqual({ protocol: 'v4.channel.k8s.io' });
  });

  it.skipIf(skipKubectl)('kubectl 1.33: exec -i and port-forward fall back to SPDY and work; no WebSocket counter moves', async () => {
    const c = cluster();
    const from = c.cluster.requests.length;
    const moved = await c.during(async () => {
      const cat = await c.kubectl('1.33', ['exec', '-i', 'demo', '--', 'cat'], Buffer.from('via spdy\n'));
      expect(cat.code, cat.summary).toBe(0);
      expect(cat.out).toBe('via spdy\n');
      const d = await withPortForward(c, '1.33', bytes.port, (local) => downloadDigest(`http://127.0.0.1:${local}/bytes/300000?seed=3`));
      expect(d.sha256).toBe(bytes.expected(300_000, 3).sha256);
    });
    expect(moved).toEqual({});
    expect(upgradesSince(c, from, 'exec')).toEqual(['websocket v5.channel.k8s.io', 'SPDY/3.1']);
    expect(upgradesSince(c, from, 'portforward')).toEqual(['websocket SPDY/3.1+portforward.k8s.io', 'SPDY/3.1']);
  });
});

describe('refuseSpdyStreaming (a WebSocket-only gateway)', () => {
  const cluster = clusterWith({ refuseSpdyStreaming: true });

  it('answers a SPDY/3.1 upgrade 403 with a line of text (no Status)', async () => {
    const c = cluster();
    const r = await spdyUpgradeAnswer(c.cluster.url + EXEC);
    expect({ status: r.status, contentType: r.contentType, body: r.body }).toEqual({
      status: 403,
      contentType: 'text/plain; charset=utf-8',
      body: `${SPDY_STREAMING_REFUSED}\n`,
    });
  });

  it.skipIf(skipKubectl)('kubectl 1.27 (SPDY) fails with the message; kubectl 1.33 works over WebSockets', async () => {
    const c = cluster();
    const old = await c.kubectl('1.27', ['exec', 'demo', '--', 'true']);
    expect(old.code).toBe(1);
    expect(old.stderr).toContain(SPDY_STREAMING_REFUSED);
    const moved = await c.during(async () => {
      const cat = await c.kubectl('1.33', ['exec', '-i', 'demo', '--', 'cat'], Buffer.from('via websocket\n'));
      expect(cat.code, cat.summary).toBe(0);
      expect(cat.out).toBe('via websocket\n');
      const d = await withPortForward(c, '1.33', bytes.port, (local) => downloadDigest(`http://127.0.0.1:${local}/bytes/300000?seed=4`));
      expect(d.sha256).toBe(bytes.expected(300_000, 4).sha256);
    });
    expect(moved).toEqual({ 'apiserver/exec/proxied_to_kubelet': 1, 'kubelet/exec': 1, 'apiserver/portforward/proxied_to_kubelet': 1, 'kubelet/portforward': 1 });
  });
});

describe("apiserverVersion '1.29': no v5 at the API", () => {
  const cluster = clusterWith({ apiserverVersion: '1.29' });

  it('plays 1.29 (kubelet too) and refuses v5 as its 1.29 kubelet does: 403, empty body; the tunnel: 400', async () => {
    const c = cluster();
    expect(await (await fetch(`${c.cluster.url}/version`)).json()).toMatchObject({ major: '1', minor: '29', gitVersion: 'v1.29.0' });
    const node = (await (await fetch(`${c.cluster.url}/api/v1/nodes/dev-node`)).json()) as { status: Record<string, unknown> & { nodeInfo: { kubeletVersion: string } } };
    expect(node.status.nodeInfo.kubeletVersion).toBe('v1.29.0');
    expect(node.status).not.toHaveProperty('declaredFeatures');
    expect(await wsExec(c.cluster, ['v5.channel.k8s.io'])).toEqual({ status: 403, body: '' });
    const tunnel = await tunnelAnswer(c.cluster);
    expect(tunnel.status).toBe(400);
    expect(JSON.parse(tunnel.body)).toMatchObject({ code: 400, message: 'query parameter "port" is required' });
  });

  it.skipIf(skipKubectl)('kubectl 1.33 falls back to SPDY and works; nothing is counted', async () => {
    const c = cluster();
    const from = c.cluster.requests.length;
    const moved = await c.during(async () => {
      const cat = await c.kubectl('1.33', ['exec', '-i', 'demo', '--', 'cat'], Buffer.from('1.29\n'));
      expect(cat.code, cat.summary).toBe(0);
      expect(cat.out).toBe('1.29\n');
    });
    expect(moved).toEqual({});
    expect(upgradesSince(c, from, 'exec')).toEqual(['websocket v5.channel.k8s.io', 'SPDY/3.1']);
  });
});

describe.skipIf(skipKubectl)("apiserverVersion '1.30': v5 translated at the apiserver, the tunnel not yet", () => {
  const cluster = clusterWith({ apiserverVersion: '1.30' });

  it('kubectl 1.33: exec translated (translator code 200, no 1.36 metric); port-forward falls back to SPDY', async () => {
    const c = cluster();
    const from = c.cluster.requests.length;
    const moved = await c.during(async () => {
      const cat = await c.kubectl('1.33', ['exec', '-i', 'demo', '--', 'cat'], Buffer.from('1.30\n'));
      expect(cat.code, cat.summary).toBe(0);
      expect(cat.out).toBe('1.30\n');
      const d = await withPortForward(c, '1.33', bytes.port, (local) => downloadDigest(`http://127.0.0.1:${local}/bytes/300000?seed=5`));
      expect(d.sha256).toBe(bytes.expected(300_000, 5).sha256);
    });
    expect(moved).toEqual({ 'translator/200': 1 });
    expect(upgradesSince(c, from, 'exec')).toEqual(['websocket v5.channel.k8s.io']);
    expect(upgradesSince(c, from, 'portforward')).toEqual(['websocket SPDY/3.1+portforward.k8s.io', 'SPDY/3.1']);
  });
});
