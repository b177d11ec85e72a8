/**
 * The JWT authenticator's keys and cache against a real OpenID Provider: start-up with the issuer
 * unreachable (readiness says why, tokens refused, then accepted once the keys are known), the
 * discovery document's checks, key rotation within the refresh bound, the unknown-kid refresh rate
 * limit counted at the issuer, the token cache (successes, the refusals of verified tokens, shared
 * concurrent verifications; never forged tokens), the CEL cost limit, and the metrics in
 * kube-apiserver's names.
 */
import { randomBytes } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeAuthenticationConfiguration } from '../../../src/auth/authentication-config.js';
import { validateAuthenticationConfiguration } from '../../../src/auth/authentication-config-validation.js';
import { UNKNOWN_KEY_REFRESH_MIN_INTERVAL_MS } from '../../../src/auth/issuer-keys.js';
import { JWT_FAILURE_CACHE_TTL_MS, JwtAuthenticator, type JwtAuthenticatorOptions } from '../../../src/auth/jwt-authenticator.js';
import { JwtAuthenticationError } from '../../../src/auth/jwt-error.js';
import { createJwtMetrics, kubeHash } from '../../../src/auth/jwt-metrics.js';
import { counterValue } from '../../helpers/metrics.js';
import { startTestProvider, TEST_CLIENT_ID, type TestProvider } from '../../helpers/oidc-provider.js';
import { httpsGet } from '../../helpers/test-browser.js';
import { waitFor } from '../../helpers/wait.js';

let idp: TestProvider;
const open: JwtAuthenticator[] = [];

beforeAll(async () => {
  idp = await startTestProvider();
});
afterAll(async () => {
  await idp?.close();
});
afterEach(() => {
  for (const a of open.splice(0)) a.close();
  idp.offline = false;
});

const indent = (s: string, n: number): string => s.trimEnd().split('\n').map((l) => ' '.repeat(n) + l).join('\n');

function yaml(issuer: Record<string, string> = {}): string {
  const url = issuer.url ?? idp.issuer;
  const ca = issuer.certificateAuthority ?? idp.ca;
  const discovery = issuer.discoveryURL ? `\n    discoveryURL: ${issuer.discoveryURL}` : '';
  return `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${url}${discovery}
    audiences: [${TEST_CLIENT_ID}]
    certificateAuthority: |
${indent(ca, 6)}
  claimMappings:
    username: {claim: sub, prefix: ""}
`;
}

function build(options: JwtAuthenticatorOptions = {}, text = yaml()): JwtAuthenticator {
  const { errors, authenticators } = validateAuthenticationConfiguration(decodeAuthenticationConfiguration(text));
  expect(errors.map(String)).toEqual([]);
  const a = new JwtAuthenticator(authenticators, options);
  open.push(a);
  return a;
}

async function reason(a: JwtAuthenticator, token: string): Promise<string> {
  try {
    const r = await a.authenticateToken(token);
    return r ? `user ${r.user.username}` : 'no opinion';
  } catch (err) {
    if (err instanceof JwtAuthenticationError) return err.reason;
    throw err;
  }
}

describe('start-up and discovery', () => {
  it('issuer unreachable at start: constructed at once, readiness says why, tokens refused until the keys are known', async () => {
    idp.offline = true;
    const discoveryBefore = idp.discoveryRequests;
    const a = build({ retryIntervalMs: 100 });
    expect(a.problems()).toEqual([`jwt authenticator for ${idp.issuer}: not initialized`]);
    const problem = await waitFor('the first failed discovery', async () => (a.problems()[0]?.includes('fetching the discovery document') ? a.problems()[0] : undefined), 10_000, 20);
    expect(problem).toMatch(new RegExp(`^jwt authenticator for ${idp.issuer}: fetching the discovery document ${idp.issuer}/\\.well-known/openid-configuration: `));
    const token = await idp.mint();
    expect(await reason(a, token)).toBe('not_initialized');
    idp.offline = false;
    await a.waitReady(10_000, 20);
    expect(a.problems()).toEqual([]);
    expect(idp.discoveryRequests).toBeGreaterThan(discoveryBefore);
    expect(await reason(a, token)).toBe('user alice'); // the failure was not cached
  });

  it('issuer.certificateAuthority is the only trust: another CA fails the TLS handshake', async () => {
    const other = await startTestProvider();
    try {
      const a = build({ retryIntervalMs: 60_000 }, yaml({ certificateAuthority: other.ca }));
      const problem = await waitFor('a TLS failure', async () => (a.problems()[0]?.includes('discovery') ? a.problems()[0] : undefined), 10_000, 20);
      expect(problem).toMatch(/certificate|self.signed|unable to verify/i);
    } finally {
      await other.close();
    }
  });

  it("the discovery document's issuer must equal issuer.url (discoveryURL used as given)", async () => {
    const localhost = idp.issuer.replace('127.0.0.1', 'localhost');
    const a = build({ retryIntervalMs: 60_000 }, yaml({ url: localhost, discoveryURL: `${idp.issuer}/.well-known/openid-configuration` }));
    const problem = await waitFor('the issuer mismatch', async () => a.problems()[0]?.includes('did not match') ? a.problems()[0] : undefined, 10_000, 20);
    expect(problem).toBe(`jwt authenticator for ${localhost}: fetching the discovery document ${idp.issuer}/.well-known/openid-configuration: oidc: issuer did not match the issuer returned by provider, expected "${localhost}" got "${idp.issuer}"`);
  });

  it('discoveryURL pointing at the issuer\'s own document works', async () => {
    const a = build({}, yaml({ discoveryURL: `${idp.issuer}/.well-known/openid-configuration` }));
    await a.waitReady(10_000, 20);
    expect(await reason(a, await idp.mint())).toBe('user alice');
  });
});

