/**
 * SelfSubjectReview in the dev cluster (`kubectl auth whoami`): authentication.k8s.io v1, v1beta1
 * and v1alpha1, JSON and kubectl 1.33's protobuf, answering the requesting user — the impersonated
 * one when the request impersonates (what the proxy's `--authn impersonate` sends). Real kubectl
 * 1.27 (posts v1beta1) and 1.33 (posts v1 as protobuf) over HTTPS with a token.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { selfSubjectReview } from '../../../dev/cluster/self-reviews.js';
import { writeKubeconfig } from '../../../dev/kubeconfig.js';
import { createTestPki, type TestPki } from '../../helpers/certs.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../../helpers/kubectl.js';

let dir: string;
let pki: TestPki;
let cluster: DevCluster;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dev-cluster-whoami-'));
  pki = await createTestPki(dir);
  writeFileSync(join(dir, 'tokens.csv'), ['t-alice,alice,uid-alice,"devs"', 't-proxy,proxy,uid-proxy'].join('\n'));
  writeFileSync(
    join(dir, 'policy.json'),
    JSON.stringify({ rules: [{ users: ['proxy'], verbs: ['impersonate'], resources: ['users', 'groups', 'uids', 'userextras/authentication.kubernetes.io/credential-id'] }] }),
  );
  cluster = await startDevCluster({ tls: { cert: pki.server.cert, key: pki.server.key }, tokenAuthFile: join(dir, 'tokens.csv'), authorizationPolicyFile: join(dir, 'policy.json') });
});
afterAll(async () => {
  await cluster?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** POST an empty SelfSubjectReview over HTTPS (trusting the test CA). */
function postReview(path: string, headers: Record<string, string>): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${cluster.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, ca: pki.ca.cert }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(body) }));
    });
    req.on('error', reject);
    req.end('{}');
  });
}

describe('SelfSubjectReview', () => {
  it('answers the user, in the version asked for; refuses another kind', () => {
    const user = { name: 'alice@example.com', groups: ['oidc:devs', 'system:authenticated'], extra: { 'authentication.kubernetes.io/credential-id': ['JTI=1'] } };
    expect(selfSubjectReview({ kind: 'SelfSubjectReview', apiVersion: 'authentication.k8s.io/v1beta1' }, user, 'v1beta1')).toEqual({
      code: 201,
      body: {
        kind: 'SelfSubjectReview',
        apiVersion: 'authentication.k8s.io/v1beta1',
        metadata: { creationTimestamp: null },
        status: { userInfo: { username: 'alice@example.com', groups: ['oidc:devs', 'system:authenticated'], extra: { 'authentication.kubernetes.io/credential-id': ['JTI=1'] } } },
      },
    });
    expect(selfSubjectReview({ kind: 'TokenReview' }, user, 'v1').code).toBe(400);
    expect(selfSubjectReview({ apiVersion: 'authentication.k8s.io/v1' }, user, 'v1alpha1').code).toBe(400);
  });
});

describe.skipIf(kubectlE2eSkipReason() !== undefined)('SelfSubjectReview over HTTPS', () => {
  const kubeconfig = (name: string, token: string): string => {
    const path = join(dir, `kubeconfig-${name}`);
    writeKubeconfig(path, { server: cluster.url, name, token, caPem: pki.ca.cert.toString() });
    return path;
  };

  it.each(['1.27', '1.33'] as const)('kubectl %s auth whoami shows the token user and its groups', async (version) => {
    const seen = cluster.requests.length;
    const r = await runKubectl(findKubectl(version), ['auth', 'whoami', '-o', 'json'], { kubeconfig: kubeconfig('alice', 't-alice'), timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(0);
    const review = JSON.parse(r.stdout.toString());
    expect(review).toMatchObject({ kind: 'SelfSubjectReview', status: { userInfo: { username: 'alice', uid: 'uid-alice', groups: ['devs', 'system:authenticated'] } } });
    const posted = cluster.requests.slice(seen).filter((q) => q.url.includes('selfsubjectreviews')).map((q) => q.url);
    expect(posted).toEqual([version === '1.27' ? '/apis/authentication.k8s.io/v1beta1/selfsubjectreviews' : '/apis/authentication.k8s.io/v1/selfsubjectreviews']);
  });

  it('an impersonating request gets the impersonated user, groups and extra (what the proxy sends)', async () => {
    const r = await postReview('/apis/authentication.k8s.io/v1alpha1/selfsubjectreviews', {
      Authorization: 'Bearer t-proxy',
      'Impersonate-User': 'alice@example.com',
      'Impersonate-Group': 'oidc:devs',
      'Impersonate-Uid': 'u-1',
      'Impersonate-Extra-Authentication.kubernetes.io%2fcredential-id': 'JTI=7',
    });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
    expect(r.json).toMatchObject({ kind: 'SelfSubjectReview', apiVersion: 'authentication.k8s.io/v1alpha1' });
    expect(r.json.status.userInfo).toEqual({
      username: 'alice@example.com',
      uid: 'u-1',
      groups: ['oidc:devs', 'system:authenticated'],
      extra: { 'authentication.kubernetes.io/credential-id': ['JTI=7'] },
    });
    const table = await runKubectl(findKubectl('1.27'), ['auth', 'whoami', '--as', 'alice@example.com', '--as-group', 'oidc:devs'], { kubeconfig: kubeconfig('proxy', 't-proxy'), timeoutMs: 30_000 });
    expect(table.code, summary(table)).toBe(0);
    expect(table.stdout.toString()).toMatch(/Username\s+alice@example\.com\n/);
    expect(table.stdout.toString()).toMatch(/Groups\s+\[oidc:devs system:authenticated\]\n/);
  });

  it('without a token: 401, as every request of a cluster with token authentication', async () => {
    const r = await runKubectl(findKubectl('1.33'), ['auth', 'whoami'], { kubeconfig: kubeconfig('nobody', 'no-such-token'), timeoutMs: 30_000 });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('Unauthorized');
  });
});
