/**
 * The dev cluster with TLS, static token authentication, a policy file, impersonation and the
 * review APIs, over real HTTPS on loopback: raw requests (exact status codes and bodies),
 * @kubernetes/client-node, and kubectl.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { connect } from 'node:tls';
import { AuthenticationV1Api, AuthorizationV1Api, CoreV1Api, Exec, KubeConfig, type V1Status } from '@kubernetes/client-node';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../../dev/kubeconfig.js';
import { createTestPki, type TestPki } from '../../helpers/certs.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl } from '../../helpers/kubectl.js';

const UNAUTHORIZED =
  '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}';

const TOKENS = [
  't-admin,admin,uid-admin,"admins"',
  't-alice,alice,uid-alice,"devs,team a"',
  't-bob,bob,uid-bob',
  't-getter,getter,uid-getter',
  't-proxy,proxy,uid-proxy',
  't-limited,limited,uid-limited',
].join('\n');

const POLICY = {
  rules: [
    { groups: ['admins'], verbs: ['*'], resources: ['*'] },
    { groups: ['devs'], verbs: ['get', 'list', 'watch', 'create'], resources: ['pods', 'pods/exec', 'pods/attach', 'pods/portforward', 'pods/log'], namespaces: ['default'] },
    { users: ['getter'], verbs: ['get', 'list'], resources: ['pods', 'pods/exec'], namespaces: ['default'] },
    { users: ['proxy'], verbs: ['impersonate'], resources: ['users', 'groups', 'userextras/scopes', 'uids'] },
    { users: ['proxy'], verbs: ['create'], resources: ['tokenreviews', 'subjectaccessreviews'] },
    { users: ['limited'], verbs: ['impersonate'], resources: ['users'], names: ['alice'] },
  ],
};

let dir: string;
let pki: TestPki;
let cluster: DevCluster;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dev-cluster-auth-'));
  pki = await createTestPki(dir);
  writeFileSync(join(dir, 'tokens.csv'), TOKENS);
  writeFileSync(join(dir, 'policy.json'), JSON.stringify(POLICY));
  cluster = await startDevCluster({
    tls: { cert: pki.server.cert, key: pki.server.key },
    tokenAuthFile: join(dir, 'tokens.csv'),
    authorizationPolicyFile: join(dir, 'policy.json'),
  });
});
afterAll(async () => {
  await cluster?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  code: number;
  type: string | undefined;
  body: string;
}

/** One HTTPS request to the cluster, trusting the test CA. */
function call(method: string, path: string, headers: Record<string, string | string[]> = {}, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(cluster.url + path, { method, headers, ca: pki.ca.cert }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, type: res.headers['content-type'], body: text }));
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}
const bearer = (token: string): Record<string, string> => ({ Authorization: `Bearer ${token}` });

/** Send a raw upgrade request over TLS and return everything the server wrote before closing. */
function rawUpgrade(lines: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const url = new URL(cluster.url);
    const socket = connect({ host: url.hostname, port: Number(url.port), ca: pki.ca.cert, servername: 'localhost' }, () => {
      socket.write([...lines, `Host: ${url.host}`, '', ''].join('\r\n'));
    });
    let text = '';
    socket.setEncoding('utf8').on('data', (c: string) => (text += c));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

function kubeConfigFor(token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'dev', server: cluster.url, caData: pki.ca.cert.toString('base64') }],
    users: [{ name: 'u', token }],
    contexts: [{ name: 'dev', cluster: 'dev', user: 'u' }],
    currentContext: 'dev',
  });
  return kc;
}

/** Requests recorded since `from` for `path`. */
const recorded = (from: number, pathPrefix: string) => cluster.requests.slice(from).filter((r) => r.url.startsWith(pathPrefix));

