/**
 * Issue 32 on the wire, with pipelined upstreams that record every request as it arrived: the proxy
 * asks in the client's protocol first; a refusal before the 101 other than 401 is not relayed and
 * exactly one attempt in the other protocol follows (its answer relayed if it fails too); the memory
 * turns only on that attempt's 101; the client's early bytes never reach a refused upstream
 * connection. Kubelet mode: the node's `status.declaredFeatures` decide, no fallback. The review verb
 * of a WebSocket upgrade follows `AuthorizePodWebsocketUpgradeCreatePermission`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { counterValue } from '../helpers/metrics.js';
import { headerOf, headersOf } from './http1-request-parser.js';
import type { Answer, SeenRequest } from './pipelined-upstream.js';
import { bodyOf, startStreamRig, statusOf, type RigMode, type RigOptions, type StreamRig } from './stream-rig.js';

/** A masked binary WebSocket frame: stdin (channel 0) `x`. What a client may send right after its head. */
const EARLY = Buffer.from([0x82, 0x82, 0x01, 0x02, 0x03, 0x04, 0x00 ^ 0x01, 0x78 ^ 0x02]);

function v5Exec(rig: StreamRig, pod: string): Buffer {
  const head =
    `GET ${rig.prefix}/api/v1/namespaces/default/pods/${pod}/exec?command=sh&stdin=true&stdout=true HTTP/1.1\r\nHost: proxy\r\n${rig.auth}` +
    'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n';
  return Buffer.concat([Buffer.from(head, 'latin1'), EARLY]);
}

function spdyExec(rig: StreamRig, pod: string): string {
  return (
    `POST ${rig.prefix}/api/v1/namespaces/default/pods/${pod}/exec?command=sh&stdout=true HTTP/1.1\r\nHost: proxy\r\n${rig.auth}` +
    'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n'
  );
}

/** Close once a whole 101 head arrived (an upgraded session is not waited out). */
const upgraded = (b: Buffer): boolean => b.toString('latin1').startsWith('HTTP/1.1 101') && b.includes('\r\n\r\n');

function statusAnswer(code: number, message: string, reason?: string): Answer {
  return { status: code, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, ...(reason ? { reason } : {}), code } };
}

const upgradeOf = (r: Pick<SeenRequest, 'headers'>): string => (headerOf(r, 'upgrade') ?? '').toLowerCase();

/** The caller's upgrades the upstream read, as `METHOD upgrade`. */
function upgradesSeen(rig: StreamRig, upstream = rig.upstream): string[] {
  return upstream.callerRequests().filter((r) => r.upgrade).map((r) => `${r.method} ${upgradeOf(r)}`);
}

async function metric(rig: StreamRig, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = (await rig.proxy.app.inject({ method: 'GET', url: '/metrics' })).body;
  return counterValue(text, name, labels);
}

const FALLBACKS = 'kube_stream_proxy_upstream_streaming_fallbacks_total';
const WS_STREAMING = 'apiserver_websocket_streaming_requests_total';

let rig: StreamRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

async function start(mode: RigMode, o: RigOptions = {}): Promise<StreamRig> {
  rig = await startStreamRig(mode, o);
  return rig;
}

