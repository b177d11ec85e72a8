/**
 * Acceptance for the port-forward tunnel: real kubectl (1.31–1.33 by default, 1.30 with
 * KUBECTL_PORT_FORWARD_WEBSOCKETS=true) through the in-process proxy to the in-process dev cluster,
 * forwarding to HTTP fixtures on this host. Every kubectl test proves the tunnel carried it: the
 * proxy's `apiserver_stream_tunnel_requests_total{code="101"}` rises by exactly one per command.
 * Also: the gate off (kubectl falls back to SPDY, counter still), and @kubernetes/client-node's
 * legacy WebSocket v4 port-forward through the passthrough.
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
import { resolveConfig } from '../../src/config.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { HashingSink } from '../helpers/hash.js';
import { findKubectl, kubectlE2eSkipReason, startKubectl, type KubectlVersion, type RunningKubectl } from '../helpers/kubectl.js';

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

const skipReason = kubectlE2eSkipReason();

let work: string;
let cluster: DevCluster;
let proxy: RunningServer;
let proxyGateOff: RunningServer;
let kubeconfig: string;
let kubeconfigGateOff: string;
let fixture: BytesServer;
let fixture2: BytesServer;

/** `apiserver_stream_tunnel_requests_total{code}` as the proxy exposes it. */
async function tunnelCount(server: RunningServer, code = '101'): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = new RegExp(`^apiserver_stream_tunnel_requests_total\\{code="${code}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
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

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'ksp-e2e-tunnel-'));
  [fixture, fixture2] = await Promise.all([startBytesServer(), startBytesServer()]);
  cluster = await startDevCluster({ dataDir: join(work, 'pods') });
  proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: cluster.url }));
  proxyGateOff = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: cluster.url, featureGates: 'PortForwardWebsockets=false' }));
  kubeconfig = join(work, 'kubeconfig');
  kubeconfigGateOff = join(work, 'kubeconfig-gate-off');
  writeKubeconfig(kubeconfig, { server: proxy.url, name: 'proxy' });
  writeKubeconfig(kubeconfigGateOff, { server: proxyGateOff.url, name: 'proxy-gate-off' });
});

afterAll(async () => {
  await proxy?.close();
  await proxyGateOff?.close();
  await cluster?.close();
  await fixture?.close();
  await fixture2?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe.skipIf(skipReason !== undefined)('kubectl port-forward through the tunnel', () => {
  describe.each(CLIENTS)('$name', (client) => {
    let bin: string;
    beforeAll(() => {
      bin = findKubectl(client.version);
    });

    it(`${BIG_BYTES / MB} MB, ${CONCURRENT} concurrent connections and a second port in one command`, async () => {
      const before = await tunnelCount(proxy);
      const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${fixture.port}`, `:${fixture2.port}`], { kubeconfig, env: client.env, cwd: work });
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
        expect(await tunnelCount(proxy)).toBe(before + 1);
      } finally {
        exit = await pf.stop('SIGINT', 10_000);
      }
      const { stdout, stderr } = pf.output();
      expect(exit, `${pf.command}\nstdout: ${stdout}\nstderr: ${stderr}`).toEqual({ code: 0, signal: null, killed: false });
    });

    it('a port nothing listens on: kubectl reports the error and exits with "lost connection to pod"', async () => {
      const before = await tunnelCount(proxy);
      const dead = await deadPort();
      const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${dead}`], { kubeconfig, env: client.env, cwd: work });
      try {
        const [local] = await forwardedPorts(pf, [dead]);
        expect(await tunnelCount(proxy)).toBe(before + 1);
        const socket = connect({ host: '127.0.0.1', port: local! });
        socket.on('error', () => {});
        socket.write('GET / HTTP/1.0\r\n\r\n');
        await once(socket, 'close');
        await pf.waitForOutput(new RegExp(`error forwarding port ${dead} to pod demo`), 15_000);
        await pf.waitForOutput(/lost connection to pod/, 15_000);
      } finally {
        const exit = await pf.stop('SIGINT', 10_000);
        const { stdout, stderr } = pf.output();
        // It exits on its own (we never had to kill it) with code 1.
        expect(exit, `${pf.command}\nstdout: ${stdout}\nstderr: ${stderr}`).toEqual({ code: 1, signal: null, killed: false });
      }
    });
  });

  it('with PortForwardWebsockets=false kubectl 1.33 falls back to SPDY and the tunnel counter stays', async () => {
    const bin = findKubectl('1.33');
    const before = await tunnelCount(proxyGateOff, '101');
    const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${fixture.port}`, '-v=4'], { kubeconfig: kubeconfigGateOff, env: {}, cwd: work });
    try {
      const [local] = await forwardedPorts(pf, [fixture.port]);
      const d = await downloadDigest(`http://127.0.0.1:${local}/bytes/${FALLBACK_BYTES}?seed=80`);
      expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(fixture.expected(FALLBACK_BYTES, 80));
    } finally {
      await pf.stop('SIGINT', 10_000);
    }
    // kubectl tried the WebSocket first and was refused by the (passthrough) kubelet, then used SPDY.
    expect(pf.output().stderr).toMatch(/query parameter "port" is required|fall(ing)? ?back/i);
    const text = await (await fetch(`${proxyGateOff.url}/metrics`)).text();
    expect(text).not.toMatch(/^apiserver_stream_tunnel_requests_total\{/m);
    expect(await tunnelCount(proxyGateOff, '101')).toBe(before);
  });
});

describe('@kubernetes/client-node PortForward (legacy WebSocket v4, passthrough)', () => {
  it(`moves ${CLIENT_NODE_BYTES / MB} MB byte-exact`, async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'proxy', server: proxy.url, skipTLSVerify: true }],
      users: [{ name: 'proxy' }],
      contexts: [{ name: 'proxy', cluster: 'proxy', user: 'proxy', namespace: 'default' }],
      currentContext: 'proxy',
    });
    const before = await tunnelCount(proxy);
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
    expect(await tunnelCount(proxy)).toBe(before);
  });
});