describe('authentication', () => {
  it('serves https', () => {
    expect(cluster.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it.each(['/version', '/api', '/apis', '/api/v1/namespaces/default/pods', '/nope'])('answers %s without a token with the exact 401', async (path) => {
    const r = await call('GET', path);
    expect(r).toEqual({ code: 401, type: 'application/json', body: UNAUTHORIZED });
  });

  it('answers an unknown token and a non-bearer scheme with 401', async () => {
    expect((await call('GET', '/version', bearer('nope'))).code).toBe(401);
    expect((await call('GET', '/version', { Authorization: 'Basic YWxpY2U6dC1hbGljZQ==' })).code).toBe(401);
  });

  it('refuses an upgrade without a token on the raw socket', async () => {
    const text = await rawUpgrade([
      'POST /api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true HTTP/1.1',
      'Connection: Upgrade',
      'Upgrade: SPDY/3.1',
      'X-Stream-Protocol-Version: v4.channel.k8s.io',
    ]);
    const [head, body] = text.split('\r\n\r\n');
    expect(head!.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
    expect(head).toContain('\r\nContent-Type: application/json');
    expect(body).toBe(UNAUTHORIZED);
  });

  it('lets any authenticated user read discovery, and records the user', async () => {
    const from = cluster.requests.length;
    for (const path of ['/version', '/api', '/apis', '/api/v1', '/apis/authentication.k8s.io/v1']) {
      expect((await call('GET', path, bearer('t-bob'))).code, path).toBe(200);
    }
    expect(recorded(from, '/version')[0]).toMatchObject({ listener: 'api', method: 'GET', user: 'bob', groups: ['system:authenticated'] });
    expect(recorded(from, '/version')[0]!.headers.authorization).toBe('Bearer t-bob');
  });
});

describe('authorization', () => {
  it('answers a denied list with the apiserver message', async () => {
    const r = await call('GET', '/api/v1/namespaces/default/pods', bearer('t-bob'));
    expect(r.code).toBe(403);
    expect(JSON.parse(r.body)).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default"',
      reason: 'Forbidden',
      details: { kind: 'pods' },
      code: 403,
    });
  });

  it('lets a group member list pods and read one', async () => {
    expect((await call('GET', '/api/v1/namespaces/default/pods', bearer('t-alice'))).code).toBe(200);
    expect((await call('GET', '/api/v1/namespaces/default/pods/demo', bearer('t-alice'))).code).toBe(200);
    expect((await call('GET', '/api/v1/namespaces/kube-system/pods', bearer('t-alice'))).code).toBe(403);
  });

  it('refuses an exec upgrade with only get on pods/exec, for POST (SPDY) and GET (WebSocket)', async () => {
    const want = 'pods "demo" is forbidden: User "getter" cannot create resource "pods/exec" in API group "" in the namespace "default"';
    const spdy = await rawUpgrade([
      'POST /api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true HTTP/1.1',
      'Authorization: Bearer t-getter',
      'Connection: Upgrade',
      'Upgrade: SPDY/3.1',
      'X-Stream-Protocol-Version: v4.channel.k8s.io',
    ]);
    expect(spdy.split('\r\n')[0]).toBe('HTTP/1.1 403 Forbidden');
    expect(JSON.parse(spdy.split('\r\n\r\n')[1]!)).toMatchObject({ code: 403, reason: 'Forbidden', message: want, details: { name: 'demo', kind: 'pods' } });

    const ws = await rawUpgrade([
      'GET /api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true HTTP/1.1',
      'Authorization: Bearer t-getter',
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Version: 13',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Protocol: v4.channel.k8s.io',
    ]);
    expect(ws.split('\r\n')[0]).toBe('HTTP/1.1 403 Forbidden');
    expect(JSON.parse(ws.split('\r\n\r\n')[1]!).message).toBe(want);
  });

  it('runs a WebSocket exec (GET) for a user with get and create', async () => {
    const chunks: Buffer[] = [];
    const out = new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(Buffer.from(c)), cb()) });
    let status: V1Status | undefined;
    const ws = (await new Exec(kubeConfigFor('t-alice')).exec('default', 'demo', 'demo', ['echo', 'hello'], out, null, null, false, (s) => (status = s))) as unknown as WebSocket;
    await new Promise((r) => ws.once('close', r));
    expect(Buffer.concat(chunks).toString()).toBe('hello\n');
    expect(status).toEqual({ metadata: {}, status: 'Success' });
  });
});

