/**
 * `--authn impersonate`: the proxy authenticates callers (TokenReview against the dev cluster, client
 * certificates against --client-ca-file, front proxies against --requestheader-client-ca-file),
 * authorizes every pod streaming request with a SubjectAccessReview for `create` before any upgrade,
 * and calls the upstream with ITS token plus Impersonate-* for the verified user. Real kubectl over
 * SPDY (1.27) and WebSocket (1.33). The dev cluster plays kube-apiserver 1.36: it takes WebSocket v5
 * itself, but authorizes a WebSocket GET as `get` pods/exec and then `create`
 * (`AuthorizePodWebsocketUpgradeCreatePermission`), so alice (`create` only, what a SPDY POST needs)
 * is refused there with 403 and the proxy falls back to its translator (issue 32), while admin's v5
 * passes through.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { PROXY_USER, request, startSecurityFixture, USERS, webSocketGetExec, type SecurityFixture, type UserName } from './security-fixture.js';

const skipReason = kubectlE2eSkipReason();
const TRANSLATOR = 'apiserver_stream_translator_requests_total';
const WEBSOCKET_REQUESTS = 'apiserver_websocket_streaming_requests_total';
const FALLBACKS = 'kube_stream_proxy_upstream_streaming_fallbacks_total';
const EXEC_QUERY = '/api/v1/namespaces/default/pods/demo/exec?command=echo&command=hello&container=demo&stderr=true&stdout=true';

describe.skipIf(skipReason !== undefined)('impersonate authentication: the proxy decides, the upstream sees the verified user', () => {
  let f: SecurityFixture;
  const k127 = findKubectl('1.27');
  const k133 = findKubectl('1.33');
  beforeAll(async () => {
    f = await startSecurityFixture({ authn: 'impersonate', clientCerts: true });
  });
  afterAll(async () => {
    await f?.close();
  });

  const exec = (bin: string, user: UserName | 'anonymous' | 'wrong', extra: string[] = []) =>
    runKubectl(bin, [...extra, 'exec', 'demo', '--', 'echo', 'hello'], { kubeconfig: f.kubeconfig(user), timeoutMs: 30_000 });
  const upgradesSince = (seen: number) => f.cluster.requests.slice(seen).filter((r) => r.upgrade);

  // First in the file: once alice's v5 below has fallen back, the proxy remembers for 5 minutes that
  // this upstream took SPDY, and every v5 exec is translated at once (src/routing/upstream-streaming-memory.ts).
  it('a user allowed get and create on pods/exec execs over WebSocket v5 passed through, impersonated with the proxy token', async () => {
    const seen = f.cluster.requests.length;
    const passedBefore = await f.metric(WEBSOCKET_REQUESTS, { subresource: 'exec', proxy_type: 'proxied_to_upstream' });
    const translatedBefore = await f.metric(TRANSLATOR, { code: '200' });
    const r = await exec(k133, 'admin');
    expect(r.code, summary(r)).toBe(0);
    expect(r.stdout.toString()).toBe('hello\n');
    expect(await f.metric(WEBSOCKET_REQUESTS, { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(passedBefore + 1);
    expect(await f.metric(TRANSLATOR, { code: '200' })).toBe(translatedBefore);
    const upgrades = upgradesSince(seen);
    expect(upgrades.map((u) => `${u.method} ${u.url} ${u.headers.upgrade} ${u.headers['sec-websocket-protocol']}`)).toEqual([`GET ${EXEC_QUERY} websocket v5.channel.k8s.io`]);
    const arrived = f.cluster.requests.slice(seen);
    for (const a of arrived) {
      expect(a.headers.authorization).toBe(`Bearer ${USERS.proxy.token}`);
      if (a.url.startsWith('/apis/authentication.k8s.io') || a.url.startsWith('/apis/authorization.k8s.io')) continue;
      expect(a.headers['impersonate-user']).toBe('admin');
      expect(a.user).toBe('admin');
    }
    for (const a of arrived) expect(JSON.stringify(a.rawHeaders)).not.toContain(USERS.admin.token);
  });

  it('a valid token execs over SPDY and WebSocket; the upstream gets Impersonate-User and the proxy token, never the caller token', async () => {
    const seen = f.cluster.requests.length;
    const before = await f.metric(TRANSLATOR, { code: '200' });
    const fallbacksBefore = await f.metric(FALLBACKS, { from: 'websocket', to: 'spdy', code: '403' });
    for (const bin of [k127, k133]) {
      const r = await exec(bin, 'alice');
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toBe('hello\n');
    }
    // kubectl 1.33's v5 was asked first, refused by the upstream (alice has no `get` pods/exec), then
    // translated here: three upgrades upstream, every one with the proxy's token and alice impersonated.
    expect(await f.metric(TRANSLATOR, { code: '200' })).toBe(before + 1);
    expect(await f.metric(FALLBACKS, { from: 'websocket', to: 'spdy', code: '403' })).toBe(fallbacksBefore + 1);
    const arrived = f.cluster.requests.slice(seen);
    expect(upgradesSince(seen).map((r) => `${r.method} ${r.url} ${r.headers.upgrade} ${r.headers['sec-websocket-protocol'] ?? r.headers['x-stream-protocol-version']}`)).toEqual([
      `POST ${EXEC_QUERY} SPDY/3.1 v4.channel.k8s.io, v3.channel.k8s.io, v2.channel.k8s.io, channel.k8s.io`,
      `GET ${EXEC_QUERY} websocket v5.channel.k8s.io`,
      `POST ${EXEC_QUERY} SPDY/3.1 v4.channel.k8s.io, v3.channel.k8s.io, v2.channel.k8s.io, channel.k8s.io`,
    ]);
    for (const r of arrived) {
      expect(r.headers.authorization).toBe(`Bearer ${USERS.proxy.token}`);
      if (r.url.startsWith('/apis/authentication.k8s.io') || r.url.startsWith('/apis/authorization.k8s.io')) continue;
      expect(r.headers['impersonate-user']).toBe('alice');
      // One line per group, system:authenticated included (issue 31, finding 9).
      expect(r.rawHeaders.filter((_, i, a) => i % 2 === 0 && a[i]!.toLowerCase() === 'impersonate-group')).toHaveLength(2);
      expect(r.headers['impersonate-group']).toBe('devs, system:authenticated');
      expect(r.user).toBe('alice');
    }
    for (const r of arrived) expect(JSON.stringify(r.rawHeaders)).not.toContain(USERS.alice.token);
  });

  it('no token or a wrong one → 401 from the proxy; a token lacking create pods/exec → 403 before any upgrade, over SPDY and WebSocket', async () => {
    const seen = f.cluster.requests.length;
    for (const bin of [k127, k133]) {
      const wrong = await exec(bin, 'wrong');
      expect(wrong.code, summary(wrong)).not.toBe(0);
      expect(wrong.stderr).toMatch(/Unauthorized/);
      const anonymous = await exec(bin, 'anonymous');
      expect(anonymous.code, summary(anonymous)).not.toBe(0);
      const viewer = await exec(bin, 'viewer');
      expect(viewer.code, summary(viewer)).not.toBe(0);
      expect(viewer.stderr).toContain('pods "demo" is forbidden: User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "default"');
      expect(viewer.stdout.toString()).toBe('');
    }
    // Refused at the proxy: no upgrade request reached the upstream (kubectl 1.33's SPDY fallback included).
    expect(upgradesSince(seen)).toHaveLength(0);
    const raw = await request(f, '/api/v1/namespaces/default/pods', {});
    expect(raw.status).toBe(401);
    expect(JSON.parse(raw.body)).toMatchObject({ kind: 'Status', code: 401, reason: 'Unauthorized', message: 'Unauthorized' });
  });

  it('a get-only user cannot exec through a WebSocket GET: 403 at the handshake', async () => {
    const seen = f.cluster.requests.length;
    const r = await webSocketGetExec(f.proxy.url, USERS.viewer.token, ['echo', 'pwned'], f.pki.ca.cert);
    expect(r.status).toBe(403);
    expect(r.output).toBe('');
    expect(upgradesSince(seen)).toHaveLength(0);
    const allowed = await webSocketGetExec(f.proxy.url, USERS.alice.token, ['echo', 'allowed'], f.pki.ca.cert);
    expect(allowed.output).toBe('allowed\n');
  });

  it("a browser's bearer token in the WebSocket subprotocol list authenticates; it never goes upstream", async () => {
    const seen = f.cluster.requests.length;
    const allowed = await webSocketGetExec(f.proxy.url, USERS.alice.token, ['echo', 'browser'], f.pki.ca.cert, 'subprotocol');
    expect(allowed.output).toBe('browser\n');
    const arrived = f.cluster.requests.slice(seen);
    for (const r of arrived) expect(JSON.stringify(r.rawHeaders)).not.toContain('base64url.bearer');
    expect(arrived.find((r) => r.upgrade)!.headers['impersonate-user']).toBe('alice');
    const denied = await webSocketGetExec(f.proxy.url, USERS.viewer.token, ['echo', 'pwned'], f.pki.ca.cert, 'subprotocol');
    expect(denied.status).toBe(403);
    const wrong = await webSocketGetExec(f.proxy.url, 'not-a-token', ['echo', 'pwned'], f.pki.ca.cert, 'subprotocol');
    expect(wrong.status).toBe(401);
  });

  it("a caller's Impersonate-User is honoured only with the impersonate permission", async () => {
    const denied = await request(f, '/api/v1/namespaces/default/pods/demo', { Authorization: `Bearer ${USERS.alice.token}`, 'Impersonate-User': 'system:admin' });
    expect(denied.status).toBe(403);
    expect(JSON.parse(denied.body)).toMatchObject({
      code: 403,
      reason: 'Forbidden',
      message: expect.stringContaining('users "system:admin" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope'),
    });
    const kubectlDenied = await exec(k133, 'alice', ['--as=system:admin']);
    expect(kubectlDenied.code, summary(kubectlDenied)).not.toBe(0);
    expect(kubectlDenied.stderr).toContain('cannot impersonate resource "users"');

    const seen = f.cluster.requests.length;
    const allowed = await exec(k127, 'admin', ['--as=alice']);
    expect(allowed.code, summary(allowed)).toBe(0);
    const upgrade = upgradesSince(seen)[0]!;
    expect(upgrade.headers['impersonate-user']).toBe('alice');
    expect(upgrade.user).toBe('alice');
    const noUser = await request(f, '/api/v1/namespaces/default/pods', { Authorization: `Bearer ${USERS.admin.token}`, 'Impersonate-Group': 'system:masters' });
    expect(noUser.status).toBe(400);
  });

  it('client certificates: CN/O from the client CA; X-Remote-* only from a verified front proxy', async () => {
    const seen = f.cluster.requests.length;
    const byCert = await runKubectl(k133, ['exec', 'demo', '--', 'echo', 'by-cert'], { kubeconfig: f.certKubeconfig(), timeoutMs: 30_000 });
    expect(byCert.code, summary(byCert)).toBe(0);
    expect(byCert.stdout.toString()).toBe('by-cert\n');
    expect(upgradesSince(seen)[0]!.headers['impersonate-user']).toBe('alice');

    // A client-CA certificate cannot assert another user with X-Remote-User.
    const spoof = await request(f, '/api/v1/namespaces/default/pods/demo', { 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' }, f.pki.clients.aliceCert);
    expect(spoof.status).toBe(200);
    const spoofed = f.cluster.requests.at(-1)!;
    expect(spoofed.headers['impersonate-user']).toBe('alice');
    expect(spoofed.headers['x-remote-user']).toBeUndefined();

    // The front proxy (its own CA, allowed CN) states the user.
    const front = await request(f, '/api/v1/namespaces/default/pods/demo', { 'X-Remote-User': 'viewer', 'X-Remote-Extra-Scopes': 'read' }, f.frontProxyClient);
    expect(front.status, front.body).toBe(200);
    const viaFront = f.cluster.requests.at(-1)!;
    expect(viaFront.headers['impersonate-user']).toBe('viewer');
    expect(viaFront.headers['impersonate-extra-scopes']).toBe('read');
    expect(viaFront.headers['x-remote-user']).toBeUndefined();
    expect(viaFront.user).toBe('viewer');

    // X-Remote-User with only a token is ignored: the token's user it is.
    const tokenSpoof = await request(f, '/api/v1/namespaces/default/pods/demo', { Authorization: `Bearer ${USERS.viewer.token}`, 'X-Remote-User': 'admin' });
    expect(tokenSpoof.status).toBe(200);
    expect(f.cluster.requests.at(-1)!.headers['impersonate-user']).toBe('viewer');
    expect(f.cluster.requests.at(-1)!.user).not.toBe(PROXY_USER);
  });
});
