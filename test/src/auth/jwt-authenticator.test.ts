/**
 * The JWT authenticator against a real OpenID Provider (oidc-provider on 127.0.0.1 over HTTPS): its
 * discovery and JWKS, tokens it signs (minted with the keys its JWKS serves), every hostile token of
 * issue 22's list, caching, start-up with the issuer unreachable, key rotation, the unknown-kid
 * rate limit (counted at the issuer) and the metrics.
 */
import { createPrivateKey, createPublicKey, randomBytes, sign, type JsonWebKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeAuthenticationConfiguration } from '../../../src/auth/authentication-config.js';
import { validateAuthenticationConfiguration } from '../../../src/auth/authentication-config-validation.js';
import { JwtAuthenticator, type JwtAuthenticatorOptions } from '../../../src/auth/jwt-authenticator.js';
import { JwtAuthenticationError, type JwtFailureReason } from '../../../src/auth/jwt-error.js';
import { createJwtMetrics, kubeHash } from '../../../src/auth/jwt-metrics.js';
import { counterValue } from '../../helpers/metrics.js';
import { startTestProvider, TEST_CLIENT_ID, type TestProvider } from '../../helpers/oidc-provider.js';
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

/** The configuration the tests use for the provider (extra YAML lines go into the jwt entry). */
function configYaml(issuerExtra = '', entryExtra = ''): string {
  return `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${idp.issuer}
    audiences: [${TEST_CLIENT_ID}, other-app]
    audienceMatchPolicy: MatchAny
    certificateAuthority: |
${indent(idp.ca, 6)}
${issuerExtra}
  claimValidationRules:
  - expression: 'claims.?tenant.orValue("") != "blocked"'
    message: tenant blocked
  claimMappings:
    username: {claim: sub, prefix: "oidc:"}
    groups: {claim: groups, prefix: ""}
    extra:
    - key: example.com/level
      valueExpression: 'has(claims.level) ? string(claims.level.value) : ""'
${entryExtra}`;
}

interface Logged {
  obj: object;
  msg: string;
}

function build(options: JwtAuthenticatorOptions = {}, yaml = configYaml()): { a: JwtAuthenticator; logs: Logged[] } {
  const { errors, authenticators } = validateAuthenticationConfiguration(decodeAuthenticationConfiguration(yaml));
  expect(errors.map(String)).toEqual([]);
  const logs: Logged[] = [];
  const log = { info: (obj: object, msg: string) => logs.push({ obj, msg }), warn: (obj: object, msg: string) => logs.push({ obj, msg }) };
  const a = new JwtAuthenticator(authenticators, { log, ...options });
  open.push(a);
  return { a, logs };
}

async function ready(options: JwtAuthenticatorOptions = {}, yaml?: string): Promise<{ a: JwtAuthenticator; logs: Logged[] }> {
  const r = build(options, yaml);
  await r.a.waitReady(10_000);
  return r;
}

/** The outcome of authenticating `token`: the user, no opinion, or the refusal's reason and message. */
async function outcome(a: JwtAuthenticator, token: string): Promise<{ user: unknown } | 'no_opinion' | { reason: JwtFailureReason; message: string }> {
  try {
    const r = await a.authenticateToken(token);
    return r ?? 'no_opinion';
  } catch (err) {
    if (!(err instanceof JwtAuthenticationError)) throw err;
    return { reason: err.reason, message: err.message };
  }
}

const b64 = (v: unknown): string => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const now = (): number => Math.floor(Date.now() / 1000);

/** A compact JWS signed with the issuer's RS256 key by hand (jose refuses to produce some of the hostile headers). */
function signRaw(header: object, payload: object): string {
  const input = `${b64(header)}.${b64(payload)}`;
  const key = createPrivateKey({ key: idp.key('RS256').privateJwk as JsonWebKey, format: 'jwk' });
  return `${input}.${sign('sha256', Buffer.from(input), key).toString('base64url')}`;
}

/** Every part of a token that must never reach a log or an error message. */
function secretParts(token: string): string[] {
  return [token, ...token.split('.').filter((p) => p.length >= 12)];
}

