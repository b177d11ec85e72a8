import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateAuthenticationConfiguration } from '../../../src/auth/authentication-config-validation.js';
import { JwtAuthenticator } from '../../../src/auth/jwt-authenticator.js';
import { JwtAuthenticationError } from '../../../src/auth/jwt-error.js';
import { authenticationConfigFromOidcFlags, oidcFlagsSet, validateOidcFlags, type OidcFlags } from '../../../src/auth/oidc-flags.js';
import { startTestProvider, TEST_CLIENT_ID, type TestProvider } from '../../helpers/oidc-provider.js';

const base: OidcFlags = { issuerURL: 'https://issuer.example.com', clientID: 'kubernetes' };
const files: Record<string, string> = {};
const read = (p: string): string => {
  const v = files[p];
  if (v === undefined) throw new Error(`ENOENT: ${p}`);
  return v;
};

describe('authenticationConfigFromOidcFlags (kube-apiserver ToAuthenticationConfig)', () => {
  it('defaults: username claim sub prefixed with "<issuer>#", one audience, RS256 only, no groups', () => {
    const r = authenticationConfigFromOidcFlags(base)!;
    expect(r.signingAlgorithms).toEqual(['RS256']);
    expect(r.config.jwt).toEqual([
      {
        issuer: { url: 'https://issuer.example.com', discoveryURL: '', certificateAuthority: '', audiences: ['kubernetes'], audienceMatchPolicy: '', egressSelectorType: '' },
        claimValidationRules: [],
        claimMappings: { username: { claim: 'sub', prefix: 'https://issuer.example.com#', expression: '' }, groups: { claim: '', expression: '' }, uid: { claim: '', expression: '' }, extra: [] },
        userValidationRules: [],
      },
    ]);
    expect(validateAuthenticationConfiguration(r.config).errors).toEqual([]);
  });

  it.each<[string, OidcFlags, string]>([
    ['email is not prefixed', { usernameClaim: 'email' }, ''],
    ['"-" disables the prefix', { usernamePrefix: '-' }, ''],
    ['"-" with email too', { usernameClaim: 'email', usernamePrefix: '-' }, ''],
    ['a given prefix is used as is', { usernameClaim: 'preferred_username', usernamePrefix: 'oidc:' }, 'oidc:'],
    ['another claim gets the issuer prefix', { usernameClaim: 'preferred_username' }, 'https://issuer.example.com#'],
  ])('username prefix: %s', (_n, flags, prefix) => {
    expect(authenticationConfigFromOidcFlags({ ...base, ...flags })!.config.jwt[0]!.claimMappings.username.prefix).toBe(prefix);
  });

  it('groups claim and prefix, required claims, CA file content, signing algorithms', () => {
    files['/ca.pem'] = '-----BEGIN CERTIFICATE-----\n...';
    const r = authenticationConfigFromOidcFlags(
      { ...base, groupsClaim: 'groups', groupsPrefix: 'oidc:', requiredClaims: ['hd=example.com', 'tier=gold=1', 'hd=example.org'], caFile: '/ca.pem', signingAlgs: ['ES256', 'RS512'] },
      read,
    )!;
    const j = r.config.jwt[0]!;
    expect(j.claimMappings.groups).toEqual({ claim: 'groups', prefix: 'oidc:', expression: '' });
    expect(j.claimValidationRules).toEqual([
      { claim: 'hd', requiredValue: 'example.org', expression: '', message: '' },
      { claim: 'tier', requiredValue: 'gold=1', expression: '', message: '' },
    ]);
    expect(j.issuer.certificateAuthority).toBe(files['/ca.pem']);
    expect(r.signingAlgorithms).toEqual(['ES256', 'RS512']);
    expect(authenticationConfigFromOidcFlags({ ...base, groupsClaim: 'groups' })!.config.jwt[0]!.claimMappings.groups.prefix).toBe('');
  });

  it('no authenticator without both issuer and client id', () => {
    expect(authenticationConfigFromOidcFlags({ issuerURL: 'https://x' })).toBeUndefined();
    expect(authenticationConfigFromOidcFlags({})).toBeUndefined();
  });

  it('the result is validated like a file: an http issuer is refused with the field path', () => {
    const r = authenticationConfigFromOidcFlags({ ...base, issuerURL: 'http://issuer.example.com' })!;
    expect(validateAuthenticationConfiguration(r.config).errors.map(String)).toEqual(['jwt[0].issuer.url: Invalid value: "http://issuer.example.com": URL scheme must be https']);
  });
});

describe('validateOidcFlags (kube-apiserver validateOIDCOptions)', () => {
  it('no flags, no errors', () => {
    expect(oidcFlagsSet({})).toBe(false);
    expect(validateOidcFlags({}, '/etc/authn.yaml')).toEqual([]);
  });

  it('refuses any --oidc-* flag together with --authentication-config', () => {
    expect(validateOidcFlags({ groupsClaim: 'groups' }, '/etc/authn.yaml')).toEqual(['authentication-config file and oidc-* flags are mutually exclusive']);
  });

  it('needs issuer and client id together', () => {
    expect(validateOidcFlags({ groupsClaim: 'groups' })).toEqual(['oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set']);
    expect(validateOidcFlags({ clientID: 'x' })).toEqual(['oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set']);
    expect(validateOidcFlags(base)).toEqual([]);
  });

  it('refuses algorithms outside the asymmetric allow-list and malformed required claims', () => {
    expect(validateOidcFlags({ ...base, signingAlgs: ['RS256', 'HS256', 'none'], requiredClaims: ['hd'] })).toEqual([
      'oidc: unsupported signing alg: "HS256"',
      'oidc: unsupported signing alg: "none"',
      'invalid argument "hd" for "--oidc-required-claim" flag: malformed pair, expect string=string',
    ]);
  });
});

describe('the flag-built authenticator against a real issuer', () => {
  let idp: TestProvider;
  beforeAll(async () => {
    idp = await startTestProvider();
  });
  afterAll(async () => {
    await idp?.close();
  });

  it('maps like kube-apiserver and allows only --oidc-signing-algs', async () => {
    files['/idp-ca.pem'] = idp.ca;
    const r = authenticationConfigFromOidcFlags({ issuerURL: idp.issuer, clientID: TEST_CLIENT_ID, caFile: '/idp-ca.pem', groupsClaim: 'groups', groupsPrefix: 'oidc:' }, read)!;
    const { errors, authenticators } = validateAuthenticationConfiguration(r.config);
    expect(errors).toEqual([]);
    const a = new JwtAuthenticator(authenticators, { signingAlgorithms: r.signingAlgorithms });
    try {
      await a.waitReady(10_000, 20);
      expect(await a.authenticateToken(await idp.mint({ groups: ['dev'] }))).toEqual({ user: { username: `${idp.issuer}#alice`, groups: ['oidc:dev'], extra: {} } });
      const es = await a.authenticateToken(await idp.mint({}, { alg: 'ES256' })).catch((e: unknown) => e);
      expect(es).toBeInstanceOf(JwtAuthenticationError);
      expect((es as JwtAuthenticationError).reason).toBe('unsupported_algorithm');
      expect((es as JwtAuthenticationError).message).toBe('oidc: verify token: oidc: id token signed with unsupported algorithm, expected [RS256] got "ES256"');
    } finally {
      a.close();
    }
  });
});
