/**
 * Front proxy acceptance (passthrough): kubectl → proxy → dev cluster. The whole SPDY matrix runs
 * through the proxy's UpgradeAwareProxy, and every streaming test checks that the proxy really
 * relayed an upgrade (its 101 counter rose). Translation and tunnelling are switched off here
 * (feature gates), so client-node's WebSocket exec (offering v5 first, then v4…) is passed through as
 * it was sent too, and the dev cluster answers it as a kube-apiserver of its version does: the 1.36
 * one hands v5 to its kubelet (which serves it), a 1.29 one lets its kubelet choose v4.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { Exec, KubeConfig, type V1Status } from '@kubernetes/client-node';
import type { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { moved, wayCounts, type WayCounts } from '../dev/cluster/streaming-ways.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary } from '../helpers/kubectl.js';
import { scrapeCounter } from '../helpers/metrics.js';
import { describeSpdyKubectlMatrix } from './spdy-kubectl-matrix.js';

const PASSTHROUGH_ONLY = 'TranslateStreamCloseWebsocketRequests=false,PortForwardWebsockets=false';
const UPGRADES = 'kube_stream_proxy_upgrade_requests_total';

/** Dev cluster plus the proxy in front of it, passthrough only. */
async function startProxied(podsDir?: string, apiserverVersion?: string): Promise<{ cluster: DevCluster; proxy: RunningServer; close(): Promise<void> }> {
  const cluster = await startDevCluster({ dataDir: podsDir, ...(apiserverVersion !== undefined ? { apiserverVersion } : {}) });
  const proxy = await startServer(
    await resolveConfig({ listen: '127.0.0.1:0', upstream: cluster.url, featureGates: PASSTHROUGH_ONLY }),
  );
  return {
    cluster,
    proxy,
    close: async () => {
      await proxy.close();
      await cluster.close();
    },
  };
}

describeSpdyKubectlMatrix('kubectl → proxy (passthrough) → dev cluster', async (podsDir) => {
  const { proxy, close } = await startProxied(podsDir);
  return {
    url: proxy.url,
    streamingUpgrades: () => scrapeCounter(proxy.url, UPGRADES, { code: '101' }),
    close,
  };
});

const skipReason = kubectlE2eSkipReason();

describe.skipIf(skipReason !== undefined)('proxy: plain API requests and client-node through the passthrough', () => {
  let work: string;
  let env: Awaited<ReturnType<typeof startProxied>>;
  /** The same in front of a dev cluster playing kube-apiserver and kubelet 1.29 (no v5 anywhere). */
  let older: Awaited<ReturnType<typeof startProxied>>;
  let kubeconfig: string;

  /** A client-node KubeConfig for `proxy` (it refuses plain http unless skipTLSVerify is set; the proxy listens on loopback http). */
  const clientNodeConfig = (proxy: RunningServer): KubeConfig => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'proxy', server: proxy.url, skipTLSVerify: true }],
      users: [{ name: 'proxy' }],
      contexts: [{ name: 'proxy', cluster: 'proxy', user: 'proxy' }],
      currentContext: 'proxy',
    });
    return kc;
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-e2e-proxy-'));
    env = await startProxied();
    older = await startProxied(undefined, '1.29');
    kubeconfig = join(work, 'kubeconfig');
    writeKubeconfig(kubeconfig, { server: env.proxy.url, name: 'proxy' });
  });
  afterAll(async () => {
    await env?.close();
    await older?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('kubectl get pods lists demo through the proxy', async () => {
    const r = await runKubectl(findKubectl('1.33'), ['get', 'pods', '-o', 'name'], { kubeconfig, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(0);
    expect(r.stdout.toString()).toBe('pod/demo\n');
  });

  it('kubectl get pods -w receives an event while the watch is open', async () => {
    const watch = startKubectl(findKubectl('1.33'), ['get', 'pods', '-w', '-o', 'name'], { kubeconfig });
    try {
      await watch.waitForOutput(/pod\/demo/, 30_000);
      // Create a pod at the upstream (not through the proxy): the event must stream through the open watch.
      const created = await fetch(`${env.cluster.url}/api/v1/namespaces/default/pods`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'watched' },
          spec: { containers: [{ name: 'main', image: 'local' }] },
        }),
      });
      expect(created.status).toBe(201);
      await watch.waitForOutput(/pod\/watched/, 30_000);
    } finally {
      await watch.stop('SIGINT', 10_000);
    }
  });

  it.each<{ cluster: string; target: () => Awaited<ReturnType<typeof startProxied>>; protocol: string; counted: WayCounts }>([
    // kube-apiserver 1.36 hands a v5 upgrade to a kubelet that declares ExtendWebSocketsToKubelet.
    { cluster: '1.36', target: () => env, protocol: 'v5.channel.k8s.io', counted: { 'apiserver/exec/proxied_to_kubelet': 1, 'kubelet/exec': 1 } },
    // A 1.29 apiserver proxies it to its kubelet, whose runtime picks the first it speaks: v4.
    { cluster: '1.29', target: () => older, protocol: 'v4.channel.k8s.io', counted: {} },
  ])('client-node Exec over WebSocket is passed through unchanged to a $cluster cluster ($protocol): stdout, stderr, exit status', async ({ target, protocol, counted }) => {
    const { proxy, cluster } = target();
    const before = await scrapeCounter(proxy.url, UPGRADES, { handler: 'exec', code: '101' });
    const ways = await wayCounts(cluster);
    const out = collect();
    const err = collect();
    const stdin = new PassThrough();
    let status: V1Status | undefined;
    const ws = (await new Exec(clientNodeConfig(proxy)).exec(
      'default',
      'demo',
      'demo',
      ['sh', '-c', 'head -c 5 ; echo; echo err >&2; exit 3'],
      out.w,
      err.w,
      stdin,
      false,
      (s) => (status = s),
    )) as unknown as WebSocket;
    stdin.write('hello');
    const closeCode = await new Promise<number>((resolve) => ws.once('close', (code: number) => resolve(code)));
    expect(ws.protocol).toBe(protocol);
    expect(out.text()).toBe('hello\n');
    expect(err.text()).toBe('err\n');
    expect(status?.status).toBe('Failure');
    expect(status?.reason).toBe('NonZeroExitCode');
    expect(status?.details?.causes?.find((c) => c.reason === 'ExitCode')?.message).toBe('3');
    expect(closeCode).toBe(1000);
    expect(await scrapeCounter(proxy.url, UPGRADES, { handler: 'exec', code: '101' })).toBe(before + 1);
    expect(await scrapeCounter(proxy.url, 'apiserver_stream_translator_requests_total')).toBe(0);
    // Who served the WebSocket in the dev cluster (only v5 and the tunnel are counted there).
    expect(moved(ways, await wayCounts(cluster))).toEqual(counted);
  });
});

/** A Writable that keeps what it gets. */
function collect(): { w: Writable; text(): string } {
  const chunks: Buffer[] = [];
  const w = new Writable({
    write(c: Buffer, _e, cb) {
      chunks.push(Buffer.from(c));
      cb();
    },
  });
  return { w, text: () => Buffer.concat(chunks).toString() };
}
