/**
 * JWT/OIDC identities through the proxy end to end (issue 22): `serve --authn impersonate
 * --authentication-config FILE` in front of a TLS dev cluster with token authentication, the real
 * OpenID Provider (`dev/oidc-issuer.ts`) as the issuer. kubectl 1.27 (SPDY) and 1.33 (WebSocket v5
 * and the tunnel, passed through by the default to the dev cluster, which plays kube-apiserver 1.36
 * and takes them itself) run exec, attach, cp and port-forward as the OIDC user:
 * - with `--token <ID token>`;
 * - with `kube-stream-proxy login` as the exec plugin doing the real device flow, the code approved
 *   over HTTP as a user's browser would (needs `npm run build`: kubectl starts bin/kube-stream-proxy.js).
 * The upstream sees the proxy's token and `Impersonate-*` of the OIDC user, never the ID token;
 * `kubectl auth whoami` shows the OIDC user and groups. Bad tokens (expired, wrong aud, `alg: none`,
 * HS256 keyed with the issuer's public key, a flood of unknown kids) get kube-apiserver's 401 Status,
 * make no request upstream (not even a TokenReview), fetch the JWKS at the rate limit, and leave no
 * token text in the proxy's log.
 */
import { createHmac, createPublicKey } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { counterValue } from '../helpers/metrics.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { authenticationConfigFor, startTestProvider, TEST_CLIENT_ID, TEST_USERS, type TestProvider, type TestSigningKey } from '../helpers/oidc-provider.js';
import { approveDeviceCode } from '../helpers/test-browser.js';
import { deterministicBytes } from '../helpers/random-data.js';
import { sha256 } from '../helpers/hash.js';
import { request, startSecurityFixture, USERS, webSocketGetExec, type SecurityFixture } from '../security/security-fixture.js';

const skip = kubectlE2eSkipReason();
const BIN = resolve(import.meta.dirname, '../../bin/kube-stream-proxy.js');
const ALICE = 'alice@example.com';
const ALICE_GROUPS = ['oidc:developers', 'oidc:oncall', 'system:authenticated'];
const UNAUTHORIZED = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 };

