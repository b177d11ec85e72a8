/**
 * Acceptance for the port-forward tunnel: real kubectl (1.31–1.33 by default, 1.30 with
 * KUBECTL_PORT_FORWARD_WEBSOCKETS=true) through the in-process proxy to the in-process dev cluster
 * (kube-apiserver and kubelet 1.36 look-alikes), forwarding to HTTP fixtures on this host, both ways a
 * tunnel goes through the proxy:
 *
 * - the proxy's own tunnel (`--upstream-streaming spdy`: the tunnel unwrapped here to SPDY, as before
 *   issue 32): the proxy's `apiserver_stream_tunnel_requests_total{code="101"}` rises by exactly one
 *   per command, and the dev cluster sees SPDY only (none of its WebSocket counters move);
 * - the default (`auto`): the tunnel passed through byte for byte to the dev cluster, whose 1.36 kubelet
 *   unwraps it toward its runtime: the proxy counts `proxied_to_upstream` and unwraps nothing, the dev
 *   cluster counts `proxied_to_kubelet` and its kubelet one WebSocket port-forward.
 *
 * kubectl ≥ 1.31 falls back to SPDY silently, so every claim about the path is a counter.
 * Also: the gate off (the proxy never tunnels: passed through as sent; where the upstream refuses
 * the tunnel kubectl falls back to SPDY, counter still), and @kubernetes/client-node's legacy
 * WebSocket v4 port-forward through the passthrough.
 *
 * Only SKIP_KUBECTL_E2E=1 skips the kubectl part (see kubectlE2eSkipReason).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { KubeConfig, PortForward } from '@kubernetes/client-node';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { moved, wayCounts, type WayCounts } from '../dev/cluster/streaming-ways.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { HashingSink } from '../helpers/hash.js';
import { findKubectl, kubectlE2eSkipReason, startKubectl, type KubectlVersion, type RunningKubectl } from '../helpers/kubectl.js';
import { counterValue } from '../helpers/metrics.js';
import { waitFor } from '../helpers/wait.js';

interface Client {
  name: string;
  version: KubectlVersion;
  env: Record<string, string>;
}

const CLIENTS: Client[] = [
  { name: 'kubectl 1.30 with KUBECTL_PORT_FORWARD_WEBSOCKETS=true', version: '1.30', env: { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'true' } },
  { name: 'kubectl 1.31', version: '1.31', env: {} },
  { name: 'kubectl 1.32', version: '1.32', env: {} },
  { name: 'kubectl 1.33', version: '1.33', env: {} },
];

const MB = 1_000_000;
const BIG_BYTES = 50 * MB;
const CONCURRENT = 20;
const CONCURRENT_BYTES = 1 * MB;
const SECOND_PORT_BYTES = 2 * MB;
const FALLBACK_BYTES = 5 * MB;
const CLIENT_NODE_BYTES = 10 * MB;

const TUNNEL = 'apiserver_stream_tunnel_requests_total';
const WS_STREAMING = 'apiserver_websocket_streaming_requests_total';
const FALLBACKS = 'kube_stream_proxy_upstream_streaming_fallbacks_total';

const skipReason = kubectlE2eSkipReason();

let work: string;
let cluster: DevCluster;
/** A dev cluster playing kube-apiserver and kubelet 1.30: neither serves the tunnel. */
let olderCluster: DevCluster;
let fixture: BytesServer;
let fixture2: BytesServer;

/** One way a tunnel goes through a proxy in front of `cluster`, and how the counters prove it. */
interface Way {
  name: string;
  flags: ServeFlags;
  proxy?: RunningServer;
  kubeconfig?: string;
  /** What moved on the proxy's `/metrics` (tunnel code 101, the WebSocket way) and in the dev cluster, for one kubectl command. */
  proves: { tunnel101: number; proxyType: 'tunneled_at_apiserver' | 'proxied_to_upstream'; cluster: WayCounts };
}

const WAYS: Way[] = [
  {
    // The proxy's own tunnel is what this file was written for: `spdy` keeps it on that path (the
    // default would pass the tunnel through to the dev cluster, which serves it itself).
    name: "the proxy's tunnel (--upstream-streaming spdy)",
    flags: { upstreamStreaming: 'spdy' },
    proves: { tunnel101: 1, proxyType: 'tunneled_at_apiserver', cluster: {} },
  },
  {
    name: 'passed through to the 1.36 kubelet (default)',
    flags: {},
    proves: { tunnel101: 0, proxyType: 'proxied_to_upstream', cluster: { 'apiserver/portforward/proxied_to_kubelet': 1, 'kubelet/portforward': 1 } },
  },
];

