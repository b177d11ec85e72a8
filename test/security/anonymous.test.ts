/**
 * Anonymous requests through the proxy end to end (issue 22: `AuthenticationConfiguration.anonymous`):
 * `serve --authn impersonate --authentication-config FILE` with `anonymous.enabled` and two path
 * conditions, in front of the TLS dev cluster. The anonymous calls are plain HTTPS and WebSocket
 * requests: kubectl with a kubeconfig user that has no credentials prompts for a user name (client-go's
 * interactive loader) and ends `error: EOF` without a terminal. kubectl 1.33 is the caller with a wrong
 * token.
 * - no credentials on a listed path: the upstream sees the proxy's token and
 *   `Impersonate-User: system:anonymous`, `Impersonate-Group: system:unauthenticated`, and its policy
 *   decides (here it allows `get /version` to `system:unauthenticated`);
 * - no credentials elsewhere: 401 at the proxy, nothing upstream;
 * - a wrong token or a certificate the client CA did not issue on a listed path: 401, never anonymous;
 * - an anonymous exec on a listed path is authorized like any caller: the SubjectAccessReview for
 *   `system:anonymous` says no, 403 before any upgrade.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { request, startSecurityFixture, USERS, webSocketGetExec, type SecurityFixture } from './security-fixture.js';

const skip = kubectlE2eSkipReason();
const EXEC_PATH = '/api/v1/namespaces/default/pods/demo/exec';

describe.skipIf(skip !== undefined)('anonymous requests (AuthenticationConfiguration.anonymous) through the proxy', () => {
  let f: SecurityFixture;
  const k127 = findKubectl('1.27');
  const k133 = findKubectl('1.33');
  const upgradesSince = (seen: number) => f.cluster.requests.slice(seen).filter((r) => r.upgrade);

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ksp-anonymous-'));
    writeFileSync(
      join(dir, 'auth.yaml'),
      `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
anonymous:
  enabled: true
  conditions:
  - path: /version
  - path: ${EXEC_PATH}
`,
    );
    f = await startSecurityFixture({
      authn: 'impersonate',
      clientCerts: true,
      // kube-apiserver's system:public-info-viewer, for /version only.
      extraPolicyRules: [{ groups: ['system:unauthenticated'], verbs: ['get'], nonResourceURLs: ['/version'] }],
      serveFlags: { authenticationConfig: join(dir, 'auth.yaml') },
    });
  });
  afterAll(async () => {
    await f?.close();
  });

  it('no credentials on a listed path: the upstream gets system:anonymous in system:unauthenticated on the proxy token, and allows it', async () => {
    const seen = f.cluster.requests.length;
    const r = await request(f, '/version?timeout=32s', {});
    expect(r.status, r.body).toBe(200);
    expect(JSON.parse(r.body)).toHaveProperty('gitVersion');
    const upstream = f.cluster.requests.slice(seen).filter((q) => q.url.startsWith('/version'));
    expect(upstream).toHaveLength(1);
    expect(upstream[0]!.headers.authorization).toBe(`Bearer ${USERS.proxy.token}`);
    expect(upstream[0]!.headers['impersonate-user']).toBe('system:anonymous');
    expect(upstream[0]!.headers['impersonate-group']).toBe('system:unauthenticated');
  });

  it('no credentials on any other path: 401 Status at the proxy, nothing upstream', async () => {
    const seen = f.cluster.requests.length;
    for (const path of ['/api/v1/namespaces/default/pods', '/version/', '/versionx', `${EXEC_PATH}/x`]) {
      const raw = await request(f, path, {});
      expect(raw.status, path).toBe(401);
      expect(JSON.parse(raw.body)).toMatchObject({ kind: 'Status', code: 401, reason: 'Unauthorized' });
    }
    expect(f.cluster.requests.slice(seen)).toHaveLength(0);
  });

  it('credentials that fail on a listed path stay 401: a wrong token (kubectl), a wrong WebSocket token, a certificate the client CA did not issue', async () => {
    const wrong = await runKubectl(k133, ['get', '--raw', '/version'], { kubeconfig: f.kubeconfig('wrong'), timeoutMs: 30_000 });
    expect(wrong.code, summary(wrong)).not.toBe(0);
    expect(wrong.stderr).toMatch(/Unauthorized/);
    const seen = f.cluster.requests.length;
    const ws = await webSocketGetExec(f.proxy.url, 'not-a-valid-token', ['echo', 'pwned'], f.pki.ca.cert, 'subprotocol');
    expect(ws.status).toBe(401);
    expect(ws.output).toBe('');
    expect(upgradesSince(seen)).toHaveLength(0);
    const cert = await request(f, '/version', {}, f.frontProxyClient);
    expect(cert.status).toBe(401);
    const basic = await request(f, '/version', { Authorization: `Basic ${Buffer.from('alice:pw').toString('base64')}` });
    expect(basic.status, 'another scheme is no credential (kube-apiserver): anonymous').toBe(200);
  });

  it('an anonymous exec on a listed path is reviewed like any caller: 403 for system:anonymous before any upgrade, SPDY and WebSocket', async () => {
    const seen = f.cluster.requests.length;
    const spdy = await request(f, `${EXEC_PATH}?command=echo&command=pwned&stdout=true`, { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'v4.channel.k8s.io' });
    expect(spdy.status).toBe(403);
    expect(JSON.parse(spdy.body).message).toContain('User "system:anonymous" cannot create resource "pods/exec"');
    const ws = await webSocketGetExec(f.proxy.url, '', ['echo', 'pwned'], f.pki.ca.cert, 'none');
    expect(ws.status).toBe(403);
    expect(ws.output).toBe('');
    expect(upgradesSince(seen)).toHaveLength(0);
  });

  it('kubectl 1.27 and 1.33 with a token still exec as themselves beside anonymous (SPDY and WebSocket)', async () => {
    for (const bin of [k127, k133]) {
      const r = await runKubectl(bin, ['exec', 'demo', '--', 'echo', 'hello'], { kubeconfig: f.kubeconfig('alice'), timeoutMs: 30_000 });
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toBe('hello\n');
    }
  });
});