describe('valid tokens', () => {
  it('RS256 and ES256 tokens from the issuer map to users', async () => {
    const { a } = await ready();
    for (const alg of ['RS256', 'ES256'] as const) {
      const token = await idp.mint({ groups: ['developers'], jti: `id-${alg}`, aud: ['someone-else', 'other-app'] }, { alg });
      expect(await outcome(a, token)).toEqual({
        user: { username: 'oidc:alice', groups: ['developers'], extra: { 'authentication.kubernetes.io/credential-id': [`JTI=id-${alg}`] } },
      });
    }
  });

  it('nbf up to 60 s ahead is accepted (go-oidc leeway); iat is not checked', async () => {
    const { a } = await ready();
    expect(await outcome(a, await idp.mint({ nbf: now() + 50, iat: now() + 3600 }))).toHaveProperty('user');
  });

  it("golden: the documentation's \"Valid token\" payload, re-signed by the issuer, gives the documented user", async () => {
    const yaml = readFileSync(new URL('./fixtures/docs-valid-token.yaml', import.meta.url), 'utf8')
      .replace('url: https://example.com', `url: ${idp.issuer}\n    certificateAuthority: |\n${indent(idp.ca, 6)}`);
    const payload = JSON.parse(readFileSync(new URL('./fixtures/docs-token-payload.json', import.meta.url), 'utf8')) as Record<string, unknown>;
    // The documented token has aud "kubernetes" (the config wants my-app) and expired in 2023: align the
    // audience and pin the clock to its lifetime.
    const { a } = await ready({ now: () => (payload.iat as number) * 1000 + 1000 }, yaml);
    const token = await idp.mint({ ...payload, iss: idp.issuer, aud: 'my-app' });
    expect(await outcome(a, token)).toEqual({
      user: {
        username: 'foo:external-user',
        uid: 'auth',
        groups: ['user', 'admin'],
        extra: { 'example.com/tenant': ['72f988bf-86f1-41af-91ab-2d7cd011db4a'], 'authentication.kubernetes.io/credential-id': [`JTI=${payload.jti as string}`] },
      },
    });
  });
});