/** The proxy's `/metrics` text. */
async function metricsOf(server: RunningServer): Promise<string> {
  return (await fetch(`${server.url}/metrics`)).text();
}

/** The proxy's and the dev cluster's counters now. */
async function countersOf(server: RunningServer, devCluster: DevCluster = cluster): Promise<{ proxy: string; cluster: WayCounts }> {
  const [proxy, counts] = await Promise.all([metricsOf(server), wayCounts(devCluster)]);
  return { proxy, cluster: counts };
}

/** Expect exactly one port-forward command's worth of `way.proves` between `before` and now. */
async function expectOneTunnel(way: Way, before: { proxy: string; cluster: WayCounts }): Promise<void> {
  const after = await countersOf(way.proxy!);
  const delta = (name: string, labels: Record<string, string>): number => counterValue(after.proxy, name, labels) - counterValue(before.proxy, name, labels);
  expect({
    tunnel101: delta(TUNNEL, { code: '101' }),
    proxyType: { tunneled_at_apiserver: delta(WS_STREAMING, { subresource: 'portforward', proxy_type: 'tunneled_at_apiserver' }), proxied_to_upstream: delta(WS_STREAMING, { subresource: 'portforward', proxy_type: 'proxied_to_upstream' }) },
    cluster: moved(before.cluster, after.cluster),
  }).toEqual({
    tunnel101: way.proves.tunnel101,
    proxyType: { tunneled_at_apiserver: way.proves.proxyType === 'tunneled_at_apiserver' ? 1 : 0, proxied_to_upstream: way.proves.proxyType === 'proxied_to_upstream' ? 1 : 0 },
    cluster: way.proves.cluster,
  });
}

