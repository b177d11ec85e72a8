/**
 * The proxy's token file ending in a newline (`echo token > file`, `kubectl create secret
 * --from-file`): every use of the proxy's credentials sends the trimmed token — TokenReview and
 * SubjectAccessReview (client-node), the impersonated upstream calls, and in kubelet mode the pod and
 * node lookups. Without the trim Node refuses `Bearer token\n` as a header value and every caller
 * gets 401. (Passthrough never uses the proxy's credentials for callers; the unit test
 * `test/src/token-file.test.ts` covers its upstream headers.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { PROXY_USER, startSecurityFixture, USERS, webSocketGetExec, type SecurityFixture } from './security-fixture.js';

const skipReason = kubectlE2eSkipReason();

const cases = [
  { ending: '\n', name: 'LF', upstreamMode: 'apiserver' },
  { ending: '\r\n', name: 'CRLF', upstreamMode: 'kubelet' },
] as const;

describe.skipIf(skipReason !== undefined).each(cases)('a proxy token file ending in $name ($upstreamMode mode, impersonate)', ({ ending, upstreamMode }) => {
  let f: SecurityFixture;
  beforeAll(async () => {
    f = await startSecurityFixture({ authn: 'impersonate', upstreamMode, proxyTokenEnding: ending });
  });
  afterAll(async () => {
    await f?.close();
  });

  it('kubectl 1.27 (SPDY) and 1.33 (translated) exec; TokenReview, SubjectAccessReview and the upstream calls carry the trimmed token', async () => {
    const seen = f.cluster.requests.length;
    for (const version of ['1.27', '1.33'] as const) {
      const r = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'echo', 'hello'], { kubeconfig: f.kubeconfig('alice'), timeoutMs: 30_000 });
      expect(r.code, `${version}: ${summary(r)}\n${f.logs.filter((l) => l.includes('failed')).join('')}`).toBe(0);
      expect(r.stdout.toString()).toBe('hello\n');
    }
    const api = f.cluster.requests.slice(seen).filter((q) => q.listener !== 'kubelet');
    const paths = api.map((q) => q.url.split('?')[0]);
    expect(paths).toContain('/apis/authentication.k8s.io/v1/tokenreviews');
    expect(paths).toContain('/apis/authorization.k8s.io/v1/subjectaccessreviews');
    if (upstreamMode === 'kubelet') expect(paths).toContain('/api/v1/namespaces/default/pods/demo');
    for (const q of api) {
      expect(q.headers.authorization, q.url).toBe(`Bearer ${USERS.proxy.token}`);
      // The proxy's own calls arrive as the proxy; the callers' as the user it impersonates.
      expect(q.user, q.url).toBe(q.headers['impersonate-user'] !== undefined ? 'alice' : PROXY_USER);
    }
  });

  it('a browser-style client with its token in the subprotocol list execs too', async () => {
    const r = await webSocketGetExec(f.proxy.url, USERS.alice.token, ['echo', 'browser'], f.pki.ca.cert, 'subprotocol');
    expect(r).toMatchObject({ status: 101, output: 'browser\n' });
  });
});
