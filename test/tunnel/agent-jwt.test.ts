/**
 * One OIDC login, clusters behind agents (issue 22): the proxy verifies the JWT itself
 * (`--authentication-config`, proxy-wide) for every cluster, and each cluster behind its agent
 * (`agent --access-as impersonate`) authorizes that user with its own SubjectAccessReview: no
 * TokenReview is sent to any cluster for a JWT. Cluster `east` grants the OIDC group, `west` only
 * the OIDC user name, so each exec succeeding shows that cluster's review saw the OIDC identity;
 * `west` does not grant attach, and the 403 names the OIDC user. kubectl 1.27 (SPDY) and 1.33
 * (WebSocket v5, passed through to both clusters, which are modern: 1.36, issue 32); agents are
 * child processes (needs `npm run build`).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { createCa, createServerCert, type CertAndKey } from '../helpers/certs.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { authenticationConfigFor, startTestProvider, TEST_CLIENT_ID, type TestProvider } from '../helpers/oidc-provider.js';
import { startTunnelFixture, type TunnelFixture } from './tunnel-fixture.js';
import { moved, sumWays, waysOf, websocketWays } from './stream-ways.js';

const skipReason = kubectlE2eSkipReason();
const AGENT_USER = 'system:serviceaccount:kube-system:kube-stream-proxy-agent';
const ALICE = 'alice@example.com';

describe.skipIf(skipReason !== undefined)('a JWT identity through agents: one login, every cluster', () => {
  let idp: TestProvider;
  let fx: TunnelFixture;
  let pkiDir: string;
  let apiserverCa: CertAndKey;
  let token: string;
  const requestsTo = (cluster: string, path: string) => fx.clusters[cluster]!.requests.filter((r) => r.url.split('?')[0] === path);

  beforeAll(async () => {
    idp = await startTestProvider();
    pkiDir = mkdtempSync(join(tmpdir(), 'ksp-agent-jwt-'));
    apiserverCa = await createCa(pkiDir, 'apiserver CA', 'apiserver-ca');
    const serving = await createServerCert(pkiDir, apiserverCa, { stem: 'apiserver' });
    writeFileSync(join(pkiDir, 'auth.yaml'), authenticationConfigFor(idp));
    const secured = (grant: Record<string, unknown>) => (work: string) => {
      const name = `${Math.random().toString(36).slice(2)}`;
      writeFileSync(join(work, `users-${name}.csv`), `agent-sa-token,${AGENT_USER},a1,""\n`);
      writeFileSync(
        join(work, `policy-${name}.json`),
        JSON.stringify({
          rules: [
            { users: [AGENT_USER], verbs: ['create'], resources: ['tokenreviews', 'subjectaccessreviews'] },
            { users: [AGENT_USER], verbs: ['impersonate'], resources: ['users', 'groups', 'uids'] },
            grant,
          ],
        }),
      );
      return { tokenAuthFile: join(work, `users-${name}.csv`), authorizationPolicyFile: join(work, `policy-${name}.json`), tls: { cert: serving.cert, key: serving.key } };
    };
    fx = await startTunnelFixture(
      { east: ['gamma'], west: ['delta'] },
      {
        east: secured({ groups: ['oidc:developers'], verbs: ['get', 'list', 'watch', 'create'], resources: ['pods', 'pods/exec', 'pods/attach', 'namespaces'] }),
        west: secured({ users: [ALICE], verbs: ['get', 'list', 'watch', 'create'], resources: ['pods', 'pods/exec', 'namespaces'] }),
      },
      { tls: true, authn: 'impersonate', serveFlags: () => ({ authenticationConfig: join(pkiDir, 'auth.yaml') }) },
    );
    const saToken = join(fx.work, 'agent-sa.token');
    writeFileSync(saToken, 'agent-sa-token\n');
    for (const c of ['east', 'west']) {
      const agent = fx.startAgent(c, { args: ['--access-as', 'impersonate', '--upstream-ca-file', apiserverCa.certFile, '--upstream-token-file', saToken] });
      await agent.waitForOutput(/tunnel established/, 20_000);
    }
    token = await idp.mint({ email: ALICE, email_verified: true, groups: ['developers'], exp: Math.floor(Date.now() / 1000) + 3600 });
  }, 90_000);

  afterAll(async () => {
    await fx?.close();
    await idp?.close();
    if (pkiDir) rmSync(pkiDir, { recursive: true, force: true });
  });

  /** One kubeconfig, a context per cluster, the same ID token for both (one login). */
  const kubeconfig = (): string => {
    const path = join(fx.work, 'kubeconfig-oidc');
    writeKubeconfig(path, ['east', 'west'].map((c) => ({ server: `${fx.proxy.url}/clusters/${c}`, name: c, token, caPem: fx.ca!.toString('utf8') })));
    return path;
  };
  const kubectl = (version: '1.27' | '1.33', args: string[]) => runKubectl(findKubectl(version), args, { kubeconfig: kubeconfig(), timeoutMs: 60_000 });

  it.each(['1.27', '1.33'] as const)('kubectl %s: the same token execs in both clusters; each impersonates the OIDC user; no TokenReview anywhere', async (version) => {
    const waysBefore = await waysOf(fx);
    const sarsBefore = { east: requestsTo('east', '/apis/authorization.k8s.io/v1/subjectaccessreviews').length, west: requestsTo('west', '/apis/authorization.k8s.io/v1/subjectaccessreviews').length };
    for (const [cluster, pod] of [['east', 'gamma'], ['west', 'delta']] as const) {
      const seen = fx.clusters[cluster]!.requests.length;
      const r = await kubectl(version, ['--context', cluster, 'exec', pod, '--', 'echo', `hello ${cluster}`]);
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toBe(`hello ${cluster}\n`);
      const exec = fx.clusters[cluster]!.requests.slice(seen).find((q) => q.upgrade)!;
      expect(exec.headers.authorization).toBe('Bearer agent-sa-token');
      expect(exec.headers['impersonate-user']).toBe(ALICE);
      expect(exec.user).toBe(ALICE);
      expect(exec.groups).toEqual(['oidc:developers', 'system:authenticated']);
    }
    expect(requestsTo('east', '/apis/authorization.k8s.io/v1/subjectaccessreviews').length).toBeGreaterThan(sarsBefore.east);
    expect(requestsTo('west', '/apis/authorization.k8s.io/v1/subjectaccessreviews').length).toBeGreaterThan(sarsBefore.west);
    for (const c of ['east', 'west']) expect(requestsTo(c, '/apis/authentication.k8s.io/v1/tokenreviews')).toEqual([]);
    // 1.33's two sessions were passed through to each cluster's kubelet; 1.27's SPDY counts none.
    expect(moved(waysBefore, await waysOf(fx))).toEqual(version === '1.33' ? sumWays(websocketWays('modern', 'east', 'exec', 1), websocketWays('modern', 'west', 'exec', 1)) : {});
  });

  it('whoami in each cluster shows the OIDC user; west refuses attach with a 403 naming the OIDC user', async () => {
    for (const c of ['east', 'west']) {
      const r = await kubectl('1.33', ['--context', c, 'auth', 'whoami', '-o', 'json']);
      expect(r.code, summary(r)).toBe(0);
      expect(JSON.parse(r.stdout.toString()).status.userInfo).toEqual({ username: ALICE, groups: ['oidc:developers', 'system:authenticated'] });
    }
    const denied = await kubectl('1.33', ['--context', 'west', 'attach', '-i', 'delta']);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(`pods "delta" is forbidden: User "${ALICE}" cannot create resource "pods/attach" in API group "" in the namespace "default"`);
  });

  it('a JWT the proxy refuses never reaches a cluster (no TokenReview through the tunnel either)', async () => {
    const expired = await idp.mint({ email: ALICE, email_verified: true, aud: TEST_CLIENT_ID, exp: Math.floor(Date.now() / 1000) - 5 });
    const seen = { east: fx.clusters.east!.requests.length };
    const path = join(fx.work, 'kubeconfig-expired');
    writeKubeconfig(path, { server: `${fx.proxy.url}/clusters/east`, name: 'east', token: expired, caPem: fx.ca!.toString('utf8') });
    const r = await runKubectl(findKubectl('1.33'), ['get', 'pods'], { kubeconfig: path, timeoutMs: 30_000 });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('Unauthorized');
    expect(fx.clusters.east!.requests.slice(seen.east)).toEqual([]);
  });
});
