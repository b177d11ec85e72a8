/**
 * `--authn passthrough` (the default): the upstream (here the dev cluster with token authentication
 * and a policy) decides, the proxy forwards the caller's Authorization and Impersonate-* lines and
 * never its own credentials (it HAS a token here), and drops X-Remote-* lines. Real kubectl over
 * SPDY (1.27, passthrough) and WebSocket (1.33). The dev cluster plays kube-apiserver 1.36: it takes
 * v5 itself but authorizes a WebSocket GET as `get` pods/exec and then `create`, so alice's v5 (she has
 * `create` only) is refused there with 403 and the proxy falls back to its translator (issue 32). From
 * then on the proxy remembers for 5 minutes that this upstream took SPDY, and translates every v5
 * exec at once: the later tests' WebSocket execs are translated.
 */
import { request as httpsRequest } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { request, startSecurityFixture, USERS, webSocketGetExec, type SecurityFixture, type UserName } from './security-fixture.js';

const skipReason = kubectlE2eSkipReason();
const TRANSLATOR = 'apiserver_stream_translator_requests_total';

/** The dev cluster's own answer to a SPDY exec upgrade (POST, as the translator sends it). */
function upstreamAnswerOf(f: SecurityFixture, path: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${f.cluster.url}${path}`, {
      method: 'POST',
      ca: f.pki.ca.cert,
      headers: { Authorization: `Bearer ${token}`, Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'v4.channel.k8s.io', 'Content-Length': '0' },
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('upgrade', () => reject(new Error(`${path}: the upstream upgraded`)));
    req.on('error', reject);
    req.end();
  });
}

describe.skipIf(skipReason !== undefined)('passthrough authentication: the upstream decides', () => {
  let f: SecurityFixture;
  const k127 = findKubectl('1.27');
  const k133 = findKubectl('1.33');
  beforeAll(async () => {
    f = await startSecurityFixture({ authn: 'passthrough' });
  });
  afterAll(async () => {
    await f?.close();
  });

  const upstreamAnswer = (path: string, token: string) => upstreamAnswerOf(f, path, token);
  const exec = (bin: string, user: UserName | 'anonymous' | 'wrong', extra: string[] = []) =>
    runKubectl(bin, [...extra, 'exec', 'demo', '--', 'echo', 'hello'], { kubeconfig: f.kubeconfig(user), timeoutMs: 30_000 });

  it('a valid token execs over SPDY (1.27) and over WebSocket (1.33: refused by the upstream in WebSocket, translated)', async () => {
    const seen = f.cluster.requests.length;
    const before = await f.metric(TRANSLATOR, { code: '200' });
    const fallbacksBefore = await f.metric('kube_stream_proxy_upstream_streaming_fallbacks_total', { from: 'websocket', to: 'spdy', code: '403' });
    const spdy = await exec(k127, 'alice');
    expect(spdy.code, summary(spdy)).toBe(0);
    expect(spdy.stdout.toString()).toBe('hello\n');
    const ws = await exec(k133, 'alice');
    expect(ws.code, summary(ws)).toBe(0);
    expect(ws.stdout.toString()).toBe('hello\n');
    expect(await f.metric(TRANSLATOR, { code: '200' })).toBe(before + 1);
    expect(await f.metric('kube_stream_proxy_upstream_streaming_fallbacks_total', { from: 'websocket', to: 'spdy', code: '403' })).toBe(fallbacksBefore + 1);
    const execs = f.cluster.requests.slice(seen).filter((r) => r.url.includes('/exec?'));
    // kubectl 1.27's SPDY, kubectl 1.33's v5 (refused), the translator's SPDY: each with alice's token.
    expect(execs.map((r) => `${r.method} ${r.headers.upgrade}`)).toEqual(['POST SPDY/3.1', 'GET websocket', 'POST SPDY/3.1']);
    for (const r of execs) expect(r.headers.authorization).toBe(`Bearer ${USERS.alice.token}`);
  });

  it('no token → 401, wrong token → 401, and an anonymous request goes upstream with no credentials though the proxy has a token', async () => {
    const seen = f.cluster.requests.length;
    for (const user of ['anonymous', 'wrong'] as const) {
      for (const bin of [k127, k133]) {
        const r = await exec(bin, user);
        expect(r.code, summary(r)).not.toBe(0);
        // With no credentials at all kubectl asks for a user name on the 401 and reads EOF from /dev/null.
        expect(r.stderr).toMatch(user === 'anonymous' ? /Unauthorized|error: EOF/ : /Unauthorized/);
        expect(r.stdout.toString()).not.toContain('hello');
      }
    }
    const anonymous = await request(f, '/api/v1/namespaces/default/pods/demo/exec?command=echo&stdout=true', { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'v4.channel.k8s.io' });
    expect(anonymous.status).toBe(401);
    expect(JSON.parse(anonymous.body)).toMatchObject({ kind: 'Status', code: 401, reason: 'Unauthorized' });
    const arrived = f.cluster.requests.slice(seen);
    expect(arrived.filter((r) => r.headers.authorization === undefined).length).toBeGreaterThan(0);
    for (const r of arrived) expect(r.headers.authorization ?? '').not.toContain(USERS.proxy.token);
  });

  it('a token lacking create pods/exec gets 403 over SPDY and over WebSocket, and kubectl never succeeds by falling back', async () => {
    for (const bin of [k127, k133]) {
      const r = await exec(bin, 'viewer');
      expect(r.code, summary(r)).not.toBe(0);
      expect(r.stderr).toContain('cannot create resource "pods/exec"');
      expect(r.stdout.toString()).toBe('');
    }
  });

  it('a get-only user cannot exec through a WebSocket GET', async () => {
    const r = await webSocketGetExec(f.proxy.url, USERS.viewer.token, ['echo', 'pwned'], f.pki.ca.cert);
    expect(r.output).not.toContain('pwned');
    // Translated: the upstream's refusal is the answer to the handshake; no WebSocket is opened.
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body!)).toMatchObject({ kind: 'Status', code: 403, reason: 'Forbidden' });
    const allowed = await webSocketGetExec(f.proxy.url, USERS.alice.token, ['echo', 'allowed'], f.pki.ca.cert);
    expect(allowed.output).toBe('allowed\n');
  });

  it("a browser's bearer token in the WebSocket subprotocol list reaches the upstream as Authorization", async () => {
    const seen = f.cluster.requests.length;
    const allowed = await webSocketGetExec(f.proxy.url, USERS.alice.token, ['echo', 'browser'], f.pki.ca.cert, 'subprotocol');
    expect(allowed.output).toBe('browser\n');
    // alice may `create` pods/exec but not `get` it: the upstream's authorizer refuses her WebSocket
    // (passed through first, as the browser sent it), and the proxy asks again over SPDY, translated.
    const upgrades = f.cluster.requests.slice(seen).filter((r) => r.upgrade);
    expect(upgrades.map((r) => String(r.headers.upgrade).toLowerCase())).toEqual(['websocket', 'spdy/3.1']);
    const upgrade = upgrades[1]!;
    expect(upgrade.headers.authorization).toBe(`Bearer ${USERS.alice.token}`);
    expect(upgrade.headers['sec-websocket-protocol']).toBeUndefined();
    const denied = await webSocketGetExec(f.proxy.url, USERS.viewer.token, ['echo', 'pwned'], f.pki.ca.cert, 'subprotocol');
    expect(denied.output).toBe('');
    expect(denied.status).toBe(403);
  });

  it.each(['v4.base64.channel.k8s.io', 'v4.channel.k8s.io'])(
    "relayed path (%s): a browser's subprotocol token goes upstream unchanged and the upstream authenticates it",
    async (protocol) => {
      const seen = f.cluster.requests.length;
      // A browser's GET upgrade needs `get` and (kube-apiserver 1.35) `create` on pods/exec: admin has both.
      const r = await webSocketGetExec(f.proxy.url, USERS.admin.token, ['echo', 'browser'], f.pki.ca.cert, 'subprotocol', { protocol });
      expect(r).toMatchObject({ status: 101, output: 'browser\n', protocol });
      const upgrades = f.cluster.requests.slice(seen).filter((q) => q.upgrade);
      expect(upgrades).toHaveLength(1);
      // Relayed as the browser sent it: no Authorization line, the token still in the list, and the
      // upstream's user is the token's.
      expect(upgrades[0]!.headers.authorization).toBeUndefined();
      expect(upgrades[0]!.headers['sec-websocket-protocol']).toContain(`base64url.bearer.authorization.k8s.io.${Buffer.from(USERS.admin.token).toString('base64url')}`);
      expect(upgrades[0]!.user).toBe('admin');
      const denied = await webSocketGetExec(f.proxy.url, USERS.viewer.token, ['echo', 'pwned'], f.pki.ca.cert, 'subprotocol', { protocol });
      expect(denied).toMatchObject({ status: 403, output: '' });
      const wrong = await webSocketGetExec(f.proxy.url, 'not-a-valid-token', ['echo', 'pwned'], f.pki.ca.cert, 'subprotocol', { protocol });
      expect(wrong).toMatchObject({ status: 401, output: '' });
    },
  );

  it('v5 refused: wrong token → 401, missing pod → 404 relayed from the passthrough attempt; forbidden → 403 (and a create-only user\'s 404) asked again over SPDY and relayed by the translator; each the upstream\'s Status, never a 101', async () => {
    // 401 and a NotFound Status are the same in every protocol: never asked again. A Forbidden Status
    // to a WebSocket is (get → create asks for no less), and the translator relays that refusal.
    const cases = [
      { token: 'not-a-valid-token', pod: 'demo', code: 401, reason: 'Unauthorized', path: 'passthrough' },
      // admin may `get` and `create` pods/exec: the authorizer lets the WebSocket through, the registry says 404.
      { token: USERS.admin.token, pod: 'no-such-pod', code: 404, reason: 'NotFound', path: 'passthrough' },
      // alice may only `create`: her WebSocket is refused by the authorizer (`get`) before the pod is
      // looked up; over SPDY (`create`) the registry answers 404, and the translator relays it.
      { token: USERS.alice.token, pod: 'no-such-pod', code: 404, reason: 'NotFound', path: 'translated' },
      { token: USERS.viewer.token, pod: 'demo', code: 403, reason: 'Forbidden', path: 'translated' },
    ];
    const refusedBefore = await f.metric('kube_stream_proxy_streaming_requests_total', { path: 'translated', outcome: 'upstream_refused' });
    const relayedBefore = await f.metric('kube_stream_proxy_streaming_requests_total', { path: 'passthrough', protocol: 'websocket', outcome: 'upstream_refused' });
    for (const via of ['header', 'subprotocol'] as const) {
      for (const c of cases) {
        const seen = f.cluster.requests.length;
        const r = await webSocketGetExec(f.proxy.url, c.token, ['echo', 'pwned'], f.pki.ca.cert, via, { pod: c.pod });
        expect({ via, ...c, status: r.status }).toEqual({ via, ...c, status: c.code });
        expect(r.output).toBe('');
        // The upstream's own Status, byte for byte: the same body it gives the request directly.
        const upgrade = f.cluster.requests.slice(seen).find((q) => q.upgrade)!;
        const direct = await upstreamAnswer(upgrade.url, c.token);
        expect(direct.status).toBe(c.code);
        expect(r.body).toBe(direct.body);
        expect(JSON.parse(r.body!)).toMatchObject({ kind: 'Status', code: c.code, reason: c.reason });
      }
    }
    const translated = cases.filter((c) => c.path === 'translated').length;
    expect(await f.metric('kube_stream_proxy_streaming_requests_total', { path: 'translated', outcome: 'upstream_refused' })).toBe(refusedBefore + 2 * translated);
    expect(await f.metric('kube_stream_proxy_streaming_requests_total', { path: 'passthrough', protocol: 'websocket', outcome: 'upstream_refused' })).toBe(relayedBefore + 2 * (cases.length - translated));
  });

  it('kubectl --as works: the caller Impersonate-User line reaches the upstream, which authorizes it', async () => {
    const asAlice = await exec(k133, 'admin', ['--as=alice']);
    expect(asAlice.code, summary(asAlice)).toBe(0);
    expect(f.cluster.requests.some((r) => r.headers['impersonate-user'] === 'alice' && r.user === 'alice')).toBe(true);
    const denied = await exec(k127, 'alice', ['--as=admin']);
    expect(denied.code, summary(denied)).not.toBe(0);
    expect(denied.stderr).toMatch(/cannot impersonate resource "users"/);
  });

  it('X-Remote-User from a client never reaches the upstream', async () => {
    const seen = f.cluster.requests.length;
    const res = await request(f, '/api/v1/namespaces/default/pods/demo', {
      Authorization: `Bearer ${USERS.viewer.token}`,
      'X-Remote-User': 'admin',
      'X-Remote-Group': 'system:masters',
      'X-Remote-Extra-Scopes': 'all',
    });
    expect(res.status).toBe(200);
    const arrived = f.cluster.requests.slice(seen);
    expect(arrived).toHaveLength(1);
    expect(arrived[0]!.headers['x-remote-user']).toBeUndefined();
    expect(arrived[0]!.headers['x-remote-group']).toBeUndefined();
    expect(arrived[0]!.headers['x-remote-extra-scopes']).toBeUndefined();
    expect(arrived[0]!.user).toBe('viewer');
  });
});
