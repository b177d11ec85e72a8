import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { decodeAuthenticationConfiguration } from '../../../src/auth/authentication-config.js';
import { validateAuthenticationConfiguration, type CompiledJwtAuthenticator } from '../../../src/auth/authentication-config-validation.js';
import { CREDENTIAL_ID_EXTRA_KEY, userFromClaims, type Claims } from '../../../src/auth/jwt-claims.js';
import { JwtAuthenticationError, type JwtFailureReason } from '../../../src/auth/jwt-error.js';

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');

function compile(text: string): CompiledJwtAuthenticator {
  const { errors, authenticators } = validateAuthenticationConfiguration(decodeAuthenticationConfiguration(text));
  expect(errors.map(String)).toEqual([]);
  return authenticators[0]!;
}

/** One authenticator from a `jwt[0]` body given as JSON (issuer filled in). */
function entry(body: object): CompiledJwtAuthenticator {
  const j = JSON.stringify({ issuer: { url: 'https://example.com', audiences: ['a'] }, ...body });
  return compile(`apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt: [${j}]\n`);
}

function refusal(a: CompiledJwtAuthenticator, claims: Claims): { reason: JwtFailureReason; message: string } {
  try {
    userFromClaims(a, claims);
  } catch (err) {
    expect(err).toBeInstanceOf(JwtAuthenticationError);
    const e = err as JwtAuthenticationError;
    return { reason: e.reason, message: e.message };
  }
  throw new Error('not refused');
}

const docsPayload = JSON.parse(fixture('docs-token-payload.json')) as Claims;
const docsPayloadHd = JSON.parse(fixture('docs-token-payload-hd.json')) as Claims;

describe("golden: Kubernetes' documented examples", () => {
  it('"Valid token": the documented UserInfo (plus the credential id from jti, as kube-apiserver ≥ 1.32 adds)', () => {
    expect(userFromClaims(compile(fixture('docs-valid-token.yaml')), docsPayload)).toEqual({
      username: 'foo:external-user',
      uid: 'auth',
      groups: ['user', 'admin'],
      extra: {
        'example.com/tenant': ['72f988bf-86f1-41af-91ab-2d7cd011db4a'],
        [CREDENTIAL_ID_EXTRA_KEY]: ['JTI=7c337942807e73caa2c30c868ac0ce910bce02ddcbfebe8c23b8b5f27ad62873'],
      },
    });
  });

  it('"Fails claim validation": the token has no hd claim, so the rule errors (a missing key is a CEL error, not false)', () => {
    expect(refusal(compile(fixture('docs-fails-claim-validation.yaml')), docsPayload)).toEqual({
      reason: 'expression_error',
      message: `oidc: error evaluating claim validation expression: expression 'claims.hd == "example.com"' resulted in error: No such key: hd`,
    });
  });

  it('"Fails claim validation" with hd set to another domain: the rule is false and its message is given', () => {
    expect(refusal(compile(fixture('docs-fails-claim-validation.yaml')), { ...docsPayload, hd: 'evil.example' })).toEqual({
      reason: 'claim_validation',
      message: `oidc: error evaluating claim validation expression: validation expression 'claims.hd == "example.com"' failed: the hd claim must be set to example.com`,
    });
  });

  it('"Fails user validation": the user becomes system:foo and the user rule refuses it', () => {
    expect(refusal(compile(fixture('docs-fails-user-validation.yaml')), docsPayloadHd)).toEqual({
      reason: 'user_validation',
      message: "oidc: error evaluating user info validation rule: validation expression '!user.username.startsWith('system:')' failed: username cannot used reserved system: prefix",
    });
  });

  it("the annotated example's rules: claims.exp - claims.nbf is int arithmetic over the claims (kube converts whole numbers to int)", () => {
    const a = entry({
      claimValidationRules: [{ expression: 'claims.exp - claims.nbf <= 86400', message: 'total token lifetime must not exceed 24 hours' }],
      claimMappings: { username: { claim: 'sub', prefix: '' } },
      userValidationRules: [{ expression: "user.groups.all(group, !group.startsWith('system:'))", message: 'groups cannot used reserved system: prefix' }],
    });
    expect(refusal(a, docsPayload)).toEqual({
      reason: 'claim_validation',
      message: "oidc: error evaluating claim validation expression: validation expression 'claims.exp - claims.nbf <= 86400' failed: total token lifetime must not exceed 24 hours",
    });
    expect(userFromClaims(a, { ...docsPayload, exp: 1701107233 + 3600 }).username).toBe('auth');
  });
});