describe('impersonation', () => {
  it('acts as the impersonated user; the headers arrive and the effective user is recorded', async () => {
    const from = cluster.requests.length;
    const r = await call('GET', '/api/v1/namespaces/default/pods?marker=imp1', { ...bearer('t-proxy'), 'Impersonate-User': 'alice', 'Impersonate-Group': ['devs', 'extra'] });
    expect(r.code).toBe(200);
    const [entry] = recorded(from, '/api/v1/namespaces/default/pods?marker=imp1');
    expect(entry).toMatchObject({ user: 'alice', groups: ['devs', 'extra', 'system:authenticated'] });
    expect(entry!.headers['impersonate-user']).toBe('alice');
    expect(entry!.rawHeaders.filter((_, i, a) => i % 2 === 0 && /^impersonate-group$/i.test(a[i]!)).length).toBe(2);
  });

  it('authorizes the request as the impersonated user', async () => {
    const r = await call('GET', '/api/v1/nodes', { ...bearer('t-proxy'), 'Impersonate-User': 'alice' });
    expect(r.code).toBe(403);
    expect(JSON.parse(r.body).message).toBe('nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope');
  });

  it('refuses what the requester may not impersonate', async () => {
    const r = await call('GET', '/api/v1/namespaces/default/pods', { ...bearer('t-limited'), 'Impersonate-User': 'bob' });
    expect(r.code).toBe(403);
    expect(JSON.parse(r.body).message).toBe('users "bob" is forbidden: User "limited" cannot impersonate resource "users" in API group "" at the cluster scope');
    const extra = await call('GET', '/version', { ...bearer('t-limited'), 'Impersonate-User': 'alice', 'Impersonate-Extra-Scopes': 'view' });
    expect(JSON.parse(extra.body).message).toBe(
      'userextras.authentication.k8s.io "view" is forbidden: User "limited" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope',
    );
  });

  it('refuses groups without a user with 400', async () => {
    const r = await call('GET', '/version', { ...bearer('t-proxy'), 'Impersonate-Group': 'devs' });
    expect(r.code).toBe(400);
    expect(JSON.parse(r.body)).toMatchObject({ reason: 'BadRequest', message: 'requested [Group devs] without impersonating a user' });
  });

  it('impersonates on upgrades too', async () => {
    const text = await rawUpgrade([
      'POST /api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true HTTP/1.1',
      'Authorization: Bearer t-proxy',
      'Impersonate-User: getter',
      'Connection: Upgrade',
      'Upgrade: SPDY/3.1',
      'X-Stream-Protocol-Version: v4.channel.k8s.io',
    ]);
    expect(JSON.parse(text.split('\r\n\r\n')[1]!).message).toBe(
      'pods "demo" is forbidden: User "getter" cannot create resource "pods/exec" in API group "" in the namespace "default"',
    );
  });
});