/** A loopback port nothing listens on (bound, then released). */
async function deadPort(): Promise<number> {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** The local ports kubectl printed, one per `-> remote`. */
async function forwardedPorts(pf: RunningKubectl, remotes: number[]): Promise<number[]> {
  const ports: number[] = [];
  for (const remote of remotes) {
    const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${remote}\\b`), 30_000);
    ports.push(Number(m[1]));
  }
  return ports;
}

/** A proxy in front of `upstream` with `flags`, and a kubeconfig for it. */
async function startProxy(upstream: string, flags: ServeFlags, name: string): Promise<{ proxy: RunningServer; kubeconfig: string }> {
  const proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream, ...flags }));
  const kubeconfig = join(work, `kubeconfig-${name}`);
  writeKubeconfig(kubeconfig, { server: proxy.url, name });
  return { proxy, kubeconfig };
}

const gateOff: Partial<Record<'modern' | 'older', { proxy: RunningServer; kubeconfig: string }>> = {};

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'ksp-e2e-tunnel-'));
  [fixture, fixture2] = await Promise.all([startBytesServer(), startBytesServer()]);
  cluster = await startDevCluster({ dataDir: join(work, 'pods') });
  olderCluster = await startDevCluster({ dataDir: join(work, 'pods-older'), apiserverVersion: '1.30' });
  for (const [i, way] of WAYS.entries()) Object.assign(way, await startProxy(cluster.url, way.flags, `way-${i}`));
  gateOff.modern = await startProxy(cluster.url, { featureGates: 'PortForwardWebsockets=false' }, 'gate-off');
  gateOff.older = await startProxy(olderCluster.url, { featureGates: 'PortForwardWebsockets=false' }, 'gate-off-older');
});

afterAll(async () => {
  for (const way of WAYS) await way.proxy?.close();
  for (const p of Object.values(gateOff)) await p?.proxy.close();
  await cluster?.close();
  await olderCluster?.close();
  await fixture?.close();
  await fixture2?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe.skipIf(skipReason !== undefined)('kubectl port-forward through the tunnel', () => {
  describe.each(WAYS)('$name', (way) => {
    describe.each(CLIENTS)('$name', (client) => {
      let bin: string;
      beforeAll(() => {
        bin = findKubectl(client.version);
      });

      it(`${BIG_BYTES / MB} MB, ${CONCURRENT} concurrent connections and a second port in one command`, async () => {
        const before = await countersOf(way.proxy!);
        const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${fixture.port}`, `:${fixture2.port}`], { kubeconfig: way.kubeconfig!, env: client.env, cwd: work });
        let exit: Awaited<ReturnType<RunningKubectl['stop']>>;
        try {
          const [local, local2] = await forwardedPorts(pf, [fixture.port, fixture2.port]);
          const big = await downloadDigest(`http://127.0.0.1:${local}/bytes/${BIG_BYTES}?seed=40`);
          expect({ sha256: big.sha256, byteLength: big.byteLength }).toEqual(fixture.expected(BIG_BYTES, 40));
          const seeds = Array.from({ length: CONCURRENT }, (_, i) => 41 + i);
          const many = await Promise.all(seeds.map((s) => downloadDigest(`http://127.0.0.1:${local}/bytes/${CONCURRENT_BYTES}?seed=${s}`)));
          many.forEach((d, i) => expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(fixture.expected(CONCURRENT_BYTES, seeds[i])));
          const second = await downloadDigest(`http://127.0.0.1:${local2}/bytes/${SECOND_PORT_BYTES}?seed=70`);
          expect({ sha256: second.sha256, byteLength: second.byteLength }).toEqual(fixture2.expected(SECOND_PORT_BYTES, 70));
          await expectOneTunnel(way, before);
        } finally {
          exit = await pf.stop('SIGINT', 10_000);
        }
        const { stdout, stderr } = pf.output();
        expect(exit, `${pf.command}\nstdout: ${stdout}\nstderr: ${stderr}`).toEqual({ code: 0, signal: null, killed: false });
      });

      it('a port nothing listens on: kubectl reports the error and exits with "lost connection to pod"', async () => {
        const before = await countersOf(way.proxy!);
        const dead = await deadPort();
        const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${dead}`], { kubeconfig: way.kubeconfig!, env: client.env, cwd: work });
        // The exit code is checked only when the steps before it passed: a failed step is the report.
        let reached = false;
        try {
          const [local] = await forwardedPorts(pf, [dead]);
          await expectOneTunnel(way, before);
          const socket = connect({ host: '127.0.0.1', port: local! });
          socket.on('error', () => {});
          socket.write('GET / HTTP/1.0\r\n\r\n');
          await once(socket, 'close');
          // The runtime's dial error on the port-forward error stream (kubelet `httpstream.go`'s text),
          // carried by whichever tunnel unwrapped it.
          await pf.waitForOutput(new RegExp(`error forwarding port ${dead} to pod demo, uid [^:]*: connect ECONNREFUSED`), 15_000);
          await pf.waitForOutput(/lost connection to pod/, 15_000);
          reached = true;
        } finally {
          const exit = await pf.stop('SIGINT', 10_000);
          const { stdout, stderr } = pf.output();
          // It exits on its own (we never had to kill it) with code 1.
          if (reached) expect(exit, `${pf.command}\nstdout: ${stdout}\nstderr: ${stderr}`).toEqual({ code: 1, signal: null, killed: false });
        }
      });
    });
  });

  describe('with PortForwardWebsockets=false the proxy never tunnels: the tunnel request goes up as kubectl sent it', () => {
    it('to a 1.30 cluster, which refuses it: kubectl 1.33 falls back to SPDY; the proxy neither tunnels nor falls back', async () => {
      const { proxy, kubeconfig } = gateOff.older!;
      const pf = startKubectl(findKubectl('1.33'), ['port-forward', 'pod/demo', `:${fixture.port}`, '-v=4'], { kubeconfig, env: {}, cwd: work });
      try {
        const [local] = await forwardedPorts(pf, [fixture.port]);
        const d = await downloadDigest(`http://127.0.0.1:${local}/bytes/${FALLBACK_BYTES}?seed=80`);
        expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(fixture.expected(FALLBACK_BYTES, 80));
      } finally {
        await pf.stop('SIGINT', 10_000);
      }
      // kubectl tried the WebSocket first and was refused by the (passed through) 1.30 kubelet, then used SPDY.
      expect(pf.output().stderr).toMatch(/query parameter "port" is required|fall(ing)? ?back/i);
      // Both sessions ended: the refused tunnel request, passed through (a WebSocket the gate does not
      // name), and the SPDY one.
      const sessions = { subresource: 'portforward', path: 'passthrough' };
      const text = await waitFor('both sessions counted', async () => {
        const t = await metricsOf(proxy);
        return counterValue(t, 'kube_stream_proxy_streaming_requests_total', sessions) === 2 ? t : undefined;
      }, 10_000, 50);
      expect(counterValue(text, 'kube_stream_proxy_streaming_requests_total', { ...sessions, outcome: 'upstream_refused' })).toBe(1);
      expect(counterValue(text, 'kube_stream_proxy_streaming_requests_total', { ...sessions, protocol: 'spdy', outcome: 'success' })).toBe(1);
      expect(text).not.toMatch(/^apiserver_stream_tunnel_requests_total\{/m);
      expect(counterValue(text, FALLBACKS)).toBe(0);
    });

    it('to the 1.36 cluster, which serves it: passed through, unwrapped by its kubelet; the proxy tunnel counter stays', async () => {
      const { proxy, kubeconfig } = gateOff.modern!;
      const before = await countersOf(proxy);
      const pf = startKubectl(findKubectl('1.33'), ['port-forward', 'pod/demo', `:${fixture.port}`], { kubeconfig, env: {}, cwd: work });
      try {
        const [local] = await forwardedPorts(pf, [fixture.port]);
        const d = await downloadDigest(`http://127.0.0.1:${local}/bytes/${FALLBACK_BYTES}?seed=81`);
        expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(fixture.expected(FALLBACK_BYTES, 81));
      } finally {
        await pf.stop('SIGINT', 10_000);
      }
      const ended = { subresource: 'portforward', path: 'passthrough', outcome: 'success' };
      await waitFor('the session counted', async () => (counterValue(await metricsOf(proxy), 'kube_stream_proxy_streaming_requests_total', ended) === 1 ? true : undefined), 10_000, 50);
      const after = await countersOf(proxy);
      expect(moved(before.cluster, after.cluster)).toEqual({ 'apiserver/portforward/proxied_to_kubelet': 1, 'kubelet/portforward': 1 });
      expect(after.proxy).not.toMatch(/^apiserver_stream_tunnel_requests_total\{/m);
    });
  });
});