describe('claim mappings', () => {
  it('username claim with prefix; groups as an array or a single string, prefixed; uid claim', () => {
    const a = entry({ claimMappings: { username: { claim: 'sub', prefix: 'oidc:' }, groups: { claim: 'groups', prefix: 'oidc:' }, uid: { claim: 'sub' } } });
    expect(userFromClaims(a, { sub: 'alice', groups: ['dev', 'ops'] })).toEqual({ username: 'oidc:alice', uid: 'alice', groups: ['oidc:dev', 'oidc:ops'], extra: {} });
    expect(userFromClaims(a, { sub: 'alice', groups: 'dev' }).groups).toEqual(['oidc:dev']);
    expect(userFromClaims(a, { sub: 'alice' }).groups).toEqual([]);
  });

  it.each<[string, object, Claims, JwtFailureReason, string]>([
    ['missing username claim', { username: { claim: 'sub', prefix: '' } }, {}, 'claim_mapping', 'oidc: parse username claims "sub": claim not present'],
    ['username not a string', { username: { claim: 'sub', prefix: '' } }, { sub: 42 }, 'claim_mapping', 'oidc: parse username claims "sub": json: cannot unmarshal number into Go value of type string'],
    ['email not verified', { username: { claim: 'email', prefix: '' } }, { email: 'a@example.com', email_verified: false }, 'email_not_verified', 'oidc: email not verified'],
    ['groups of the wrong type', { username: { claim: 'sub', prefix: '' }, groups: { claim: 'groups', prefix: '' } }, { sub: 'a', groups: [1, 2] }, 'claim_mapping', 'oidc: parse groups claim "groups": json: cannot unmarshal into Go value of type []string'],
    ['uid claim missing', { username: { claim: 'sub', prefix: '' }, uid: { claim: 'oid' } }, { sub: 'a' }, 'claim_mapping', 'oidc: parse uid claim "oid": claim not present'],
    ['username expression not a string', { username: { expression: 'claims.n' } }, { n: 1 }, 'claim_mapping', 'oidc: error evaluating username claim expression: username claim expression must return a string'],
    ['empty username via expression', { username: { expression: 'claims.name' } }, { name: '' }, 'claim_mapping', 'oidc: empty username via CEL expression is not allowed'],
    ['username expression errors at run time', { username: { expression: 'claims.nope' } }, {}, 'expression_error', "oidc: error evaluating username claim expression: expression 'claims.nope' resulted in error: No such key: nope"],
    ['groups expression of the wrong type', { username: { claim: 'sub', prefix: '' }, groups: { expression: 'claims.n' } }, { sub: 'a', n: 1 }, 'claim_mapping', 'oidc: error evaluating group claim expression: expression must return a string or a list of strings'],
    ['uid expression not a string', { username: { claim: 'sub', prefix: '' }, uid: { expression: 'claims.n' } }, { sub: 'a', n: 1 }, 'claim_mapping', 'oidc: error evaluating uid claim expression: uid claim expression must return a string'],
    ['extra of the wrong type', { username: { claim: 'sub', prefix: '' }, extra: [{ key: 'example.com/x', valueExpression: 'claims.n' }] }, { sub: 'a', n: 1 }, 'claim_mapping', 'oidc: error evaluating extra claim expression: claims.n: expression must return a string or a list of strings'],
  ])('%s', (_name, claimMappings, claims, reason, message) => {
    expect(refusal(entry({ claimMappings }), claims)).toEqual({ reason, message });
  });

  it('email with email_verified true or absent is accepted (kube-apiserver accepts an absent one)', () => {
    const a = entry({ claimMappings: { username: { claim: 'email', prefix: '' } } });
    expect(userFromClaims(a, { email: 'a@example.com', email_verified: true }).username).toBe('a@example.com');
    expect(userFromClaims(a, { email: 'a@example.com' }).username).toBe('a@example.com');
  });

  it('an expression may map email when it checks email_verified itself', () => {
    const a = entry({ claimMappings: { username: { expression: 'claims.?email_verified.orValue(false) == true ? claims.email : ""' } } });
    expect(userFromClaims(a, { email: 'a@example.com', email_verified: true }).username).toBe('a@example.com');
    expect(refusal(a, { email: 'a@example.com', email_verified: false }).message).toBe('oidc: empty username via CEL expression is not allowed');
  });

  it('expression results: "", [], null and empty items mean no groups or extra', () => {
    const a = entry({
      claimMappings: {
        username: { claim: 'sub', prefix: '' },
        groups: { expression: 'claims.g' },
        extra: [
          { key: 'example.com/a', valueExpression: 'claims.e' },
          { key: 'example.com/b', valueExpression: '["x", "", "y"]' },
        ],
      },
    });
    for (const empty of ['', [], null]) expect(userFromClaims(a, { sub: 's', g: empty, e: empty })).toEqual({ username: 's', groups: [], extra: { 'example.com/b': ['x', 'y'] } });
    expect(userFromClaims(a, { sub: 's', g: ['a', '', 'b'], e: 'v' })).toEqual({ username: 's', groups: ['a', 'b'], extra: { 'example.com/a': ['v'], 'example.com/b': ['x', 'y'] } });
  });

  it('required claims (--oidc-required-claim): present and equal strings only', () => {
    const a = entry({ claimValidationRules: [{ claim: 'hd', requiredValue: 'example.com' }], claimMappings: { username: { claim: 'sub', prefix: '' } } });
    expect(userFromClaims(a, { sub: 's', hd: 'example.com' }).username).toBe('s');
    expect(refusal(a, { sub: 's' })).toEqual({ reason: 'required_claim', message: 'oidc: required claim hd not present in ID token' });
    expect(refusal(a, { sub: 's', hd: 'other.com' })).toEqual({ reason: 'required_claim', message: 'oidc: required claim hd value does not match. Got = other.com, want = example.com' });
    expect(refusal(a, { sub: 's', hd: 1 })).toEqual({ reason: 'required_claim', message: 'oidc: parse claim hd: json: cannot unmarshal number into Go value of type string' });
  });

  it("a claim named __proto__ stays a plain key for CEL (no prototype pollution)", () => {
    const a = entry({ claimMappings: { username: { expression: 'claims.sub' }, extra: [{ key: 'example.com/p', valueExpression: 'claims["__proto__"].x' }] } });
    const claims = JSON.parse('{"sub":"s","__proto__":{"x":"polluted"}}') as Claims;
    expect(userFromClaims(a, claims).extra).toEqual({ 'example.com/p': ['polluted'] });
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it('Kubernetes CEL libraries: sets, split, lowerAscii, replace, find', () => {
    const a = entry({
      claimValidationRules: [{ expression: 'sets.intersects(claims.aud, ["a"]) && sets.equivalent(claims.roles, ["x", "y"]) && sets.contains(claims.roles, ["y"])' }],
      claimMappings: {
        username: { expression: 'claims.name.lowerAscii().replace(" ", ".")' },
        groups: { expression: 'claims.csv.split(",").map(g, "team:" + g)' },
        extra: [{ key: 'example.com/domain', valueExpression: 'claims.mail.find("@[a-z.]+")' }],
      },
    });
    expect(userFromClaims(a, { aud: ['a'], roles: ['y', 'x'], name: 'Ada Lovelace', csv: 'x,y', mail: 'ada@example.com' })).toEqual({
      username: 'ada.lovelace',
      groups: ['team:x', 'team:y'],
      extra: { 'example.com/domain': ['@example.com'] },
    });
    expect(refusal(a, { aud: ['b'], roles: ['x', 'y'], name: 'n', csv: '', mail: '' }).reason).toBe('claim_validation');
  });
});