describe('TokenReview and SubjectAccessReview', () => {
  it('appear in discovery', async () => {
    const groups = JSON.parse((await call('GET', '/apis', bearer('t-bob'))).body);
    expect(groups.groups.map((g: { name: string }) => g.name)).toEqual(['authentication.k8s.io', 'authorization.k8s.io', 'discovery.k8s.io']);
    const authn = JSON.parse((await call('GET', '/apis/authentication.k8s.io/v1', bearer('t-bob'))).body);
    expect(authn).toMatchObject({ kind: 'APIResourceList', groupVersion: 'authentication.k8s.io/v1', resources: [{ name: 'tokenreviews', kind: 'TokenReview', verbs: ['create'] }, { name: 'selfsubjectreviews', kind: 'SelfSubjectReview', verbs: ['create'] }] });
    const group = JSON.parse((await call('GET', '/apis/authorization.k8s.io', bearer('t-bob'))).body);
    expect(group).toMatchObject({ kind: 'APIGroup', name: 'authorization.k8s.io', preferredVersion: { groupVersion: 'authorization.k8s.io/v1', version: 'v1' } });
  });

  it('work through @kubernetes/client-node', async () => {
    const kc = kubeConfigFor('t-proxy');
    const review = await kc.makeApiClient(AuthenticationV1Api).createTokenReview({ body: { spec: { token: 't-alice' } } });
    expect(review.status).toMatchObject({ authenticated: true, user: { username: 'alice', uid: 'uid-alice', groups: ['devs', 'team a', 'system:authenticated'] } });
    const bad = await kc.makeApiClient(AuthenticationV1Api).createTokenReview({ body: { spec: { token: 'nope' } } });
    expect(bad.status?.authenticated).toBeFalsy();

    const authz = kc.makeApiClient(AuthorizationV1Api);
    const sar = (user: string, groups: string[], verb: string) =>
      authz.createSubjectAccessReview({
        body: { spec: { user, groups, resourceAttributes: { namespace: 'default', verb, resource: 'pods', subresource: 'exec', name: 'demo' } } },
      });
    expect((await sar('alice', ['devs'], 'create')).status).toMatchObject({ allowed: true });
    expect((await sar('getter', [], 'create')).status).toEqual({ allowed: false });
    expect((await sar('getter', [], 'get')).status).toMatchObject({ allowed: true });
  });

  it('need create on the review resources', async () => {
    const r = await call('POST', '/apis/authentication.k8s.io/v1/tokenreviews', { ...bearer('t-alice'), 'Content-Type': 'application/json' }, { spec: { token: 't-bob' } });
    expect(r.code).toBe(403);
    expect(JSON.parse(r.body).message).toBe(
      'tokenreviews.authentication.k8s.io is forbidden: User "alice" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope',
    );
  });

  it('lists pods for client-node as a user with rights, and refuses one without', async () => {
    const pods = await kubeConfigFor('t-alice').makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'default' });
    expect(pods.items.map((p) => p.metadata?.name)).toContain('demo');
    expect(pods.items[0]!.spec?.nodeName).toBe('dev-node');
    await expect(kubeConfigFor('t-bob').makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'default' })).rejects.toMatchObject({ code: 403 });
  });
});

const skipKubectl = kubectlE2eSkipReason();
describe.skipIf(skipKubectl !== undefined)('kubectl with a token over TLS', () => {
  const kubeconfigFor = (token: string): string => {
    const path = join(dir, `kubeconfig-${token}`);
    writeKubeconfig(path, { server: cluster.url, name: 'dev', token, caPem: pki.ca.cert.toString() });
    return path;
  };

  it('kubectl 1.33 get pods and exec (WebSocket falls back to SPDY) as an allowed user', async () => {
    const kubectl = findKubectl('1.33');
    const kubeconfig = kubeconfigFor('t-alice');
    const get = await runKubectl(kubectl, ['get', 'pods', '-o', 'name'], { kubeconfig, timeoutMs: 30_000 });
    expect(get.stderr).toBe('');
    expect(get.stdout.toString()).toContain('pod/demo\n');
    const exec = await runKubectl(kubectl, ['exec', '-i', 'demo', '--', 'cat'], { kubeconfig, timeoutMs: 30_000, stdin: Buffer.from('via kubectl\n') });
    expect(exec.code, exec.stderr).toBe(0);
    expect(exec.stdout.toString()).toBe('via kubectl\n');
  });

  it('kubectl shows the Forbidden message', async () => {
    const kubectl = findKubectl('1.33');
    const get = await runKubectl(kubectl, ['get', 'pods'], { kubeconfig: kubeconfigFor('t-bob'), timeoutMs: 30_000 });
    expect(get.code).toBe(1);
    expect(get.stderr).toContain('Error from server (Forbidden): pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default"');
    const exec = await runKubectl(kubectl, ['exec', 'demo', '--', 'true'], { kubeconfig: kubeconfigFor('t-getter'), timeoutMs: 30_000 });
    expect(exec.code).toBe(1);
    expect(exec.stderr).toContain('cannot create resource "pods/exec" in API group "" in the namespace "default"');
  });

  it('kubectl with an unknown token gets Unauthorized', async () => {
    // (Without any credentials kubectl would prompt for a basic-auth user on stdin instead.)
    const kubectl = findKubectl('1.33');
    const get = await runKubectl(kubectl, ['get', 'pods'], { kubeconfig: kubeconfigFor('t-unknown'), timeoutMs: 30_000 });
    expect(get.code).toBe(1);
    expect(get.stderr).toContain('error: You must be logged in to the server (Unauthorized)');
  });
});

