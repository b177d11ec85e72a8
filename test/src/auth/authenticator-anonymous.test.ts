/**
 * Anonymous requests in `--authn impersonate` (src/auth/authenticator.ts), as kube-apiserver admits
 * them from `AuthenticationConfiguration.anonymous`: only requests that present no credentials, only on
 * the listed paths (exact, decoded, without the query) when conditions are given, as
 * `system:anonymous` in `system:unauthenticated`; credentials that fail stay 401.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { TokenReviewResult } from '../../../src/api-client.js';
import { decodeAuthenticationConfiguration } from '../../../src/auth/authentication-config.js';
import { validateAuthenticationConfiguration } from '../../../src/auth/authentication-config-validation.js';
import { anonymousAllowed, Authenticator, UnauthorizedError, type AuthenticatorConfig } from '../../../src/auth/authenticator.js';
import { TokenReviewer } from '../../../src/auth/token-review.js';

const reviewed: string[] = [];
const tokens = new TokenReviewer(
  {
    reviewToken: async (token: string): Promise<TokenReviewResult> => {
      reviewed.push(token);
      return token === 'good' ? { authenticated: true, user: { username: 'bob', groups: ['devs'], extra: {} } } : { authenticated: false };
    },
  },
  0,
);

function anonymousFrom(yaml: string): AuthenticatorConfig['anonymous'] {
  const config = decodeAuthenticationConfiguration(`apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n${yaml}`);
  expect(validateAuthenticationConfiguration(config).errors).toEqual([]);
  return config.anonymous;
}

function req(url: string, headers: Record<string, string> = {}, socket: object = {}): IncomingMessage {
  const rawHeaders = Object.entries(headers).flat();
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return { url, rawHeaders, headers: lower, socket } as unknown as IncomingMessage;
}

/** A TLS socket whose peer presented a certificate the handshake did not accept (no CA of ours issued it). */
const unverifiedCertSocket = { authorized: false, getPeerCertificate: () => ({ raw: Buffer.from('not checked'), fingerprint256: 'x' }) };
const noCertSocket = { authorized: false, getPeerCertificate: () => ({}) };

const ANONYMOUS = { user: { username: 'system:anonymous', groups: ['system:unauthenticated'], extra: {} }, method: 'anonymous', frontProxy: false };

describe('anonymous requests (AuthenticationConfiguration.anonymous)', () => {
  const enabledEverywhere = new Authenticator({ tokens, anonymous: anonymousFrom('anonymous:\n  enabled: true\n')! });
  const onPaths = new Authenticator({
    tokens,
    anonymous: anonymousFrom('anonymous:\n  enabled: true\n  conditions:\n  - path: /livez\n  - path: /version\n')!,
  });

  it('not configured or not enabled: no credentials is 401', async () => {
    await expect(new Authenticator({ tokens }).authenticate(req('/version'))).rejects.toBeInstanceOf(UnauthorizedError);
    const disabled = new Authenticator({ tokens, anonymous: anonymousFrom('anonymous:\n  enabled: false\n')! });
    await expect(disabled.authenticate(req('/version'))).rejects.toBeInstanceOf(UnauthorizedError);
  });

  it('enabled without conditions: any path without credentials is system:anonymous in system:unauthenticated (not system:authenticated)', async () => {
    expect(await enabledEverywhere.authenticate(req('/api/v1/namespaces/default/pods/demo/exec?command=sh'))).toEqual(ANONYMOUS);
    expect(await enabledEverywhere.authenticate(req('/version'))).toEqual(ANONYMOUS);
  });

  it('with conditions: only a listed path, compared exactly after percent-decoding and without the query', async () => {
    expect(await onPaths.authenticate(req('/version'))).toEqual(ANONYMOUS);
    expect(await onPaths.authenticate(req('/version?timeout=32s'))).toEqual(ANONYMOUS);
    expect(await onPaths.authenticate(req('/%76ersion'))).toEqual(ANONYMOUS);
    for (const url of ['/version/', '/versions', '/api', '/livez/etcd', '/', '/%zz', '//version']) {
      await expect(onPaths.authenticate(req(url)), url).rejects.toBeInstanceOf(UnauthorizedError);
    }
  });

  it('credentials that fail are 401, never anonymous: a bad bearer token (reviewed), a bad subprotocol token, a bad certificate', async () => {
    reviewed.length = 0;
    await expect(enabledEverywhere.authenticate(req('/version', { Authorization: 'Bearer wrong' }))).rejects.toBeInstanceOf(UnauthorizedError);
    expect(reviewed).toEqual(['wrong']);
    const ws = { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Protocol': `base64url.bearer.authorization.k8s.io.${Buffer.from('wrong2').toString('base64url')}, v5.channel.k8s.io` };
    await expect(enabledEverywhere.authenticate(req('/version', ws))).rejects.toBeInstanceOf(UnauthorizedError);
    expect(reviewed).toEqual(['wrong', 'wrong2']);
    const malformed = { ...ws, 'Sec-WebSocket-Protocol': 'base64url.bearer.authorization.k8s.io.***, v5.channel.k8s.io' };
    await expect(enabledEverywhere.authenticate(req('/version', malformed))).rejects.toBeInstanceOf(UnauthorizedError);

    const withCa = new Authenticator({ tokens, clientCa: [], anonymous: anonymousFrom('anonymous:\n  enabled: true\n')! });
    await expect(withCa.authenticate(req('/version', {}, unverifiedCertSocket))).rejects.toBeInstanceOf(UnauthorizedError);
    expect(await withCa.authenticate(req('/version', {}, noCertSocket))).toEqual(ANONYMOUS);
  });

  it('good credentials win over anonymous; Authorization with another scheme is no credential (anonymous)', async () => {
    expect((await enabledEverywhere.authenticate(req('/version', { Authorization: 'Bearer good' }))).user.username).toBe('bob');
    expect(await enabledEverywhere.authenticate(req('/version', { Authorization: 'Basic YWxpY2U6cHc=' }))).toEqual(ANONYMOUS);
  });

  it('anonymousAllowed: kube-apiserver anonymous authenticator conditions', () => {
    expect(anonymousAllowed(undefined, '/x')).toBe(false);
    expect(anonymousAllowed({ enabled: true, conditions: [] }, undefined)).toBe(true);
    expect(anonymousAllowed({ enabled: true, conditions: [{ path: '/readyz' }] }, '/readyz?verbose')).toBe(true);
    expect(anonymousAllowed({ enabled: true, conditions: [{ path: '/readyz' }] }, '/READYZ')).toBe(false);
  });
});
