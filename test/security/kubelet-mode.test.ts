/**
 * `--upstream-mode kubelet`: API requests go to the dev cluster's API (with impersonation), pod
 * streaming requests go straight to its kubelet listener — HTTPS that requires a client certificate —
 * at the kubelet's own paths with kube-apiserver's query rewrite. kubectl 1.27 (SPDY passthrough) and
 * 1.33 (WebSocket, translated) exec and cp; a kubelet certificate from the wrong CA fails closed.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { downloadDigest, startBytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary } from '../helpers/kubectl.js';
import { deterministicBytes } from '../helpers/random-data.js';
import { PROXY_USER, startSecurityFixture, type SecurityFixture } from './security-fixture.js';

const skipReason = kubectlE2eSkipReason();
const TRANSLATOR = 'apiserver_stream_translator_requests_total';

describe.skipIf(skipReason !== undefined)('kubelet upstream mode', () => {
  let f: SecurityFixture;
  const local = mkdtempSync(join(tmpdir(), 'ksp-kubelet-cp-'));
  beforeAll(async () => {
    f = await startSecurityFixture({ authn: 'impersonate', upstreamMode: 'kubelet' });
  });
  afterAll(async () => {
    await f?.close();
  });

  for (const version of ['1.27', '1.33'] as const) {
    it(`kubectl ${version} execs and copies both ways through the kubelet endpoint over mutual TLS`, async () => {
      const bin = findKubectl(version);
      const kubeconfig = f.kubeconfig('alice');
      const seen = f.cluster.requests.length;
      const translatedBefore = await f.metric(TRANSLATOR, { code: '200' });

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
      // The translator counts a session when its WebSocket is closed, which may be just after kubectl exited.
      await vi.waitFor(
        async () => {
          const all = (await f.proxy.app.inject({ method: 'GET', url: '/metrics' })).body.split('\n').filter((l) => l.startsWith(TRANSLATOR));
          // `kubectl cp pod:… local` may exit once the archive ended, before its Status: counted 500 (client gone).
          const total = (await f.metric(TRANSLATOR, { code: '200' })) + Math.min(await f.metric(TRANSLATOR, { code: '500' }), 1);
          expect(total, `${all.join('\n')}\n${f.failedSessions()}`).toBe(translatedBefore + (version === '1.33' ? 4 : 0));
        },
        { timeout: 5_000 },
      );
    });
  }

  for (const version of ['1.27', '1.33'] as const) {
    it(`kubectl ${version} port-forwards through the kubelet's /portForward endpoint`, async () => {
      const bytes = await startBytesServer();
      const seen = f.cluster.requests.length;
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