describe('@kubernetes/client-node PortForward (legacy WebSocket v4, passthrough)', () => {
  it(`moves ${CLIENT_NODE_BYTES / MB} MB byte-exact`, async () => {
    const proxy = WAYS[1]!.proxy!;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'proxy', server: proxy.url, skipTLSVerify: true }],
      users: [{ name: 'proxy' }],
      contexts: [{ name: 'proxy', cluster: 'proxy', user: 'proxy', namespace: 'default' }],
      currentContext: 'proxy',
    });
    const before = await countersOf(proxy);
    // The HTTP answer arrives on the data channel: find the end of its head, hash the rest.
    const sink = new HashingSink();
    let head = Buffer.alloc(0);
    let inBody = false;
    const out = new Writable({
      write(chunk: Buffer, _enc, cb) {
        if (inBody) return sink.write(chunk) ? cb() : sink.once('drain', () => cb());
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return cb();
        inBody = true;
        sink.write(head.subarray(end + 4));
        head = head.subarray(0, end + 4);
        cb();
      },
    });
    const errors: Buffer[] = [];
    const err = new Writable({ write: (c: Buffer, _e, cb) => (errors.push(c), cb()) });
    const input = new PassThrough();
    const ws = (await new PortForward(kc).portForward('default', 'demo', [fixture.port], out, err, input)) as unknown as import('ws').WebSocket;
    expect(ws.protocol).toBe('v4.channel.k8s.io');
    input.write(`GET /bytes/${CLIENT_NODE_BYTES}?seed=90 HTTP/1.0\r\nHost: fixture\r\n\r\n`);
    const [code] = (await once(ws, 'close')) as [number];
    expect(code).toBe(1000);
    await new Promise<void>((resolve) => sink.end(resolve));
    expect(head.toString('latin1')).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(sink.digest()).toEqual(fixture.expected(CLIENT_NODE_BYTES, 90));
    expect(Buffer.concat(errors).toString()).toBe('');
    const after = await countersOf(proxy);
    // Passed through as v4 to the dev cluster's kubelet, which serves v1–v4 from its runtime: nobody tunnels.
    expect(counterValue(after.proxy, TUNNEL) - counterValue(before.proxy, TUNNEL)).toBe(0);
    expect(moved(before.cluster, after.cluster)).toEqual({});
  });
});
