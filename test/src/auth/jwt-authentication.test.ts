/**
 * `serve --authentication-config` and the legacy `--oidc-*` flags at start-up
 * (src/auth/jwt-authentication.ts through src/config.ts and the CLI): refused with passthrough and
 * together (kube-apiserver's message), an invalid file exits 2 naming the field, the flags compile
 * to one authenticator with their algorithms, and the started server registers the JWT metrics and
 * the `jwt` readiness check, which fails while the issuer's keys are unknown.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { serveCommand } from '../../../src/cli.js';
import { resolveConfig, type ServeFlags } from '../../../src/config.js';
import { ConfigError } from '../../../src/errors.js';
import { buildServer } from '../../../src/server.js';
import { counterValue } from '../../helpers/metrics.js';
import { startTestProvider, TEST_CLIENT_ID, type TestProvider } from '../../helpers/oidc-provider.js';

let dir: string;
let idp: TestProvider;
let good: string;
let unreachable: string;
let caFile: string;

const fileFor = (issuer: string, ca: string): string => `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${issuer}
    audiences: [${TEST_CLIENT_ID}]
    certificateAuthority: ${JSON.stringify(ca)}
  claimMappings:
    username: {claim: email, prefix: ""}
`;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ksp-jwt-flags-'));
  idp = await startTestProvider();
  good = join(dir, 'good.yaml');
  writeFileSync(good, fileFor(idp.issuer, idp.ca));
  unreachable = join(dir, 'unreachable.yaml');
  // Port 9 (discard) on loopback: nothing listens there, so discovery fails and the keys stay unknown.
  writeFileSync(unreachable, fileFor('https://127.0.0.1:9', idp.ca));
  caFile = join(dir, 'ca.pem');
  writeFileSync(caFile, idp.ca);
});
afterAll(async () => {
  await idp?.close();
  rmSync(dir, { recursive: true, force: true });
});

const impersonate = (more: ServeFlags): ServeFlags => ({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:1', authn: 'impersonate', ...more });

describe('JWT authentication flags', () => {
  it('--authentication-config with --authn passthrough is refused: the proxy verifies no token there', async () => {
    await expect(resolveConfig({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:1', authenticationConfig: good })).rejects.toThrow(
      '--authentication-config need --authn=impersonate: with --authn=passthrough the proxy does not verify tokens (the upstream does)',
    );
    await expect(resolveConfig({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:1', oidcIssuerUrl: idp.issuer, oidcClientId: 'x' })).rejects.toThrow(/the --oidc-\* flags need --authn=impersonate/);
  });

  it('the file and the flags together are refused as kube-apiserver refuses them', async () => {
    await expect(resolveConfig(impersonate({ authenticationConfig: good, oidcGroupsClaim: 'groups' }))).rejects.toThrow(new ConfigError('authentication-config file and oidc-* flags are mutually exclusive'));
  });

  it.each<[string, ServeFlags, RegExp]>([
    ['half an issuer', { oidcIssuerUrl: 'https://issuer.example' }, /oidc-issuer-url and oidc-client-id must be specified together/],
    ['an HMAC algorithm', { oidcIssuerUrl: 'https://issuer.example', oidcClientId: 'k', oidcSigningAlgs: 'RS256,HS256' }, /oidc: unsupported signing alg: "HS256"/],
    ['a malformed required claim', { oidcIssuerUrl: 'https://issuer.example', oidcClientId: 'k', oidcRequiredClaim: ['hd'] }, /malformed pair, expect string=string/],
    ['an http issuer', { oidcIssuerUrl: 'http://issuer.example', oidcClientId: 'k' }, /jwt\[0\]\.issuer\.url: Invalid value: "http:\/\/issuer\.example": URL scheme must be https/],
    ['a CA file that does not exist', { oidcIssuerUrl: 'https://issuer.example', oidcClientId: 'k', oidcCaFile: '/nonexistent/ca.pem' }, /--oidc-ca-file: .*ENOENT/],
  ])('bad --oidc-* flags: %s', async (_what, flags, message) => {
    await expect(resolveConfig(impersonate(flags))).rejects.toThrow(message);
  });

  it('the flags compile to one authenticator with kube-apiserver defaults and their algorithms', async () => {
    const c = await resolveConfig(impersonate({ oidcIssuerUrl: idp.issuer, oidcClientId: TEST_CLIENT_ID, oidcCaFile: caFile, oidcSigningAlgs: 'ES256, RS256', oidcRequiredClaim: ['hd=example.com'] }));
    const jwt = c.security!.jwt!;
    expect(jwt.kind).toBe('flags');
    if (jwt.kind !== 'flags') return;
    expect(jwt.signingAlgorithms).toEqual(['ES256', 'RS256']);
    expect(jwt.authenticators[0]!.config.claimMappings.username).toEqual({ claim: 'sub', prefix: `${idp.issuer}#`, expression: '' });
    expect(jwt.authenticators[0]!.config.claimValidationRules).toEqual([{ claim: 'hd', requiredValue: 'example.com', expression: '', message: '' }]);
  });

  it("the proxy's own service-account issuer (its upstream token's iss) may not be a JWT issuer", async () => {
    const saToken = join(dir, 'sa.token');
    const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');
    writeFileSync(saToken, `${b64({ alg: 'RS256' })}.${b64({ iss: idp.issuer, sub: 'system:serviceaccount:kube-system:kube-stream-proxy' })}.c2ln\n`);
    await expect(resolveConfig(impersonate({ upstream: 'https://127.0.0.1:1', upstreamTokenFile: saToken, authenticationConfig: good }))).rejects.toThrow(
      `jwt[0].issuer.url: Invalid value: "${idp.issuer}": URL must not overlap with disallowed issuers: [${idp.issuer}]`,
    );
    await expect(resolveConfig(impersonate({ upstream: 'https://127.0.0.1:1', upstreamTokenFile: saToken, oidcIssuerUrl: idp.issuer, oidcClientId: 'k' }))).rejects.toThrow(/URL must not overlap with disallowed issuers/);
    // An opaque token says nothing: no issuer is disallowed.
    writeFileSync(saToken, 'opaque-token\n');
    expect((await resolveConfig(impersonate({ upstream: 'https://127.0.0.1:1', upstreamTokenFile: saToken, authenticationConfig: good }))).security?.jwt?.kind).toBe('file');
  });

  it('an invalid file: serve exits 2 naming the field, before listening', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, fileFor('https://issuer.example', idp.ca).replace('username: {claim: email, prefix: ""}', 'username: {claim: email, prefix: ""}\n    groups: {claim: groups}'));
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(await serveCommand(['--upstream', 'http://127.0.0.1:1', '--authn', 'impersonate', '--listen', '127.0.0.1:0', '--authentication-config', bad])).toBe(2);
      expect(String(stderr.mock.calls.map((c) => c[0]).join(''))).toContain(
        'jwt[0].claimMappings.groups.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing',
      );
      stderr.mockClear();
      expect(await serveCommand(['--upstream', 'http://127.0.0.1:1', '--listen', '127.0.0.1:0', '--authentication-config', good])).toBe(2);
      expect(String(stderr.mock.calls.map((c) => c[0]).join(''))).toContain('need --authn=impersonate');
    } finally {
      stderr.mockRestore();
    }
  });

  it('a running server reloads the file: the reload metrics count a good and a bad reload, and the new authenticators are in force', async () => {
    const live = join(dir, 'live', 'auth.yaml');
    mkdirSync(join(dir, 'live'), { recursive: true });
    writeFileSync(live, fileFor(idp.issuer, idp.ca));
    const app = await buildServer(await resolveConfig(impersonate({ authenticationConfig: live })), { upstreamProbe: { check: async () => ({ ok: true }) } });
    const metric = async (status: string): Promise<number> =>
      counterValue((await app.inject({ method: 'GET', url: '/metrics' })).body, 'apiserver_authentication_config_controller_automatic_reloads_total', { status });
    const until = async (what: string, ok: () => Promise<boolean>): Promise<void> => {
      for (const deadline = Date.now() + 30_000; !(await ok()); ) {
        if (Date.now() > deadline) throw new Error(`no ${what} within 30 s`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    try {
      expect(await metric('success')).toBe(0);
      // A good change (another username prefix): applied once the issuer's keys are fetched.
      writeFileSync(live, fileFor(idp.issuer, idp.ca).replace('prefix: ""', 'prefix: "oidc:"'));
      await until('successful reload', async () => (await metric('success')) === 1);
      // A bad one: counted, logged, the good one stays.
      writeFileSync(live, fileFor(idp.issuer, idp.ca).replace('audiences: [kube-stream-proxy]', 'audiences: []'));
      await until('failed reload', async () => (await metric('failure')) === 1);
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('a started server exports the JWT metrics; /readyz has a jwt check that fails while the keys are unknown', async () => {
    const cfg = await resolveConfig(impersonate({ authenticationConfig: unreachable }));
    const app = await buildServer(cfg, { upstreamProbe: { check: async () => ({ ok: true }) } });
    try {
      const ready = await app.inject({ method: 'GET', url: '/readyz' });
      expect(ready.statusCode).toBe(500);
      // The reason (the issuer and its dial error) is logged, not answered (test/handlers/health.test.ts).
      expect(ready.body).toBe('[+]shutdown ok\n[+]upstream ok\n[-]jwt failed: reason withheld\nreadyz check failed\n');
      const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(metrics).toContain('apiserver_authentication_config_controller_last_config_info{apiserver_id_hash="sha256:');
      expect(metrics).toContain('# TYPE apiserver_authentication_jwt_authenticator_latency_seconds histogram');
    } finally {
      await app.close();
    }
    const ok = await buildServer(await resolveConfig(impersonate({ authenticationConfig: good })), { upstreamProbe: { check: async () => ({ ok: true }) } });
    try {
      const deadline = Date.now() + 15_000;
      let body = '';
      while (Date.now() < deadline) {
        const r = await ok.inject({ method: 'GET', url: '/readyz' });
        body = r.body;
        if (r.statusCode === 200) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(body).toBe('ok');
    } finally {
      await ok.close();
    }
  });
});
