/**
 * `--upstream-mode kubelet`: API requests go to the dev cluster's API (with impersonation), pod
 * streaming requests go straight to its kubelet listener — HTTPS that requires a client certificate —
 * at the kubelet's own paths with kube-apiserver's query rewrite. kubectl 1.27 (SPDY passthrough) and
 * 1.33 (WebSocket) exec, cp and port-forward; a kubelet certificate from the wrong CA fails closed.
 *
 * Both kinds of node, as kube-apiserver ≥ 1.36 tells them apart (issue 32, handlers/stream-path.ts): a
 * 1.36 kubelet declares `ExtendWebSocketsToKubelet`, so kubectl 1.33's v5 and port-forward tunnel pass
 * through to it (`proxied_to_kubelet`, counted by the kubelet too); a 1.35 kubelet does not, so the
 * proxy translates v5 and unwraps the tunnel to SPDY (`translated_at_apiserver`, `tunneled_at_apiserver`).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { downloadDigest, startBytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary } from '../helpers/kubectl.js';
import { counterValue } from '../helpers/metrics.js';
import { deterministicBytes } from '../helpers/random-data.js';
import { PROXY_USER, startSecurityFixture, type SecurityFixture } from './security-fixture.js';

const skipReason = kubectlE2eSkipReason();
const TRANSLATOR = 'apiserver_stream_translator_requests_total';
const TUNNEL = 'apiserver_stream_tunnel_requests_total';
const WEBSOCKET_REQUESTS = 'apiserver_websocket_streaming_requests_total';

/** A node whose kubelet takes WebSockets itself, and one that does not. */
const NODES = [
  { kubeletVersion: '1.36', declares: true },
  { kubeletVersion: '1.35', declares: false },
] as const;

