/**
 * The WebSocket Origin policy as a table: the flag's syntax, and each rule (no Origin, the explicit
 * list, and, once the caller is known, the client-certificate rule with its same-origin exception:
 * a caller authenticated by its certificate is refused cross-origin whatever token it also carries).
 */
import { describe, expect, it } from 'vitest';
import { checkWebSocketOrigin, isSameOrigin, parseAllowedOrigins, type WebSocketOriginPolicy } from '../../../src/auth/websocket-origin.js';

const WS = { connection: 'Upgrade', upgrade: 'websocket', host: 'proxy.example:6443' };
const token = (t: string) => `base64url.bearer.authorization.k8s.io.${Buffer.from(t).toString('base64url')}`;

function req(headers: Record<string, string>): { headers: Record<string, string>; rawHeaders: string[] } {
  return { headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])), rawHeaders: Object.entries(headers).flat() };
}

describe('parseAllowedOrigins', () => {
  it.each([
    [undefined, '*'],
    ['*', '*'],
    [' * ', '*'],
    ['https://Console.Example.com', ['https://console.example.com']],
    ['https://a.example, http://b.example:8080/', ['https://a.example', 'http://b.example:8080']],
    ['null', ['null']],
  ])('%j → %j', (flag, want) => {
    expect(parseAllowedOrigins(flag)).toEqual(want);
  });

  it.each([
    ['', /empty list/],
    ['*,https://a.example', /cannot be combined/],
    ['a.example', /not an origin/],
    ['https://a.example/path', /not an origin/],
  ])('refuses %j', (flag, message) => {
    expect(() => parseAllowedOrigins(flag)).toThrow(message);
  });
});

describe('checkWebSocketOrigin', () => {
  const any: WebSocketOriginPolicy = { allowed: '*' };
  const listed: WebSocketOriginPolicy = { allowed: ['https://console.example'] };
  const certs: WebSocketOriginPolicy = { allowed: '*', authenticatedBy: 'x509' };
  const certsListed: WebSocketOriginPolicy = { allowed: ['https://console.example'], authenticatedBy: 'x509' };
  const byToken: WebSocketOriginPolicy = { allowed: '*', authenticatedBy: 'token' };
  const byFrontProxy: WebSocketOriginPolicy = { allowed: '*', authenticatedBy: 'requestheader' };

  it.each([
    ['any origin with *', any, { ...WS, Origin: 'https://evil.example' }, undefined],
    ['no Origin with a list', listed, WS, undefined],
    ['a listed origin', listed, { ...WS, Origin: 'https://console.example' }, undefined],
    ['a listed origin, other case', listed, { ...WS, Origin: 'HTTPS://CONSOLE.EXAMPLE' }, undefined],
    ['an unlisted origin', listed, { ...WS, Origin: 'https://evil.example' }, 403],
    ['an unlisted origin even with a token', listed, { ...WS, Origin: 'https://evil.example', Authorization: 'Bearer t' }, 403],
    ['not a WebSocket (SPDY) with an unlisted origin', listed, { connection: 'Upgrade', upgrade: 'SPDY/3.1', Origin: 'https://evil.example' }, undefined],
    ['a plain request with an unlisted origin', listed, { Origin: 'https://evil.example' }, undefined],
    ['client certs: cross-origin without a token', certs, { ...WS, Origin: 'https://evil.example' }, 403],
    ['client certs: same origin', certs, { ...WS, Origin: 'https://proxy.example:6443' }, undefined],
    ['client certs: same origin, other case', certs, { ...WS, Origin: 'https://PROXY.example:6443' }, undefined],
    ['client certs: same host, other port', certs, { ...WS, Origin: 'https://proxy.example' }, 403],
    ['client certs: the null origin', certs, { ...WS, Origin: 'null' }, 403],
    ['authenticated by a certificate: cross-origin with Authorization: Bearer too', certs, { ...WS, Origin: 'https://evil.example', Authorization: 'Bearer t' }, 403],
    ['authenticated by a certificate: cross-origin with a subprotocol token too', certs, { ...WS, Origin: 'https://evil.example', 'Sec-WebSocket-Protocol': `${token('t')}, v5.channel.k8s.io` }, 403],
    ['authenticated by a certificate: a bogus subprotocol token (issue 25)', certs, { ...WS, Origin: 'https://evil.example', 'Sec-WebSocket-Protocol': 'base64url.bearer.authorization.k8s.io.YQ, v4.channel.k8s.io' }, 403],
    ['authenticated by a token: cross-origin', byToken, { ...WS, Origin: 'https://evil.example', Authorization: 'Bearer t' }, undefined],
    ['authenticated by a front proxy: its decision', byFrontProxy, { ...WS, Origin: 'https://evil.example' }, undefined],
    ['authenticated by a token: still an unlisted origin', { allowed: ['https://console.example'], authenticatedBy: 'token' } as WebSocketOriginPolicy, { ...WS, Origin: 'https://evil.example' }, 403],
    ['client certs: cross-origin with Basic credentials only', certs, { ...WS, Origin: 'https://evil.example', Authorization: 'Basic dTpw' }, 403],
    ['client certs: cross-origin listed explicitly', certsListed, { ...WS, Origin: 'https://console.example' }, undefined],
    ['client certs: no Origin (kubectl)', certs, WS, undefined],
  ])('%s', (_name, policy, headers, code) => {
    const refusal = checkWebSocketOrigin(req(headers), policy);
    expect(refusal?.code).toBe(code);
    if (refusal) expect(refusal).toMatchObject({ status: 'Failure', reason: 'Forbidden', code: 403 });
  });

  it('isSameOrigin compares the host with its port as written', () => {
    expect(isSameOrigin('https://a.example:443', 'a.example:443')).toBe(true);
    expect(isSameOrigin('https://a.example', 'a.example:443')).toBe(false);
    expect(isSameOrigin('https://a.example', undefined)).toBe(false);
  });
});
