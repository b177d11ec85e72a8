/**
 * The bearer chain of `--authn impersonate` with JWT authenticators (src/auth/authenticator.ts),
 * against the real OpenID Provider: a JWT of a configured issuer is verified by the proxy and never
 * reviewed; a token no issuer claims goes to TokenReview; a JWT its issuer refuses is 401 without a
 * TokenReview; the WebSocket subprotocol token takes the same path; the source is read per request
 * (a reload swaps the authenticators); the order front proxy → certificate → bearer is unchanged.
 */
import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TokenReviewResult } from '../../../src/api-client.js';
import { decodeAuthenticationConfiguration } from '../../../src/auth/authentication-config.js';
import { validateAuthenticationConfiguration } from '../../../src/auth/authentication-config-validation.js';
import { Authenticator, UnauthorizedError } from '../../../src/auth/authenticator.js';
import { JwtAuthenticationError } from '../../../src/auth/jwt-error.js';
import { JwtAuthenticator } from '../../../src/auth/jwt-authenticator.js';
import { TokenReviewer } from '../../../src/auth/token-review.js';
import { startTestProvider, TEST_CLIENT_ID, type TestProvider } from '../../helpers/oidc-provider.js';

let idp: TestProvider;
let other: TestProvider;
let jwt: JwtAuthenticator;
let jwtOther: JwtAuthenticator;
const reviewed: string[] = [];
const reviewer = new TokenReviewer(
  {
    reviewToken: async (token: string): Promise<TokenReviewResult> => {
      reviewed.push(token);
      return token === 'service-account-token' ? { authenticated: true, user: { username: 'system:serviceaccount:default:builder', groups: ['system:serviceaccounts'], extra: {} } } : { authenticated: false };
    },
  },
  0,
);

function authenticatorFor(issuer: TestProvider): JwtAuthenticator {
  const yaml = `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${issuer.issuer}
    audiences: [${TEST_CLIENT_ID}]
    certificateAuthority: ${JSON.stringify(issuer.ca)}
  claimMappings:
    username: {claim: email, prefix: ""}
    groups: {claim: groups, prefix: "oidc:"}
`;
  const { errors, authenticators } = validateAuthenticationConfiguration(decodeAuthenticationConfiguration(yaml));
  expect(errors).toEqual([]);
  return new JwtAuthenticator(authenticators);
}

beforeAll(async () => {
  [idp, other] = await Promise.all([startTestProvider(), startTestProvider()]);
  jwt = authenticatorFor(idp);
  jwtOther = authenticatorFor(other);
  await Promise.all([jwt.waitReady(15_000, 20), jwtOther.waitReady(15_000, 20)]);
});
afterAll(async () => {
  jwt?.close();
  jwtOther?.close();
  await Promise.all([idp?.close(), other?.close()]);
});