describe('keys', () => {
  it('a flood of unknown kids fetches the JWKS at the rate limit, not per token (counted at the issuer)', async () => {
    let clock = Date.now();
    const a = build({ now: () => clock });
    await a.waitReady(10_000, 20);
    const base = idp.jwksRequests;
    const flood = await Promise.all(Array.from({ length: 200 }, () => idp.mint({}, { header: { kid: randomBytes(8).toString('hex') } })));
    expect(new Set(await Promise.all(flood.map((t) => reason(a, t))))).toEqual(new Set(['unknown_key']));
    expect(idp.jwksRequests - base).toBe(1);
    for (const t of flood.slice(0, 50)) expect(await reason(a, t)).toBe('unknown_key');
    expect(idp.jwksRequests - base).toBe(1);
    clock += UNKNOWN_KEY_REFRESH_MIN_INTERVAL_MS;
    for (const t of flood.slice(0, 50)) expect(await reason(a, t)).toBe('unknown_key');
    expect(idp.jwksRequests - base).toBe(2);
  });

  it('key rotation: new-key tokens accepted without a restart; old-key tokens refused once the refresh period has passed', async () => {
    const a = build({ refreshIntervalMs: 200 });
    await a.waitReady(10_000, 20);
    const old = await idp.mint();
    expect(await reason(a, old)).toBe('user alice');
    expect(await reason(a, old)).toBe('user alice'); // cached
    const before = idp.jwksRequests;
    await idp.rotateKeys();
    // No new-key token arrives: the periodic refresh alone must retire the old key (and the cached answer).
    await waitFor('a periodic JWKS refresh', async () => (idp.jwksRequests > before ? true : undefined), 10_000, 20);
    await waitFor('the old key to stop verifying', async () => ((await reason(a, old)) === 'unknown_key' ? true : undefined), 10_000, 20);
    expect(await reason(a, await idp.mint())).toBe('user alice');
    expect(await reason(a, await idp.mint({}, { alg: 'ES256' }))).toBe('user alice');
  });

  it('a token signed by a key added since the last fetch is accepted at once (one on-demand refresh)', async () => {
    const a = build({ refreshIntervalMs: 3_600_000 });
    await a.waitReady(10_000, 20);
    const before = idp.jwksRequests;
    await idp.rotateKeys();
    expect(await reason(a, await idp.mint())).toBe('user alice');
    expect(idp.jwksRequests - before).toBe(1);
  });
});

