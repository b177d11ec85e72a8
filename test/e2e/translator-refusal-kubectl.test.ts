/**
 * kubectl 1.33 against an upstream that refuses the exec for its token (401 with a Status): the
 * translator answers kubectl's WebSocket handshake with that 401 (no 101), kubectl falls back to SPDY
 * as client-go does on a failed upgrade, meets the same 401 through the passthrough, and reports the
 * upstream's own message. The upstream is a small HTTP server: it serves the pod GET kubectl makes
 * first and refuses every upgrade.
 *
 * The translator's relay of the refusal is what this file is for, so that proxy runs with
 * `--upstream-streaming spdy` (the default would pass the v5 upgrade through instead). The default
 * gets the same 401 on the passed-through WebSocket upgrade and relays it without a fallback of its
 * own (credentials refused in one protocol are refused in the other): the second test.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import type { RunningServer } from '../../src/server.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { scrapeCounter } from '../helpers/metrics.js';
import { startProxy } from '../proxy/scripted-upstream.js';

const skipReason = kubectlE2eSkipReason();
const MESSAGE = 'the token of this request is not valid for pods/exec (upstream message 4711)';
const POD = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'demo', namespace: 'default' }, spec: { containers: [{ name: 'demo', image: 'x' }] }, status: { phase: 'Running' } };

/** Just enough discovery for kubectl to find pods. */
const DISCOVERY: Record<string, unknown> = {
  '/api': { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }] },
  '/apis': { kind: 'APIGroupList', apiVersion: 'v1', groups: [] },
  '/api/v1': {
    kind: 'APIResourceList',
    groupVersion: 'v1',
    resources: [
      { name: 'pods', singularName: 'pod', namespaced: true, kind: 'Pod', verbs: ['get', 'list'], shortNames: ['po'] },
      { name: 'pods/exec', singularName: '', namespaced: true, kind: 'PodExecOptions', verbs: ['create', 'get'] },
    ],
  },
};

describe.skipIf(skipReason !== undefined)('kubectl 1.33 and an upstream refusing the exec with 401', () => {
  const work = mkdtempSync(join(tmpdir(), 'ksp-refusal-'));
  const upgrades: { method: string; upgrade: string; authorization?: string }[] = [];
  let upstream: Server;
  let proxy: RunningServer;
  let passing: RunningServer;
  beforeAll(async () => {
    upstream = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      const answer = DISCOVERY[path ?? ''] ?? (path === '/api/v1/namespaces/default/pods/demo' ? POD : undefined);
      res.statusCode = answer ? 200 : 404;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(answer ?? { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason: 'NotFound', code: 404 }));
    });
    upstream.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
      upgrades.push({ method: req.method ?? '', upgrade: req.headers.upgrade ?? '', ...(req.headers.authorization !== undefined ? { authorization: req.headers.authorization } : {}) });
      const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: MESSAGE, reason: 'Unauthorized', code: 401 });
      socket.end(`HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    upstream.listen(0, '127.0.0.1');
    await once(upstream, 'listening');
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    // The translator relays the refusal: that proxy speaks SPDY upstream for every WebSocket (the old default).
    proxy = await startProxy(url, { upstreamStreaming: 'spdy' });
    passing = await startProxy(url);
  });
  afterAll(async () => {
    await proxy?.close();
    await passing?.close();
    upstream?.closeAllConnections();
    await new Promise<void>((resolve) => upstream?.close(() => resolve()));
    rmSync(work, { recursive: true, force: true });
  });

  it('the WebSocket handshake gets the 401, the SPDY fallback too, and kubectl prints the upstream message', async () => {
    upgrades.length = 0;
    const kubeconfig = join(work, 'kubeconfig');
    writeKubeconfig(kubeconfig, { server: proxy.url, name: 'proxy', token: 'wrong-token' });
    const refusedBefore = await scrapeCounter(proxy.url, 'apiserver_stream_translator_requests_total', { code: '401' });
    const r = await runKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'echo', 'hello'], { kubeconfig, timeoutMs: 30_000 });
    expect(r.code, summary(r)).not.toBe(0);
    expect(r.stderr).toContain(MESSAGE);
    expect(r.stdout.toString()).toBe('');
    // First the translated attempt (refused at the handshake, counted 401), then kubectl's SPDY fallback.
    expect(await scrapeCounter(proxy.url, 'apiserver_stream_translator_requests_total', { code: '401' })).toBe(refusedBefore + 1);
    expect(await scrapeCounter(proxy.url, 'apiserver_stream_translator_requests_total', { code: '200' })).toBe(0);
    expect(upgrades.map((u) => u.upgrade)).toEqual(['SPDY/3.1', 'SPDY/3.1']);
    expect(await scrapeCounter(proxy.url, 'kube_stream_proxy_streaming_requests_total', { path: 'translated', outcome: 'upstream_refused' })).toBe(1);
    expect(await scrapeCounter(proxy.url, 'kube_stream_proxy_streaming_requests_total', { path: 'passthrough', outcome: 'upstream_refused' })).toBe(1);
  });

  it('the default passes the WebSocket upgrade through: the upstream 401 is relayed with no fallback, then the SPDY one', async () => {
    upgrades.length = 0;
    const kubeconfig = join(work, 'kubeconfig-passing');
    writeKubeconfig(kubeconfig, { server: passing.url, name: 'passing', token: 'wrong-token' });
    const r = await runKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'echo', 'hello'], { kubeconfig, timeoutMs: 30_000 });
    expect(r.code, summary(r)).not.toBe(0);
    expect(r.stderr).toContain(MESSAGE);
    expect(r.stdout.toString()).toBe('');
    // kubectl's own two attempts, each asked once upstream, in its own protocol.
    expect(upgrades).toEqual([
      { method: 'GET', upgrade: 'websocket' },
      { method: 'POST', upgrade: 'SPDY/3.1' },
    ]);
    const sessions = (labels: Record<string, string>) => scrapeCounter(passing.url, 'kube_stream_proxy_streaming_requests_total', labels);
    expect(await sessions({ protocol: 'websocket', path: 'passthrough', outcome: 'upstream_refused' })).toBe(1);
    expect(await sessions({ protocol: 'spdy', path: 'passthrough', outcome: 'upstream_refused' })).toBe(1);
    expect(await sessions({})).toBe(2);
    expect(await scrapeCounter(passing.url, 'kube_stream_proxy_upstream_streaming_fallbacks_total')).toBe(0);
    expect(await scrapeCounter(passing.url, 'apiserver_stream_translator_requests_total')).toBe(0);
    expect(await scrapeCounter(passing.url, 'kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '401' })).toBe(2);
  });
});