/** A request as Node gives it (plain HTTP socket: no certificate). */
function req(headers: Record<string, string>): IncomingMessage {
  const rawHeaders = Object.entries(headers).flat();
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return { rawHeaders, headers: lower, socket: {} } as unknown as IncomingMessage;
}
const bearer = (token: string): IncomingMessage => req({ Authorization: `Bearer ${token}` });
const upgrade = (token: string): IncomingMessage =>
  req({ Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Protocol': `base64url.bearer.authorization.k8s.io.${Buffer.from(token).toString('base64url')}, v5.channel.k8s.io` });

const claims = { email: 'alice@example.com', email_verified: true, groups: ['developers', 'oncall'] };

describe('the bearer chain with JWT authenticators', () => {
  const source = { authenticator: undefined as unknown as JwtAuthenticator };
  const a = new Authenticator({ tokens: reviewer, jwt: source });
  beforeAll(() => {
    source.authenticator = jwt;
  });

  it('a JWT of the configured issuer is the caller (method jwt, system:authenticated added), with no TokenReview', async () => {
    const before = reviewed.length;
    const token = await idp.mint(claims);
    const caller = await a.authenticate(bearer(token));
    expect(caller).toEqual({ user: { username: 'alice@example.com', groups: ['oidc:developers', 'oidc:oncall', 'system:authenticated'], extra: {} }, method: 'jwt', frontProxy: false });
    expect(reviewed.length).toBe(before);
  });

  it('a jti adds the credential-id extra, as kube-apiserver 1.32+', async () => {
    const caller = await a.authenticate(bearer(await idp.mint({ ...claims, jti: 'id-42' })));
    expect(caller.user.extra).toEqual({ 'authentication.kubernetes.io/credential-id': ['JTI=id-42'] });
  });

  it('a token no JWT authenticator claims goes to TokenReview: not a JWT, or a JWT of another issuer', async () => {
    const before = reviewed.length;
    expect(await a.authenticate(bearer('service-account-token'))).toMatchObject({ method: 'token', user: { username: 'system:serviceaccount:default:builder', groups: ['system:serviceaccounts', 'system:authenticated'] } });
    const foreign = await other.mint(claims);
    await expect(a.authenticate(bearer(foreign))).rejects.toBeInstanceOf(UnauthorizedError);
    expect(reviewed.slice(before)).toEqual(['service-account-token', foreign]);
  });

  it.each<[string, () => Promise<string>, string]>([
    ['expired', () => idp.mint({ ...claims, exp: Math.floor(Date.now() / 1000) - 5 }), 'expired'],
    ['wrong aud', () => idp.mint({ ...claims, aud: 'someone-else' }), 'audience'],
    ['signed by another issuer\'s key that has the same kid', async () => {
      const t = await other.mint(claims);
      // other's signature under idp's iss: the payload is re-encoded, the signature is other's.
      const [h, , sig] = t.split('.');
      const payload = Buffer.from(JSON.stringify({ ...claims, iss: idp.issuer, aud: TEST_CLIENT_ID, exp: Math.floor(Date.now() / 1000) + 60 })).toString('base64url');
      return `${h}.${payload}.${sig}`;
    }, 'invalid_signature'],
  ])('a JWT its issuer refuses (%s) is 401 with the reason kept as the cause, and no TokenReview', async (_what, make, reason) => {
    const before = reviewed.length;
    const token = await make();
    const err = await a.authenticate(bearer(token)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnauthorizedError);
    expect((err as Error).message).toBe('Unauthorized');
    expect((err as Error).cause).toBeInstanceOf(JwtAuthenticationError);
    expect(((err as Error).cause as JwtAuthenticationError).reason).toBe(reason);
    expect(String((err as Error).cause)).not.toContain(token);
    expect(reviewed.length).toBe(before);
  });

  it('the WebSocket subprotocol token takes the same chain', async () => {
    const before = reviewed.length;
    expect(await a.authenticate(upgrade(await idp.mint(claims)))).toMatchObject({ method: 'jwt', user: { username: 'alice@example.com' } });
    await expect(a.authenticate(upgrade(await idp.mint({ ...claims, aud: 'nope' })))).rejects.toBeInstanceOf(UnauthorizedError);
    expect(await a.authenticate(upgrade('service-account-token'))).toMatchObject({ method: 'token' });
    expect(reviewed.length).toBe(before + 1);
  });

  it('reads the authenticators per request: a reload that swaps them takes effect at once', async () => {
    const fromOther = await other.mint(claims);
    await expect(a.authenticate(bearer(fromOther))).rejects.toBeInstanceOf(UnauthorizedError);
    source.authenticator = jwtOther;
    try {
      expect(await a.authenticate(bearer(fromOther))).toMatchObject({ method: 'jwt' });
      const before = reviewed.length;
      // The first issuer is no longer configured: its tokens get no opinion, so TokenReview (which refuses).
      await expect(a.authenticate(bearer(await idp.mint(claims)))).rejects.toBeInstanceOf(UnauthorizedError);
      expect(reviewed.length).toBe(before + 1);
    } finally {
      source.authenticator = jwt;
    }
  });

  it('without JWT authenticators every bearer token goes to TokenReview', async () => {
    const plain = new Authenticator({ tokens: reviewer });
    const before = reviewed.length;
    await expect(plain.authenticate(bearer(await idp.mint(claims)))).rejects.toBeInstanceOf(UnauthorizedError);
    expect(reviewed.length).toBe(before + 1);
  });
});