describe('cache and metrics', () => {
  it('caches successes until exp and the refusal of a verified token for JWT_FAILURE_CACHE_TTL_MS; a cache hit does not verify again', async () => {
    let clock = Date.now();
    const registry = new Registry();
    const metrics = createJwtMetrics(registry, { apiserverId: 'test-proxy' });
    const a = build({ now: () => clock, metrics });
    await a.waitReady(10_000, 20);
    const exp = Math.floor(clock / 1000) + 30;
    const token = await idp.mint({ exp });
    const count = async (result: string): Promise<number> =>
      counterValue(await registry.metrics(), 'apiserver_authentication_jwt_authenticator_latency_seconds_count', { result, jwt_issuer_hash: kubeHash(idp.issuer) });
    for (let i = 0; i < 5; i++) expect(await reason(a, token)).toBe('user alice');
    expect(await count('success')).toBe(1);
    clock = exp * 1000 + 1;
    expect(await reason(a, token)).toBe('expired');
    expect(await reason(a, token)).toBe('expired');
    expect(await count('failure')).toBe(1);
    // Once the failure TTL has passed, the token is verified again.
    clock += JWT_FAILURE_CACHE_TTL_MS + 1;
    expect(await reason(a, token)).toBe('expired');
    expect(await count('failure')).toBe(2);
    // Tokens of no configured issuer are not measured.
    expect(await reason(a, await idp.mint({ iss: 'https://elsewhere.example.com' }))).toBe('no opinion');
    expect((await count('success')) + (await count('failure'))).toBe(3);
  });

  it('a token whose signature does not verify is never cached: anyone can make those, so they must not fill the cache', async () => {
    const registry = new Registry();
    const a = build({ metrics: createJwtMetrics(registry, { apiserverId: 'x' }) });
    await a.waitReady(10_000, 20);
    const [h, , sig] = (await idp.mint()).split('.');
    const forged = `${h}.${Buffer.from(JSON.stringify({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'admin', exp: Math.floor(Date.now() / 1000) + 60 })).toString('base64url')}.${sig}`;
    for (let i = 0; i < 3; i++) expect(await reason(a, forged)).toBe('invalid_signature');
    expect(counterValue(await registry.metrics(), 'apiserver_authentication_jwt_authenticator_latency_seconds_count', { result: 'failure' })).toBe(3);
  });

  it('concurrent presentations of one token share one verification, accepted or refused', async () => {
    const registry = new Registry();
    const a = build({ metrics: createJwtMetrics(registry, { apiserverId: 'x' }) });
    await a.waitReady(10_000, 20);
    const [good, bad] = await Promise.all([idp.mint(), idp.mint({ aud: 'someone-else' })]);
    expect(await Promise.all(Array.from({ length: 5 }, () => reason(a, good!)))).toEqual(Array(5).fill('user alice'));
    expect(await Promise.all(Array.from({ length: 5 }, () => reason(a, bad!)))).toEqual(Array(5).fill('audience'));
    const text = await registry.metrics();
    expect(counterValue(text, 'apiserver_authentication_jwt_authenticator_latency_seconds_count', { result: 'success' })).toBe(1);
    expect(counterValue(text, 'apiserver_authentication_jwt_authenticator_latency_seconds_count', { result: 'failure' })).toBe(1);
  });

  it("a claim rule over the CEL cost budget refuses the token with cel-go's message, logged; the refusal is cached", async () => {
    const registry = new Registry();
    const logged: string[] = [];
    const log = { info: () => {}, warn: (_obj: object, msg: string) => logged.push(msg) };
    const rule = 'claims.l.all(x, claims.l.all(y, claims.l.all(z, x + y + z >= 0)))';
    const a = build({ metrics: createJwtMetrics(registry, { apiserverId: 'x' }), log }, `${yaml()}  claimValidationRules:\n  - expression: "${rule}"\n    message: never false\n`);
    await a.waitReady(10_000, 20);
    const token = await idp.mint({ l: Array.from({ length: 200 }, (_, i) => i) });
    expect(await reason(a, token)).toBe('expression_error');
    expect(await reason(a, token)).toBe('expression_error');
    const message = `jwt authentication failed: oidc: error evaluating claim validation expression: expression '${rule}' resulted in error: operation cancelled: actual cost limit exceeded`;
    expect(logged).toEqual([message, message]);
    expect(counterValue(await registry.metrics(), 'apiserver_authentication_jwt_authenticator_latency_seconds_count', { result: 'failure' })).toBe(1);
    // Within the budget, the same rule accepts.
    expect(await reason(a, await idp.mint({ l: [1, 2, 3] }))).toBe('user alice');
  });

  it('the cache is bounded (least recently used first)', async () => {
    const registry = new Registry();
    const a = build({ cacheMaxEntries: 2, metrics: createJwtMetrics(registry, { apiserverId: 'x' }) });
    await a.waitReady(10_000, 20);
    const [t1, t2, t3] = await Promise.all([idp.mint({ jti: '1' }), idp.mint({ jti: '2' }), idp.mint({ jti: '3' })]);
    for (const t of [t1!, t2!, t1!, t3!, t1!, t2!]) await reason(a, t);
    // t1 t2 miss; t1 hit; t3 miss (evicts t2); t1 hit; t2 miss.
    expect(counterValue(await registry.metrics(), 'apiserver_authentication_jwt_authenticator_latency_seconds_count')).toBe(4);
  });

  it("JWKS fetch metrics: timestamp by result, the key set's hash, and the fetch counter", async () => {
    const registry = new Registry();
    const a = build({ metrics: createJwtMetrics(registry, { apiserverId: 'proxy-1' }) });
    await a.waitReady(10_000, 20);
    const text = await registry.metrics();
    const labels = { jwt_issuer_hash: kubeHash(idp.issuer), apiserver_id_hash: kubeHash('proxy-1') };
    expect(counterValue(text, 'apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds', { ...labels, result: 'success' })).toBeGreaterThan(Date.now() / 1000 - 60);
    const body = await httpsGet(`${idp.issuer}${idp.jwksPath}`, idp.ca);
    expect(counterValue(text, 'apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info', { ...labels, hash: kubeHash(body) })).toBe(1);
    expect(counterValue(text, 'kube_stream_proxy_jwt_authenticator_jwks_fetches_total', { result: 'success', jwt_issuer_hash: kubeHash(idp.issuer) })).toBe(1);
    expect(kubeHash('')).toBe('');
    expect(kubeHash('abc')).toBe('sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
