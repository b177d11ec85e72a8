/**
 * Issue 32 with real kubectl 1.33 and real peers: the proxy asks an upstream in the client's protocol
 * first and falls back before the 101 only where the upstream refuses it.
 *
 * - `modern`: proxy → a second proxy (`--upstream-streaming spdy`: it serves v5 and the tunnel by
 *   translating, as kube-apiserver ≥ 1.31 does) → dev cluster. The first proxy passes v5 and the tunnel
 *   through (`proxied_to_upstream`), the second translates (its counters move, the first's do not).
 * - `openshift`: proxy → a gateway answering every WebSocket upgrade 403 → dev cluster. One WebSocket
 *   attempt, then SPDY (translated here); the next session goes straight to SPDY (memory).
 * - `websocket-only`: proxy → a gateway answering every SPDY upgrade 403 → the second proxy → dev
 *   cluster. kubectl forced to SPDY: one SPDY attempt, then reverse-translated to v5 / the tunnel.
 *
 * - `authz`: proxy → a gateway answering as kube-apiserver's authorizer does (403 and a `Forbidden`
 *   Status). A refused SPDY `create` is never asked again as a WebSocket `get`; a refused v5 is asked
 *   over SPDY (as kubectl itself would), but a verdict on one user never turns the memory for all.
 *
 * Which way each session went is proven by the gateways' records (what reached them) and the metrics.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { FORCE_SPDY_ENV, findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary } from '../helpers/kubectl.js';
import { scrapeCounter } from '../helpers/metrics.js';
import { startStreamingGateway, type StreamingGateway } from '../helpers/streaming-gateway.js';
import { waitFor } from '../helpers/wait.js';

const skipReason = kubectlE2eSkipReason();

const WS_STREAMING = 'apiserver_websocket_streaming_requests_total';
const TRANSLATOR = 'apiserver_stream_translator_requests_total';
const TUNNEL = 'apiserver_stream_tunnel_requests_total';
const FALLBACKS = 'kube_stream_proxy_upstream_streaming_fallbacks_total';
const SESSIONS = 'kube_stream_proxy_streaming_requests_total';

/** A proxy in process with its audit lines kept. */
interface Proxy {
  server: RunningServer;
  audits: Array<Record<string, any>>;
  metric(name: string, labels?: Record<string, string>): Promise<number>;
}

async function startProxy(flags: ServeFlags): Promise<Proxy> {
  const audits: Array<Record<string, any>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _e, cb) {
      for (const line of chunk.toString().split('\n')) {
        if (!line.includes('"audit":true')) continue;
        audits.push(JSON.parse(line) as Record<string, any>);
      }
      cb();
    },
  });
  const server = await startServer(await resolveConfig({ listen: '127.0.0.1:0', ...flags }), { logger: { level: 'info', stream } });
  return { server, audits, metric: (name, labels = {}) => scrapeCounter(server.url, name, labels) };
}