describe('apiserver mode: asked in the client\'s protocol first', () => {
  it.each([400, 403, 404, 503])('WebSocket refused with %i before the 101: exactly one SPDY attempt, then SPDY only (memory); the early bytes never reach the refused connection', async (code) => {
    const r = await start('passthrough', { answer: (q) => (q.upgrade && upgradeOf(q) === 'websocket' ? statusAnswer(code, 'websocket exec is disabled') : undefined) });
    const answer = await r.send(v5Exec(r, 'p1'), upgraded);
    expect(statusOf(answer)).toBe(101);
    expect(upgradesSeen(r)).toEqual(['GET websocket', 'POST spdy/3.1']);
    const [ws, spdy] = r.upstream.callerRequests().filter((q) => q.upgrade);
    // The refused attempt's connection carried the head alone: nothing more was read on it.
    expect(r.upstream.requests.filter((q) => q.conn === ws!.conn)).toHaveLength(1);
    expect(r.upstream.anomalies.size).toBe(0);
    expect(r.upstream.upgraded.get(ws!.conn)).toBeUndefined();
    // The SPDY attempt is the translator's own (POST, kubelet protocols), not the client's bytes.
    expect(headersOf(spdy!, 'x-stream-protocol-version')).toEqual(['v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io']);
    expect(await metric(r, FALLBACKS, { from: 'websocket', to: 'spdy', code: String(code) })).toBe(1);
    expect(await metric(r, WS_STREAMING, { subresource: 'exec', proxy_type: 'translated_at_apiserver' })).toBe(1);
    expect(await r.auditOf('p1')).toMatchObject({ path: 'translated', fallback: { from: 'websocket', to: 'spdy', statusCode: code } });

    expect(statusOf(await r.send(v5Exec(r, 'p2'), upgraded))).toBe(101);
    expect(upgradesSeen(r)).toEqual(['GET websocket', 'POST spdy/3.1', 'POST spdy/3.1']);
    expect(await metric(r, FALLBACKS)).toBe(1);
    expect((await r.auditOf('p2')).fallback).toBeUndefined();
  });

  it('401 is relayed byte for byte, with no second attempt', async () => {
    const r = await start('passthrough', { answer: (q) => (q.upgrade ? statusAnswer(401, 'Unauthorized') : undefined) });
    const answer = await r.send(v5Exec(r, 'p1'));
    expect(statusOf(answer)).toBe(401);
    expect(bodyOf(answer)).toMatchObject({ code: 401, message: 'Unauthorized' });
    expect(upgradesSeen(r)).toEqual(['GET websocket']);
    expect(await metric(r, FALLBACKS)).toBe(0);
    expect(await r.auditOf('p1')).toMatchObject({ path: 'passthrough', statusCode: 401, outcome: 'upstream_refused' });
  });

  it('both refused: the second answer is relayed and the memory is unchanged', async () => {
    const r = await start('passthrough', {
      answer: (q) => (!q.upgrade ? undefined : upgradeOf(q) === 'websocket' ? statusAnswer(403, 'first answer') : statusAnswer(404, 'second answer')),
    });
    for (const pod of ['p1', 'p2']) {
      const answer = await r.send(v5Exec(r, pod));
      expect(statusOf(answer)).toBe(404);
      expect(bodyOf(answer)).toMatchObject({ code: 404, message: 'second answer' });
      expect(await r.auditOf(pod)).toMatchObject({ path: 'translated', statusCode: 404, outcome: 'upstream_refused', fallback: { from: 'websocket', to: 'spdy', statusCode: 403 } });
    }
    // Asked in WebSocket first both times: a refused fallback taught the memory nothing.
    expect(upgradesSeen(r)).toEqual(['GET websocket', 'POST spdy/3.1', 'GET websocket', 'POST spdy/3.1']);
    expect(await metric(r, FALLBACKS, { from: 'websocket', to: 'spdy', code: '403' })).toBe(2);
  });

  it('a 101 to the WebSocket attempt: passed through byte for byte, the early bytes after it, counted proxied_to_upstream', async () => {
    const r = await start('passthrough');
    const answer = await r.send(v5Exec(r, 'p1'), (b) => upgraded(b) && b.length >= b.indexOf('\r\n\r\n') + 4 + EARLY.length);
    expect(statusOf(answer)).toBe(101);
    expect(answer.toString('latin1')).toMatch(/\r\nSec-WebSocket-Protocol: v5\.channel\.k8s\.io\r\n/);
    const [ws] = r.upstream.callerRequests().filter((q) => q.upgrade);
    expect(upgradesSeen(r)).toEqual(['GET websocket']);
    expect(headerOf(ws!, 'sec-websocket-protocol')).toBe('v5.channel.k8s.io');
    expect(headerOf(ws!, 'sec-websocket-key')).toBe('dGhlIHNhbXBsZSBub25jZQ==');
    // The upstream's echo: exactly the client's bytes, after the 101.
    expect(r.upstream.upgraded.get(ws!.conn)).toEqual(EARLY);
    expect(answer.subarray(answer.indexOf('\r\n\r\n') + 4)).toEqual(EARLY);
    expect(await metric(r, WS_STREAMING, { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(1);
    expect(await metric(r, 'apiserver_stream_translator_requests_total')).toBe(0);
    expect(await r.auditOf('p1')).toMatchObject({ path: 'passthrough', clientProtocol: 'websocket' });
  });

  it('a SPDY client refused before the 101: one WebSocket attempt (v5, then v4 offered), reverse-translated; 101 then remembered', async () => {
    const r = await start('passthrough', { answer: (q) => (q.upgrade && upgradeOf(q) === 'spdy/3.1' ? statusAnswer(403, 'spdy is not served here') : undefined) });
    expect(statusOf(await r.send(spdyExec(r, 'p1'), upgraded))).toBe(101);
    expect(upgradesSeen(r)).toEqual(['POST spdy/3.1', 'GET websocket']);
    const ws = r.upstream.callerRequests().filter((q) => q.upgrade)[1]!;
    expect(headerOf(ws, 'sec-websocket-protocol')).toBe('v5.channel.k8s.io, v4.channel.k8s.io');
    expect(await metric(r, FALLBACKS, { from: 'spdy', to: 'websocket', code: '403' })).toBe(1);
    expect(await r.auditOf('p1')).toMatchObject({ path: 'reverse_translated', clientProtocol: 'spdy', fallback: { from: 'spdy', to: 'websocket', statusCode: 403 } });
    expect(statusOf(await r.send(spdyExec(r, 'p2'), upgraded))).toBe(101);
    expect(upgradesSeen(r)).toEqual(['POST spdy/3.1', 'GET websocket', 'GET websocket']);
  });

  it("an authorizer's Forbidden Status to a SPDY exec: relayed byte for byte; a refused create is never asked again as a WebSocket get", async () => {
    const r = await start('passthrough', { answer: (q) => (q.upgrade ? statusAnswer(403, 'cannot create resource "pods/exec"', 'Forbidden') : undefined) });
    const answer = await r.send(spdyExec(r, 'p1'));
    expect(statusOf(answer)).toBe(403);
    expect(bodyOf(answer)).toMatchObject({ reason: 'Forbidden', message: 'cannot create resource "pods/exec"' });
    expect(upgradesSeen(r)).toEqual(['POST spdy/3.1']);
    expect(await metric(r, FALLBACKS)).toBe(0);
    expect(await r.auditOf('p1')).toMatchObject({ path: 'passthrough', statusCode: 403, outcome: 'upstream_refused' });
  });

  it("an authorizer's Forbidden Status to a v5 exec: asked once over SPDY (get → create), and never remembered", async () => {
    const r = await start('passthrough', { answer: (q) => (q.upgrade && upgradeOf(q) === 'websocket' ? statusAnswer(403, 'cannot get resource "pods/exec"', 'Forbidden') : undefined) });
    for (const pod of ['p1', 'p2']) expect(statusOf(await r.send(v5Exec(r, pod), upgraded))).toBe(101);
    expect(upgradesSeen(r)).toEqual(['GET websocket', 'POST spdy/3.1', 'GET websocket', 'POST spdy/3.1']);
    expect(await metric(r, FALLBACKS, { from: 'websocket', to: 'spdy', code: '403' })).toBe(2);
  });

  it.each([
    ['v5', (rig: StreamRig) => v5Exec(rig, 'gone'), ['GET websocket']],
    ['SPDY', (rig: StreamRig) => spdyExec(rig, 'gone'), ['POST spdy/3.1']],
  ] as const)('a NotFound Status to a %s exec: relayed, nothing asked again', async (_name, request, seen) => {
    const r = await start('passthrough', { answer: (q) => (q.upgrade ? statusAnswer(404, 'pods "gone" not found', 'NotFound') : undefined) });
    const answer = await r.send(request(r));
    expect(statusOf(answer)).toBe(404);
    expect(bodyOf(answer)).toMatchObject({ reason: 'NotFound', message: 'pods "gone" not found' });
    expect(upgradesSeen(r)).toEqual(seen);
    expect(await metric(r, FALLBACKS)).toBe(0);
  });

  it('--upstream-streaming spdy: v5 is translated without asking in WebSocket (the behaviour before 1.36)', async () => {
    const r = await start('passthrough', { serveFlags: { upstreamStreaming: 'spdy' } });
    expect(statusOf(await r.send(v5Exec(r, 'p1'), upgraded))).toBe(101);
    expect(upgradesSeen(r)).toEqual(['POST spdy/3.1']);
  });

  it('an agent\'s cluster: the same fallback through the tunnel, remembered for cluster/c1', async () => {
    const r = await start('agent', { answer: (q) => (q.upgrade && upgradeOf(q) === 'websocket' ? statusAnswer(403, 'no websockets') : undefined) });
    expect(statusOf(await r.send(v5Exec(r, 'p1'), upgraded))).toBe(101);
    expect(upgradesSeen(r)).toEqual(['GET websocket', 'POST spdy/3.1']);
    expect(r.lines.find((l) => l.msg?.startsWith('upstream refused the upgrade before its 101'))).toMatchObject({ route: 'cluster/c1', from: 'websocket', to: 'spdy', statusCode: 403 });
    expect(statusOf(await r.send(v5Exec(r, 'p2'), upgraded))).toBe(101);
    expect(upgradesSeen(r)).toEqual(['GET websocket', 'POST spdy/3.1', 'POST spdy/3.1']);
  });
});

describe('kubelet mode: the node\'s declaredFeatures decide, no fallback', () => {
  /** Pods named `new-*` run on `node-new`, whose kubelet declares ExtendWebSocketsToKubelet. */
  function kubeletRig(extra: (q: SeenRequest) => Answer | undefined = () => undefined): Promise<StreamRig> {
    let self: StreamRig | undefined;
    const promise = start('kubelet', {
      answer: (q) => {
        const pod = /^\/api\/v1\/namespaces\/default\/pods\/(new-[^/]+)$/.exec(q.path);
        if (q.method === 'GET' && pod) return { status: 200, body: { kind: 'Pod', apiVersion: 'v1', metadata: { namespace: 'default', name: pod[1] }, spec: { nodeName: 'node-new', containers: [{ name: 'main' }] } } };
        if (q.method === 'GET' && q.path === '/api/v1/nodes/node-new') {
          const status = { addresses: [{ type: 'InternalIP', address: '127.0.0.1' }], daemonEndpoints: { kubeletEndpoint: { Port: self!.streamUpstream.port } }, declaredFeatures: ['ExtendWebSocketsToKubelet'] };
          return { status: 200, body: { kind: 'Node', apiVersion: 'v1', metadata: { name: 'node-new' }, status } };
        }
        return extra(q);
      },
    });
    return promise.then((r) => (self = r));
  }

  it('a declaring node: v5 exec passed through to the kubelet byte for byte (proxied_to_kubelet); its node read once for two sessions', async () => {
    const r = await kubeletRig();
    for (const pod of ['new-1', 'new-2']) expect(statusOf(await r.send(v5Exec(r, pod), upgraded))).toBe(101);
    expect(upgradesSeen(r, r.streamUpstream)).toEqual(['GET websocket', 'GET websocket']);
    const ws = r.streamUpstream.callerRequests()[0]!;
    expect(ws.target).toBe('/exec/default/new-1/main?input=1&output=1&command=sh');
    expect(headerOf(ws, 'sec-websocket-protocol')).toBe('v5.channel.k8s.io');
    expect(ws.clientCN).toBe('kube-apiserver-kubelet-client');
    expect(await metric(r, WS_STREAMING, { subresource: 'exec', proxy_type: 'proxied_to_kubelet' })).toBe(2);
    expect(await metric(r, 'apiserver_stream_translator_requests_total')).toBe(0);
    expect(r.upstream.requests.filter((q) => q.path === '/api/v1/nodes/node-new')).toHaveLength(1);
  });

  it('a node that declares nothing: v5 exec translated to SPDY (translated_at_apiserver)', async () => {
    const r = await kubeletRig();
    expect(statusOf(await r.send(v5Exec(r, 'old-1'), upgraded))).toBe(101);
    expect(upgradesSeen(r, r.streamUpstream)).toEqual(['POST spdy/3.1']);
    expect(await metric(r, WS_STREAMING, { subresource: 'exec', proxy_type: 'translated_at_apiserver' })).toBe(1);
  });

  it('a declaring node whose kubelet refuses the WebSocket: its answer relayed, nothing else tried', async () => {
    const r = await kubeletRig((q) => (q.upgrade && q.path.startsWith('/exec/default/new-refused/') ? statusAnswer(403, 'the kubelet refused') : undefined));
    const answer = await r.send(v5Exec(r, 'new-refused'));
    expect(statusOf(answer)).toBe(403);
    expect(bodyOf(answer)).toMatchObject({ code: 403, message: 'the kubelet refused' });
    expect(upgradesSeen(r, r.streamUpstream)).toEqual(['GET websocket']);
    expect(await metric(r, FALLBACKS)).toBe(0);
  });
});

describe('AuthorizePodWebsocketUpgradeCreatePermission', () => {
  it.each([
    ['on (default): a GET WebSocket upgrade is reviewed as create', undefined, 'create'],
    ['off: as get, as kube-apiserver < 1.35', 'AuthorizePodWebsocketUpgradeCreatePermission=false', 'get'],
  ])('%s', async (_name, gates, verb) => {
    const r = await start('impersonate', gates ? { serveFlags: { featureGates: gates } } : {});
    await r.send(v5Exec(r, 'p1'), upgraded);
    expect(r.reviews().filter((s) => s.attributes.subresource === 'exec').map((s) => s.attributes.verb)).toEqual([verb]);
    await r.send(spdyExec(r, 'p2'), upgraded);
    expect(r.reviews().filter((s) => s.attributes.name === 'p2').map((s) => s.attributes.verb)).toEqual(['create']);
  });
});