describe.skipIf(skipReason !== undefined).each(NODES)('kubelet upstream mode, kubelet $kubeletVersion', ({ kubeletVersion, declares }) => {
  let f: SecurityFixture;
  const local = mkdtempSync(join(tmpdir(), 'ksp-kubelet-cp-'));
  beforeAll(async () => {
    f = await startSecurityFixture({ authn: 'impersonate', upstreamMode: 'kubelet', clusterVersions: { kubeletVersion } });
  });
  /** WebSocket sessions the dev cluster's kubelet served itself (`kubelet_websocket_streaming_requests_total`). */
  const kubeletWebSockets = (subresource: string): number => counterValue(f.cluster.metrics.kubelet.exposition(), 'kubelet_websocket_streaming_requests_total', { subresource });
  afterAll(async () => {
    await f?.close();
  });

  for (const version of ['1.27', '1.33'] as const) {
    it(`kubectl ${version} execs and copies both ways through the kubelet endpoint over mutual TLS`, async () => {
      const bin = findKubectl(version);
      const kubeconfig = f.kubeconfig('alice');
      const seen = f.cluster.requests.length;
      const translatedBefore = await f.metric(TRANSLATOR, { code: '200' });
      const wsBefore = {
        proxied: await f.metric(WEBSOCKET_REQUESTS, { subresource: 'exec', proxy_type: 'proxied_to_kubelet' }),
        translated: await f.metric(WEBSOCKET_REQUESTS, { subresource: 'exec', proxy_type: 'translated_at_apiserver' }),
        atKubelet: kubeletWebSockets('exec'),
      };

      const r = await runKubectl(bin, ['exec', 'demo', '--', 'sh', '-c', 'echo out; echo err >&2; exit 3'], { kubeconfig, timeoutMs: 30_000 });
      expect(r.code, summary(r)).toBe(3);
      expect(r.stdout.toString()).toBe('out\n');
      expect(r.stderr).toContain('err\n');

      const payload = deterministicBytes(2_000_000, version === '1.27' ? 27 : 33);
      const src = join(local, `up-${version}.bin`);
      writeFileSync(src, payload);
      const up = await runKubectl(bin, ['cp', src, `demo:up-${version}.bin`], { kubeconfig, timeoutMs: 60_000, cwd: local });
      expect(up.code, summary(up)).toBe(0);
      const down = await runKubectl(bin, ['cp', `demo:up-${version}.bin`, `down-${version}.bin`], { kubeconfig, timeoutMs: 60_000, cwd: local });
      expect(down.code, summary(down)).toBe(0);
      expect(readFileSync(join(local, `down-${version}.bin`)).equals(payload)).toBe(true);

      const kubelet = f.cluster.requests.slice(seen).filter((q) => q.listener === 'kubelet');
      // exec, cp up (test -d probe + tar xmf), cp down (tar cf)
      expect(kubelet).toHaveLength(4);
      for (const q of kubelet) {
        expect(q.url).toMatch(/^\/exec\/default\/demo\/demo\?/);
        expect(q.clientCertSubject).toBe(`CN=${PROXY_USER}`);
        expect(q.headers.authorization).toBeUndefined();
        expect(q.headers['impersonate-user']).toBeUndefined();
      }
      expect(kubelet[0]!.url).toBe('/exec/default/demo/demo?output=1&error=1&command=sh&command=-c&command=echo+out%3B+echo+err+%3E%262%3B+exit+3');
      // Nothing streaming reached the API listener.
      expect(f.cluster.requests.slice(seen).filter((q) => q.listener === 'api' && q.upgrade)).toHaveLength(0);
      // Which way kubectl 1.33's four WebSocket sessions went (kubectl 1.27 speaks SPDY: none).
      const websockets = version === '1.33' ? 4 : 0;
      expect({
        proxied: (await f.metric(WEBSOCKET_REQUESTS, { subresource: 'exec', proxy_type: 'proxied_to_kubelet' })) - wsBefore.proxied,
        translated: (await f.metric(WEBSOCKET_REQUESTS, { subresource: 'exec', proxy_type: 'translated_at_apiserver' })) - wsBefore.translated,
        atKubelet: kubeletWebSockets('exec') - wsBefore.atKubelet,
      }).toEqual(declares ? { proxied: websockets, translated: 0, atKubelet: websockets } : { proxied: 0, translated: websockets, atKubelet: 0 });
      // The translator counts a session when its WebSocket is closed, which may be just after kubectl exited.
      await vi.waitFor(
        async () => {
          const all = (await f.proxy.app.inject({ method: 'GET', url: '/metrics' })).body.split('\n').filter((l) => l.startsWith(TRANSLATOR));
          // `kubectl cp pod:… local` may exit once the archive ended, before its Status: counted 500 (client gone).
          const total = (await f.metric(TRANSLATOR, { code: '200' })) + Math.min(await f.metric(TRANSLATOR, { code: '500' }), 1);
          expect(total, `${all.join('\n')}\n${f.failedSessions()}`).toBe(translatedBefore + (declares ? 0 : websockets));
        },
        { timeout: 5_000 },
      );
    });
  }

  for (const version of ['1.27', '1.33'] as const) {
    it(`kubectl ${version} port-forwards through the kubelet's /portForward endpoint`, async () => {
      const bytes = await startBytesServer();
      const seen = f.cluster.requests.length;
      const wsBefore = {
        proxied: await f.metric(WEBSOCKET_REQUESTS, { subresource: 'portforward', proxy_type: 'proxied_to_kubelet' }),
        tunneled: await f.metric(WEBSOCKET_REQUESTS, { subresource: 'portforward', proxy_type: 'tunneled_at_apiserver' }),
        atKubelet: kubeletWebSockets('portforward'),
        tunnel: await f.metric(TUNNEL, { code: '101' }),
      };
      const pf = startKubectl(findKubectl(version), ['port-forward', 'pod/demo', `:${bytes.port}`], { kubeconfig: f.kubeconfig('alice') });
      try {
        const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytes.port}\\b`), 30_000);
        const got = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/3000000?seed=9`);
        expect({ sha256: got.sha256, byteLength: got.byteLength }).toEqual(bytes.expected(3_000_000, 9));
      } finally {
        await pf.stop('SIGINT', 10_000);
        await bytes.close();
      }
      const kubelet = f.cluster.requests.slice(seen).filter((q) => q.listener === 'kubelet');
      expect(kubelet.map((q) => q.url)).toEqual(['/portForward/default/demo']);
      expect(kubelet[0]!.clientCertSubject).toBe(`CN=${PROXY_USER}`);
      // kubectl 1.33 port-forwards over the tunnel (1.27 over SPDY): passed to a declaring kubelet, else unwrapped here.
      const websockets = version === '1.33' ? 1 : 0;
      expect({
        proxied: (await f.metric(WEBSOCKET_REQUESTS, { subresource: 'portforward', proxy_type: 'proxied_to_kubelet' })) - wsBefore.proxied,
        tunneled: (await f.metric(WEBSOCKET_REQUESTS, { subresource: 'portforward', proxy_type: 'tunneled_at_apiserver' })) - wsBefore.tunneled,
        atKubelet: kubeletWebSockets('portforward') - wsBefore.atKubelet,
      }).toEqual(declares ? { proxied: websockets, tunneled: 0, atKubelet: websockets } : { proxied: 0, tunneled: websockets, atKubelet: 0 });
      await vi.waitFor(async () => expect(await f.metric(TUNNEL, { code: '101' })).toBe(wsBefore.tunnel + (declares ? 0 : websockets)), { timeout: 5_000 });
    });
  }

  it('a pod that does not exist is a 404 before any upgrade', async () => {
    const r = await runKubectl(findKubectl('1.27'), ['exec', 'nope', '--', 'true'], { kubeconfig: f.kubeconfig('admin'), timeoutMs: 30_000 });
    expect(r.code, summary(r)).not.toBe(0);
    expect(r.stderr).toContain('pods "nope" not found');
  });
});

describe.skipIf(skipReason !== undefined)('kubelet upstream mode with the wrong kubelet CA', () => {
  let f: SecurityFixture;
  beforeAll(async () => {
    f = await startSecurityFixture({ authn: 'impersonate', upstreamMode: 'kubelet', wrongKubeletCa: true });
  });
  afterAll(async () => {
    await f?.close();
  });

  it('fails closed with a clear error and runs nothing', async () => {
    for (const version of ['1.27', '1.33'] as const) {
      const seen = f.cluster.requests.length;
      const r = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'echo', 'ran'], { kubeconfig: f.kubeconfig('alice'), timeoutMs: 30_000 });
      expect(r.code, summary(r)).not.toBe(0);
      expect(r.stdout.toString()).toBe('');
      expect(r.stderr).toMatch(/error dialing backend: .*(self.signed|unable to verify|certificate)/i);
      expect(f.cluster.requests.slice(seen).filter((q) => q.listener === 'kubelet')).toHaveLength(0);
    }
  });
});