describe.skipIf(skip !== undefined)('JWT identities through the proxy (impersonate, --authentication-config)', () => {
  let idp: TestProvider;
  let f: SecurityFixture;
  let work: string;
  let bytes: BytesServer;
  let aliceToken: string;
  const upgradesSince = (seen: number) => f.cluster.requests.slice(seen).filter((r) => r.upgrade);

  beforeAll(async () => {
    idp = await startTestProvider();
    work = mkdtempSync(join(tmpdir(), 'ksp-jwt-e2e-'));
    writeFileSync(join(work, 'auth.yaml'), authenticationConfigFor(idp));
    f = await startSecurityFixture({
      authn: 'impersonate',
      // The OIDC developers may do anything in the dev cluster.
      extraPolicyRules: [{ groups: ['oidc:developers'], verbs: ['*'], resources: ['*'], nonResourceURLs: ['*'] }],
      serveFlags: { authenticationConfig: join(work, 'auth.yaml') },
    });
    bytes = await startBytesServer();
    aliceToken = await idp.mint({ sub: 'alice', email: ALICE, email_verified: true, groups: ['developers', 'oncall'], exp: Math.floor(Date.now() / 1000) + 3600 });
    // Ready once the issuer's keys are known.
    const deadline = Date.now() + 20_000;
    while ((await f.proxy.app.inject({ method: 'GET', url: '/readyz' })).statusCode !== 200) {
      if (Date.now() > deadline) throw new Error('the proxy did not become ready (jwt check)');
      await new Promise((r) => setTimeout(r, 50));
    }
  }, 60_000);
  afterAll(async () => {
    await bytes?.close();
    await f?.close();
    await idp?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const tokenKubeconfig = (): string => {
    const path = join(work, 'kubeconfig-token');
    writeKubeconfig(path, { server: f.proxy.url, name: 'jwt-token', caPem: f.pki.ca.cert.toString() });
    return path;
  };

  const pluginKubeconfig = (version: string): string => {
    const path = join(work, `kubeconfig-plugin-${version}`);
    writeFileSync(join(work, 'idp-ca.pem'), idp.ca);
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'proxy', cluster: { server: f.proxy.url, 'certificate-authority-data': f.pki.ca.cert.toString('base64') } }],
      users: [
        {
          name: 'oidc',
          user: {
            exec: {
              apiVersion: 'client.authentication.k8s.io/v1',
              command: process.execPath,
              args: [BIN, 'login', `--oidc-issuer-url=${idp.issuer}`, `--oidc-client-id=${TEST_CLIENT_ID}`, '--oidc-extra-scope=email,groups', `--certificate-authority=${join(work, 'idp-ca.pem')}`, `--token-cache-dir=${join(work, `cache-${version}`)}`],
              interactiveMode: 'Never',
            },
          },
        },
      ],
      contexts: [{ name: 'proxy', context: { cluster: 'proxy', user: 'oidc', namespace: 'default' } }],
      'current-context': 'proxy',
    };
    writeFileSync(path, JSON.stringify(config));
    return path;
  };

  /** exec, exec -i, attach -i, cp up and down, port-forward: each as the OIDC user, each checked upstream. */
  async function streamingMatrix(version: KubectlVersion, kubeconfig: string, extra: string[]): Promise<void> {
    const bin = findKubectl(version);
    const k = (args: string[], o: { stdin?: Buffer; timeoutMs?: number } = {}) => runKubectl(bin, [...extra, ...args], { kubeconfig, cwd: work, timeoutMs: 60_000, ...o });
    const seen = f.cluster.requests.length;

    const echo = await k(['exec', 'demo', '--', 'echo', 'hello', 'oidc']);
    expect(echo.code, summary(echo)).toBe(0);
    expect(echo.stdout.toString()).toBe('hello oidc\n');

    const data = deterministicBytes(7, 1_000_000);
    const cat = await k(['exec', '-i', 'demo', '--', 'sha256sum'], { stdin: data });
    expect(cat.code, summary(cat)).toBe(0);
    expect(cat.stdout.toString()).toBe(`${sha256(data)}  -\n`);

    const attach = await k(['attach', '-i', 'demo'], { stdin: Buffer.from('echo attached-as-oidc\nexit 0\n') });
    expect(attach.code, summary(attach)).toBe(0);
    expect(attach.stdout.toString()).toContain('attached-as-oidc');

    const local = join(work, `cp-${version}.bin`);
    writeFileSync(local, deterministicBytes(8, 300_000));
    const up = await k(['cp', `cp-${version}.bin`, `demo:cp-${version}.bin`]);
    expect(up.code, summary(up)).toBe(0);
    const down = await k(['cp', `demo:cp-${version}.bin`, `back-${version}.bin`]);
    expect(down.code, summary(down)).toBe(0);
    const check = await k(['exec', 'demo', '--', 'sha256sum', `cp-${version}.bin`]);
    expect(check.stdout.toString()).toBe(`${sha256(deterministicBytes(8, 300_000))}  cp-${version}.bin\n`);

    const pf = startKubectl(bin, [...extra, 'port-forward', 'pod/demo', `:${bytes.port}`], { kubeconfig, cwd: work });
    try {
      const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytes.port}`), 30_000);
      const got = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/200000?seed=5`);
      expect({ sha256: got.sha256, byteLength: got.byteLength }).toEqual(bytes.expected(200_000, 5));
    } finally {
      await pf.stop('SIGINT', 10_000);
    }

    // Upstream: the proxy's own token and the OIDC user impersonated, on every upgrade; never the ID token.
    const upgrades = upgradesSince(seen);
    expect(upgrades.length).toBeGreaterThanOrEqual(7);
    for (const r of upgrades) {
      expect(r.headers.authorization).toBe(`Bearer ${USERS.proxy.token}`);
      expect(r.headers['impersonate-user']).toBe(ALICE);
      expect(r.user).toBe(ALICE);
      expect(r.groups).toEqual(ALICE_GROUPS);
      if (version === '1.27') expect(String(r.headers.upgrade).toLowerCase()).toBe('spdy/3.1');
    }
    for (const r of f.cluster.requests.slice(seen)) {
      expect(r.url.startsWith('/apis/authentication.k8s.io/v1/tokenreviews'), 'a JWT never causes a TokenReview').toBe(false);
      expect(JSON.stringify(r.rawHeaders)).not.toContain(aliceToken.split('.')[2]!);
    }
  }

  it.each(['1.27', '1.33'] as const)('kubectl %s --token <ID token>: exec, attach, cp, port-forward as the OIDC user', async (version) => {
    await streamingMatrix(version, tokenKubeconfig(), [`--token=${aliceToken}`]);
  }, 240_000);

  it.each(['1.27', '1.33'] as const)('kubectl %s with kube-stream-proxy login (device flow approved in the browser): whoami, then the matrix', async (version) => {
    const kubeconfig = pluginKubeconfig(version);
    const whoami = startKubectl(findKubectl(version), ['auth', 'whoami', '-o', 'json'], { kubeconfig, cwd: work });
    try {
      const m = await whoami.waitForOutput(/open (\S+) and enter the code (\S+)\)/, 30_000);
      const done = await approveDeviceCode(idp.ca, m[1]!, m[2]!, 'alice', TEST_USERS.alice!.password);
      expect(done.status).toBe(200);
      const exit = await new Promise<number | null>((r) => whoami.child.once('close', (code) => r(code)));
      expect(exit, JSON.stringify(whoami.output())).toBe(0);
    } finally {
      await whoami.stop('SIGKILL', 5_000);
    }
    const review = JSON.parse(whoami.output().stdout);
    expect(review.status.userInfo).toEqual({ username: ALICE, groups: ALICE_GROUPS });
    expect(idp.grants.at(-1)).toBe('urn:ietf:params:oauth:grant-type:device_code');
    // The rest runs from the plugin's token cache: no second login.
    const grants = idp.grants.length;
    await streamingMatrix(version, kubeconfig, []);
    expect(idp.grants.length).toBe(grants);
  }, 300_000);

  it('kubectl auth whoami (table) through the proxy shows the OIDC user and groups', async () => {
    const r = await runKubectl(findKubectl('1.33'), ['--token', aliceToken, 'auth', 'whoami'], { kubeconfig: tokenKubeconfig(), timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(0);
    expect(r.stdout.toString()).toMatch(/Username\s+alice@example\.com\n/);
    expect(r.stdout.toString()).toMatch(/Groups\s+\[oidc:developers oidc:oncall system:authenticated\]\n/);
  });

  it('a browser-style WebSocket exec with the JWT in the subprotocol runs as the OIDC user; the token never goes upstream', async () => {
    const seen = f.cluster.requests.length;
    const r = await webSocketGetExec(f.proxy.url, aliceToken, ['echo', 'from-browser'], f.pki.ca.cert, 'subprotocol');
    expect(r.output).toBe('from-browser\n');
    const upgrade = upgradesSince(seen)[0]!;
    expect(upgrade.headers['impersonate-user']).toBe(ALICE);
    expect(JSON.stringify(upgrade.rawHeaders)).not.toContain('base64url.bearer');
  });

  it('a TokenReview token still works beside the JWT authenticator (the chain goes on to TokenReview)', async () => {
    const r = await request(f, '/api/v1/namespaces/default/pods', { Authorization: `Bearer ${USERS.admin.token}` });
    expect(r.status).toBe(200);
  });

  describe('bad tokens: 401 Status, nothing upstream, no token text in the log', () => {
    const now = (): number => Math.floor(Date.now() / 1000);
    const valid = { email: ALICE, email_verified: true, groups: ['developers'] };
    const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');

    const cases: [string, () => Promise<string>, string][] = [
      ['expired', () => idp.mint({ ...valid, exp: now() - 10 }), 'expired'],
      ['wrong aud', () => idp.mint({ ...valid, aud: 'another-client' }), 'audience'],
      ['nbf in the future', () => idp.mint({ ...valid, nbf: now() + 600 }), 'not_yet_valid'],
      ['alg none', async () => `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', ...valid, exp: now() + 600 })}.`, 'unsupported_algorithm'],
      [
        'HS256 keyed with the issuer public key',
        async () => {
          const pub = createPublicKey({ key: idp.key('RS256').privateJwk as never, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
          const head = `${b64({ alg: 'HS256', kid: idp.key('RS256').kid, typ: 'JWT' })}.${b64({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', ...valid, exp: now() + 600 })}`;
          return `${head}.${createHmac('sha256', pub).update(head).digest('base64url')}`;
        },
        'unsupported_algorithm',
      ],
      ['a user validation rule fails', () => idp.mint({ ...valid, email: 'system:admin' }), 'user_validation'],
    ];

    it.each(cases)('%s', async (_what, make, reason) => {
      const token = await make();
      const seen = f.cluster.requests.length;
      const logged = f.logs.length;
      const r = await request(f, '/api/v1/namespaces/default/pods', { Authorization: `Bearer ${token}` });
      expect(r.status).toBe(401);
      expect(JSON.parse(r.body)).toEqual(UNAUTHORIZED);
      // Nothing upstream on the caller's behalf, not even a TokenReview.
      expect(f.cluster.requests.slice(seen)).toEqual([]);
      const lines = f.logs.slice(logged).join('');
      expect(lines).toContain('jwt authentication failed');
      expect(lines).toContain(`"reason":"${reason}"`);
      for (const part of token.split('.').filter((p) => p.length > 8)) expect(lines).not.toContain(part);
      // The same over a WebSocket upgrade (subprotocol token): 401 at the handshake.
      const ws = await webSocketGetExec(f.proxy.url, token, ['echo', 'pwned'], f.pki.ca.cert, 'subprotocol');
      expect(ws.status).toBe(401);
      expect(ws.output).toBe('');
      expect(f.cluster.requests.slice(seen)).toEqual([]);
    });

    it('a flood of unknown kids: every token 401, the JWKS fetched at the rate limit (not per token)', async () => {
      const { privateKey } = await generateKeyPair('ES256', { extractable: true });
      const stranger = (kid: string): TestSigningKey => ({ kid, alg: 'ES256', privateKey, privateJwk: { kid } });
      const tokens = await Promise.all(Array.from({ length: 40 }, (_, i) => idp.mint(valid, { key: stranger(`unknown-${i}`) })));
      const fetchesBefore = idp.jwksRequests;
      const seen = f.cluster.requests.length;
      const answers = await Promise.all(tokens.map((t) => request(f, '/api/v1/namespaces/default/pods', { Authorization: `Bearer ${t}` })));
      expect(answers.map((a) => a.status)).toEqual(tokens.map(() => 401));
      // 40 tokens, at most one refresh per 5 s (a periodic refresh may fall in the window too).
      expect(idp.jwksRequests - fetchesBefore).toBeLessThanOrEqual(2);
      expect(f.cluster.requests.slice(seen)).toEqual([]);
      const failures = counterValue(await (await f.proxy.app.inject({ method: 'GET', url: '/metrics' })).body, 'apiserver_authentication_jwt_authenticator_latency_seconds_count', { result: 'failure' });
      expect(failures).toBeGreaterThanOrEqual(40);
    });
  });

  it('metrics: successful verifications, JWKS fetches and the config in force', async () => {
    const text = (await f.proxy.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(counterValue(text, 'apiserver_authentication_jwt_authenticator_latency_seconds_count', { result: 'success' })).toBeGreaterThanOrEqual(1);
    expect(counterValue(text, 'kube_stream_proxy_jwt_authenticator_jwks_fetches_total', { result: 'success' })).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/apiserver_authentication_config_controller_last_config_info\{apiserver_id_hash="sha256:[0-9a-f]{64}",hash="sha256:[0-9a-f]{64}"\} 1/);
  });
});