describe('hostile tokens (issue 22, "Bad input")', () => {
  type Expect = 'no_opinion' | JwtFailureReason;
  const cases: [string, () => Promise<string>, Expect][] = [
    ['expired', () => idp.mint({ exp: now() - 5 }), 'expired'],
    ['no exp', () => idp.mint({ exp: undefined }), 'expired'],
    ['nbf in the future (beyond the 60 s leeway)', () => idp.mint({ nbf: now() + 120 }), 'not_yet_valid'],
    ['wrong iss', () => idp.mint({ iss: 'https://evil.example.com' }), 'no_opinion'],
    ['iss with a trailing slash (not byte-equal)', () => idp.mint({ iss: `${idp.issuer}/` }), 'no_opinion'],
    ['no iss', () => idp.mint({ iss: undefined }), 'no_opinion'],
    ['wrong aud', () => idp.mint({ aud: 'someone-else' }), 'audience'],
    ['aud of the wrong type', () => idp.mint({ aud: 7 }), 'malformed'],
    ['alg none', async () => `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', exp: now() + 600 })}.`, 'unsupported_algorithm'],
    [
      "HS256 keyed with the issuer's RSA public key (PEM)",
      async () => {
        const pem = createPublicKey({ key: idp.key('RS256').privateJwk as JsonWebKey, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
        return new SignJWT({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', exp: now() + 600 }).setProtectedHeader({ alg: 'HS256', kid: idp.key('RS256').kid }).sign(Buffer.from(pem));
      },
      'unsupported_algorithm',
    ],
    [
      "HS256 keyed with the issuer's public JWK",
      async () => {
        const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...pub } = idp.key('RS256').privateJwk;
        return new SignJWT({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', exp: now() + 600 }).setProtectedHeader({ alg: 'HS256' }).sign(Buffer.from(JSON.stringify(pub)));
      },
      'unsupported_algorithm',
    ],
    ['HS512', () => new SignJWT({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', exp: now() + 600 }).setProtectedHeader({ alg: 'HS512' }).sign(randomBytes(64)), 'unsupported_algorithm'],
    [
      'EdDSA (not in the allow-list)',
      async () => {
        const { privateKey } = await generateKeyPair('EdDSA');
        return new SignJWT({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', exp: now() + 600 }).setProtectedHeader({ alg: 'EdDSA', kid: 'ed-1' }).sign(privateKey);
      },
      'unsupported_algorithm',
    ],
    ['unknown kid', () => idp.mint({}, { header: { kid: 'no-such-key' } }), 'unknown_key'],
    ['kid of an RSA key on an ES256 token', () => idp.mint({}, { alg: 'ES256', header: { kid: idp.key('RS256').kid } }), 'unknown_key'],
    [
      "signed by another key under the issuer's kid",
      async () => {
        const { privateKey } = await generateKeyPair('RS256');
        return new SignJWT({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', exp: now() + 600 }).setProtectedHeader({ alg: 'RS256', kid: idp.key('RS256').kid }).sign(privateKey);
      },
      'invalid_signature',
    ],
    [
      'embedded jwk header (self-signed)',
      async () => {
        const { privateKey, publicKey } = await generateKeyPair('ES256');
        return new SignJWT({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', exp: now() + 600 }).setProtectedHeader({ alg: 'ES256', jwk: await exportJWK(publicKey) }).sign(privateKey);
      },
      'invalid_signature',
    ],
    ['jku header pointing elsewhere', () => idp.mint({}, { header: { jku: 'https://127.0.0.1:1/jwks', kid: 'attacker' } }), 'unknown_key'],
    ['payload changed after signing', async () => {
      const [h, , s] = (await idp.mint()).split('.');
      return `${h}.${b64({ iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'admin', exp: now() + 600 })}.${s}`;
    }, 'invalid_signature'],
    ['ECDSA signature of zeros ("psychic signature")', async () => {
      const [h, p] = (await idp.mint({}, { alg: 'ES256' })).split('.');
      return `${h}.${p}.${Buffer.alloc(64).toString('base64url')}`;
    }, 'invalid_signature'],
    ['truncated to two segments', async () => (await idp.mint()).split('.').slice(0, 2).join('.'), 'no_opinion'],
    ['truncated signature', async () => (await idp.mint()).slice(0, -12), 'invalid_signature'],
    ['non-base64url character in the payload', async () => {
      const [h, p, s] = (await idp.mint()).split('.');
      return `${h}.${p!.slice(0, 10)}*${p!.slice(11)}.${s}`;
    }, 'no_opinion'],
    ['non-base64url character in the header', async () => {
      const [h, p, s] = (await idp.mint()).split('.');
      return `${h!.slice(0, 5)}+${h!.slice(6)}.${p}.${s}`;
    }, 'malformed'],
    ['padding in the signature', async () => `${await idp.mint()}==`, 'malformed'],
    ['payload that is not a JSON object', async () => {
      const [h, , s] = (await idp.mint()).split('.');
      return `${h}.${b64([idp.issuer])}.${s}`;
    }, 'no_opinion'],
    ['over 16 KiB', () => idp.mint({ pad: 'x'.repeat(17 * 1024) }), 'too_large'],
    ['JWE (five segments)', async () => `${b64({ alg: 'RSA-OAEP', enc: 'A256GCM' })}.${randomBytes(40).toString('base64url')}.${randomBytes(12).toString('base64url')}.${randomBytes(60).toString('base64url')}.${randomBytes(16).toString('base64url')}`, 'no_opinion'],
    ['JWS JSON serialization', async () => {
      const [h, p, s] = (await idp.mint()).split('.');
      return JSON.stringify({ protected: h, payload: p, signature: s });
    }, 'no_opinion'],
    ['nested token (cty JWT)', () => idp.mint({}, { header: { cty: 'JWT' } }), 'malformed'],
    ['crit header', async () => signRaw({ alg: 'RS256', kid: idp.key('RS256').kid, crit: ['exp'], exp: 1 }, { iss: idp.issuer, aud: TEST_CLIENT_ID, sub: 'alice', exp: now() + 600 }), 'malformed'],
    ['iat of the wrong type', () => idp.mint({ iat: 'yesterday' }), 'malformed'],
    ['a claim validation rule fails', () => idp.mint({ tenant: 'blocked' }), 'claim_validation'],
    ['a CEL expression errors at run time', () => idp.mint({ level: 'not-an-object' }), 'expression_error'],
  ];

  it.each(cases)('%s', async (_name, make, expected) => {
    const { a, logs } = await ready();
    const token = await make();
    const got = await outcome(a, token);
    if (expected === 'no_opinion') expect(got).toBe('no_opinion');
    else {
      expect(got).toMatchObject({ reason: expected });
      const message = (got as { message: string }).message;
      const line = logs.find((l) => l.msg.startsWith('jwt authentication failed'));
      expect(line?.msg).toBe(`jwt authentication failed: ${message}`);
      expect(line?.obj).toMatchObject({ reason: expected });
      for (const part of secretParts(token)) expect(message).not.toContain(part);
    }
    const logText = JSON.stringify(logs);
    for (const part of secretParts(token)) expect(logText).not.toContain(part);
  });

  it("the failing rule's message and the expression's error are what is logged", async () => {
    const { a, logs } = await ready();
    await outcome(a, await idp.mint({ tenant: 'blocked' }));
    await outcome(a, await idp.mint({ level: 'flat' }));
    const msgs = logs.filter((l) => l.msg.startsWith('jwt authentication failed')).map((l) => l.msg);
    expect(msgs).toEqual([
      `jwt authentication failed: oidc: error evaluating claim validation expression: validation expression 'claims.?tenant.orValue("") != "blocked"' failed: tenant blocked`,
      expect.stringMatching(/^jwt authentication failed: expression 'has\(claims\.level\) \? string\(claims\.level\.value\) : ""' resulted in error: /),
    ]);
  });
});