describe.skipIf(skipReason !== undefined)('kubectl 1.33 → proxy → upstreams that take WebSockets, refuse them, or refuse SPDY', () => {
  let work: string;
  let cluster: DevCluster;
  let translating: Proxy;
  let wsRefusing: StreamingGateway;
  let spdyRefusing: StreamingGateway;
  let modern: Proxy;
  let openshift: Proxy;
  let websocketOnly: Proxy;
  let verdicts: StreamingGateway;
  let authz: Proxy;
  let bytes: BytesServer;
  let bin: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-upstream-streaming-'));
    cluster = await startDevCluster({ dataDir: join(work, 'pods') });
    translating = await startProxy({ upstream: cluster.url, upstreamStreaming: 'spdy' });
    wsRefusing = await startStreamingGateway(cluster.url, { websocket: 403 });
    spdyRefusing = await startStreamingGateway(translating.server.url, { spdy: 403 });
    modern = await startProxy({ upstream: translating.server.url });
    openshift = await startProxy({ upstream: wsRefusing.url });
    websocketOnly = await startProxy({ upstream: spdyRefusing.url });
    verdicts = await startStreamingGateway(cluster.url, { body: 'forbidden' });
    authz = await startProxy({ upstream: verdicts.url });
    bytes = await startBytesServer();
    bin = findKubectl('1.33');
  });
  afterAll(async () => {
    for (const p of [modern, openshift, websocketOnly, authz, translating]) await p?.server.close();
    await verdicts?.close();
    await wsRefusing?.close();
    await spdyRefusing?.close();
    await bytes?.close();
    await cluster?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const kubeconfigFor = (p: Proxy, name: string): string => {
    const path = join(work, `kubeconfig-${name}`);
    writeKubeconfig(path, { server: p.server.url, name });
    return path;
  };
  const exec = (p: Proxy, name: string, env: Record<string, string> = {}) =>
    runKubectl(bin, ['exec', 'demo', '--', 'sh', '-c', 'echo out; echo err >&2; exit 3'], { kubeconfig: kubeconfigFor(p, name), timeoutMs: 30_000, env });
  const expectExec = (r: Awaited<ReturnType<typeof exec>>): void => {
    expect(r.code, summary(r)).toBe(3);
    expect(r.stdout.toString()).toBe('out\n');
    expect(r.stderr.toString()).toContain('err\n');
  };
  const portForward = async (p: Proxy, name: string, env: Record<string, string> = {}): Promise<void> => {
    const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${bytes.port}`], { kubeconfig: kubeconfigFor(p, name), env });
    try {
      const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytes.port}\\b`), 30_000);
      const d = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/300000?seed=32`);
      expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(bytes.expected(300000, 32));
    } finally {
      await pf.stop('SIGINT', 10_000);
    }
  };
  const auditFor = (p: Proxy, index: number) => waitFor(`audit line ${index}`, async () => p.audits[index], 10_000, 20);

  it('an upstream that takes WebSockets: v5 exec and the port-forward tunnel are passed through, translated only by the upstream', async () => {
    expectExec(await exec(modern, 'modern'));
    await portForward(modern, 'modern');
    await waitFor('both sessions counted', async () => ((await modern.metric(SESSIONS)) === 2 ? true : undefined), 10_000, 20);
    expect(await modern.metric(WS_STREAMING, { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(1);
    expect(await modern.metric(WS_STREAMING, { subresource: 'portforward', proxy_type: 'proxied_to_upstream' })).toBe(1);
    expect(await modern.metric(SESSIONS, { path: 'passthrough', protocol: 'websocket' })).toBe(1);
    expect(await modern.metric(SESSIONS, { path: 'passthrough', protocol: 'tunnel' })).toBe(1);
    // Nothing was translated in front; the upstream did it.
    expect(await modern.metric(TRANSLATOR)).toBe(0);
    expect(await modern.metric(TUNNEL)).toBe(0);
    expect(await modern.metric(FALLBACKS)).toBe(0);
    await waitFor('the upstream counted its translation', async () => ((await translating.metric(TRANSLATOR, { code: '200' })) === 1 ? true : undefined), 10_000, 20);
    expect(await translating.metric(TUNNEL, { code: '101' })).toBe(1);
    expect(await translating.metric(WS_STREAMING, { subresource: 'exec', proxy_type: 'translated_at_apiserver' })).toBe(1);
    expect((await auditFor(modern, 0)).fallback).toBeUndefined();
  });

  it('an upstream that refuses WebSocket with 403: one WebSocket attempt, then SPDY; the next session asks SPDY only', async () => {
    expectExec(await exec(openshift, 'openshift'));
    expect(wsRefusing.upgrades().map((u) => `${u.method} ${u.upgrade} ${u.refusedWith ?? 101}`)).toEqual(['GET websocket 403', 'POST spdy 101']);
    expect(wsRefusing.upgrades()[0]!.protocols[0]).toBe('v5.channel.k8s.io');
    const first = await auditFor(openshift, 0);
    expect(first).toMatchObject({ path: 'translated', clientProtocol: 'websocket', fallback: { from: 'websocket', to: 'spdy', statusCode: 403 }, exitCode: 3 });
    expect(await openshift.metric(FALLBACKS, { from: 'websocket', to: 'spdy', code: '403' })).toBe(1);

    wsRefusing.requests.length = 0;
    expectExec(await exec(openshift, 'openshift'));
    await portForward(openshift, 'openshift');
    // Remembered: no WebSocket upgrade reached the gateway this time.
    expect(wsRefusing.upgrades().map((u) => `${u.method} ${u.upgrade} ${u.refusedWith ?? 101}`)).toEqual(['POST spdy 101', 'POST spdy 101']);
    expect(await openshift.metric(FALLBACKS)).toBe(1);
    expect((await auditFor(openshift, 1)).fallback).toBeUndefined();
    await waitFor('translated twice', async () => ((await openshift.metric(TRANSLATOR, { code: '200' })) === 2 ? true : undefined), 10_000, 20);
    expect(await openshift.metric(WS_STREAMING, { subresource: 'exec', proxy_type: 'translated_at_apiserver' })).toBe(2);
    expect(await openshift.metric(WS_STREAMING, { subresource: 'portforward', proxy_type: 'tunneled_at_apiserver' })).toBe(1);
    expect(await openshift.metric(TUNNEL, { code: '101' })).toBe(1);
  });

  it('an upstream that refuses SPDY with 403: a SPDY client is reverse-translated to v5 and reverse-tunnelled, after one SPDY attempt', async () => {
    expectExec(await exec(websocketOnly, 'websocket-only', FORCE_SPDY_ENV));
    expect(spdyRefusing.upgrades().map((u) => `${u.method} ${u.upgrade} ${u.refusedWith ?? 101}`)).toEqual(['POST spdy 403', 'GET websocket 101']);
    expect(spdyRefusing.upgrades()[1]!.protocols).toEqual(['v5.channel.k8s.io', 'v4.channel.k8s.io']);
    expect(await auditFor(websocketOnly, 0)).toMatchObject({ path: 'reverse_translated', clientProtocol: 'spdy', fallback: { from: 'spdy', to: 'websocket', statusCode: 403 } });
    expect(await websocketOnly.metric(FALLBACKS, { from: 'spdy', to: 'websocket', code: '403' })).toBe(1);

    spdyRefusing.requests.length = 0;
    await portForward(websocketOnly, 'websocket-only', FORCE_SPDY_ENV);
    expect(spdyRefusing.upgrades().map((u) => `${u.method} ${u.upgrade} ${u.refusedWith ?? 101}`)).toEqual(['GET websocket 101']);
    expect(spdyRefusing.upgrades()[0]!.protocols).toEqual(['SPDY/3.1+portforward.k8s.io']);
    expect(await websocketOnly.metric(FALLBACKS)).toBe(1);
    // kube-apiserver's counters are for WebSocket clients translated here: none.
    expect(await websocketOnly.metric(TRANSLATOR)).toBe(0);
    expect(await websocketOnly.metric(TUNNEL)).toBe(0);
    await waitFor('both sessions counted', async () => ((await websocketOnly.metric(SESSIONS)) === 2 ? true : undefined), 10_000, 20);
    expect(await websocketOnly.metric(SESSIONS, { path: 'reverse_tunnel', protocol: 'spdy' })).toBe(1);
  });

  it("an authorizer's Forbidden Status: a SPDY client is not asked again over WebSocket; a v5 one is, and the memory stays", async () => {
    const shown = (): string[] => verdicts.upgrades().map((u) => `${u.method} ${u.upgrade} ${u.refusedWith ?? 101}`);
    verdicts.refuse.spdy = 403;
    const denied = await exec(authz, 'authz', FORCE_SPDY_ENV);
    expect(denied.code, summary(denied)).toBe(1);
    expect(denied.stderr.toString()).toContain('refused by the test gateway (403)');
    expect(shown()).toEqual(['POST spdy 403']);
    expect(await authz.metric(FALLBACKS)).toBe(0);
    expect(await auditFor(authz, 0)).toMatchObject({ path: 'passthrough', clientProtocol: 'spdy', statusCode: 403 });
    expect((await auditFor(authz, 0)).fallback).toBeUndefined();

    delete verdicts.refuse.spdy;
    verdicts.refuse.websocket = 403;
    verdicts.requests.length = 0;
    expectExec(await exec(authz, 'authz'));
    expectExec(await exec(authz, 'authz'));
    // Asked over WebSocket both times: the first fallback, after a verdict, was not remembered.
    expect(shown()).toEqual(['GET websocket 403', 'POST spdy 101', 'GET websocket 403', 'POST spdy 101']);
    expect(await authz.metric(FALLBACKS, { from: 'websocket', to: 'spdy', code: '403' })).toBe(2);
  });
});
