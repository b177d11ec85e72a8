/**
 * `--websocket-allowed-origins` end to end: a browser-style client (a `ws` client sending `Origin`)
 * through the proxy. A listed origin execs; another gets 403 before any upstream work — nothing
 * reaches the dev cluster, not even a TokenReview (asserted on its request log). With client
 * certificates on, a cross-origin upgrade that carries no bearer token is refused unless its origin
 * is listed explicitly; same-origin pages and token holders are unaffected.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';
import { startSecurityFixture, USERS, webSocketGetExec, type SecurityFixture } from './security-fixture.js';

const skipReason = kubectlE2eSkipReason();
const CONSOLE = 'https://console.example';
const EVIL = 'https://evil.example';

describe.skipIf(skipReason !== undefined)('an explicit origin list (passthrough)', () => {
  let f: SecurityFixture;
  beforeAll(async () => {
    f = await startSecurityFixture({ authn: 'passthrough', websocketAllowedOrigins: `${CONSOLE}, https://other.example` });
  });
  afterAll(async () => {
    await f?.close();
  });

  it.each(['v5.channel.k8s.io', 'v4.base64.channel.k8s.io'])('%s: a listed origin execs; another gets 403 and nothing reaches the upstream', async (protocol) => {
    const ok = await webSocketGetExec(f.proxy.url, USERS.admin.token, ['echo', 'console'], f.pki.ca.cert, 'subprotocol', { protocol, origin: CONSOLE });
    expect(ok).toMatchObject({ status: 101, output: 'console\n', protocol });
    const seen = f.cluster.requests.length;
    const refused = await webSocketGetExec(f.proxy.url, USERS.admin.token, ['echo', 'pwned'], f.pki.ca.cert, 'subprotocol', { protocol, origin: EVIL });
    expect(refused).toMatchObject({ status: 403, output: '' });
    expect(JSON.parse(refused.body!)).toMatchObject({ kind: 'Status', code: 403, reason: 'Forbidden' });
    expect(JSON.parse(refused.body!).message).toContain(`"${EVIL}"`);
    expect(f.cluster.requests.length).toBe(seen);
  });

  it('clients that send no Origin (kubectl, libraries) are not affected', async () => {
    const r = await webSocketGetExec(f.proxy.url, USERS.admin.token, ['echo', 'no-origin'], f.pki.ca.cert);
    expect(r).toMatchObject({ status: 101, output: 'no-origin\n' });
  });
});

describe.skipIf(skipReason !== undefined)('client certificates on, default origins (*)', () => {
  let f: SecurityFixture;
  let sameOrigin: string;
  beforeAll(async () => {
    f = await startSecurityFixture({ authn: 'impersonate', clientCerts: true });
    sameOrigin = `https://${new URL(f.proxy.url).host}`;
  });
  afterAll(async () => {
    await f?.close();
  });

  it('a cross-origin page whose browser presents a client certificate is refused before any upstream work', async () => {
    const seen = f.cluster.requests.length;
    const r = await webSocketGetExec(f.proxy.url, '', ['echo', 'pwned'], f.pki.ca.cert, 'none', { origin: EVIL, client: f.pki.clients.aliceCert! });
    expect(r).toMatchObject({ status: 403, output: '' });
    expect(JSON.parse(r.body!)).toMatchObject({ kind: 'Status', code: 403, reason: 'Forbidden' });
    // Not even the SubjectAccessReview was asked.
    expect(f.cluster.requests.length).toBe(seen);
  });

  it('the same certificate from a same-origin page, or with no Origin, execs', async () => {
    for (const origin of [sameOrigin, undefined]) {
      const r = await webSocketGetExec(f.proxy.url, '', ['echo', 'cert'], f.pki.ca.cert, 'none', { ...(origin ? { origin } : {}), client: f.pki.clients.aliceCert! });
      expect({ origin, ...r }).toMatchObject({ origin, status: 101, output: 'cert\n' });
    }
  });

  it('a cross-origin page holding a bearer token (header or subprotocol) execs: its credentials are explicit', async () => {
    for (const via of ['header', 'subprotocol'] as const) {
      const r = await webSocketGetExec(f.proxy.url, USERS.alice.token, ['echo', via], f.pki.ca.cert, via, { origin: EVIL });
      expect({ via, ...r }).toMatchObject({ via, status: 101, output: `${via}\n` });
    }
  });
});

describe.skipIf(skipReason !== undefined)('client certificates on, an explicit origin list', () => {
  let f: SecurityFixture;
  beforeAll(async () => {
    f = await startSecurityFixture({ authn: 'impersonate', clientCerts: true, websocketAllowedOrigins: CONSOLE });
  });
  afterAll(async () => {
    await f?.close();
  });

  it('a listed cross-origin page may use the certificate; an unlisted one with a token is refused before its TokenReview', async () => {
    const listed = await webSocketGetExec(f.proxy.url, '', ['echo', 'listed'], f.pki.ca.cert, 'none', { origin: CONSOLE, client: f.pki.clients.aliceCert! });
    expect(listed).toMatchObject({ status: 101, output: 'listed\n' });
    const seen = f.cluster.requests.length;
    const other = await webSocketGetExec(f.proxy.url, USERS.alice.token, ['echo', 'pwned'], f.pki.ca.cert, 'header', { origin: EVIL });
    expect(other).toMatchObject({ status: 403, output: '' });
    expect(f.cluster.requests.length).toBe(seen);
  });
});
