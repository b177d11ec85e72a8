/**
 * `kube-stream-proxy login` end to end against a real OpenID Provider (oidc-provider over HTTPS on
 * 127.0.0.1): the device flow approved over HTTP exactly as a user's browser would (verification
 * page, code, login with the demo user's password, confirmation), the ExecCredential it prints (its
 * token accepted by the JWT authenticator), the 0600 cache reused by the next run, the refresh token
 * used when the ID token is about to expire, a denied and an expired device code, and the
 * authorization code flow with PKCE through the loopback redirect.
 */
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeAuthenticationConfiguration } from '../../../src/auth/authentication-config.js';
import { validateAuthenticationConfiguration } from '../../../src/auth/authentication-config-validation.js';
import { JwtAuthenticator } from '../../../src/auth/jwt-authenticator.js';
import { main } from '../../../src/cli.js';
import { loginCommand, REFRESH_MARGIN_MS, type LoginIo } from '../../../src/login/login-command.js';
import { tokenCacheName } from '../../../src/login/token-cache.js';
import { startTestProvider, TEST_CLIENT_ID, TEST_USERS, type TestProvider } from '../../helpers/oidc-provider.js';
import { TestBrowser, type Page } from '../../helpers/test-browser.js';

let idp: TestProvider;
let dir: string;
let caFile: string;

beforeAll(async () => {
  idp = await startTestProvider();
  dir = await mkdtemp(join(tmpdir(), 'ksp-login-'));
  caFile = join(dir, 'idp-ca.pem');
  await writeFile(caFile, idp.ca);
});
afterAll(async () => {
  await idp?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const EXEC_INFO = JSON.stringify({ kind: 'ExecCredential', apiVersion: 'client.authentication.k8s.io/v1', spec: { interactive: false } });

interface Run {
  code: Promise<number>;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the first stderr line matching `re`. */
  line: (re: RegExp) => Promise<RegExpExecArray>;
}

function run(args: string[], opts: { cacheDir: string; now?: () => number; env?: NodeJS.ProcessEnv }): Run {
  let out = '';
  let err = '';
  const waiters: { re: RegExp; resolve: (m: RegExpExecArray) => void }[] = [];
  const check = (): void => {
    for (const w of [...waiters]) {
      const m = w.re.exec(err);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  const io: LoginIo = {
    stdout: { write: (s: string) => (out += s) },
    stderr: {
      write: (s: string) => {
        err += s;
        check();
      },
    },
    env: { KUBERNETES_EXEC_INFO: EXEC_INFO, ...opts.env },
    now: opts.now ?? Date.now,
  };
  const argv = ['--oidc-issuer-url', idp.issuer, '--oidc-client-id', TEST_CLIENT_ID, '--oidc-extra-scope=offline_access,email', '--oidc-extra-scope', 'groups', '--certificate-authority', caFile, '--token-cache-dir', opts.cacheDir, ...args];
  return {
    code: loginCommand(argv, io),
    stdout: () => out,
    stderr: () => err,
    line: (re) =>
      new Promise((resolve) => {
        waiters.push({ re, resolve });
        check();
      }),
  };
}

/** What a user does in the browser for a device code: open the page, type the code, sign in, confirm. */
async function approveDeviceCode(verificationUri: string, userCode: string, user = 'alice', action: 'confirm' | 'abort' = 'confirm'): Promise<Page> {
  const browser = new TestBrowser(idp.ca);
  let page = await browser.get(verificationUri);
  expect(page.status).toBe(200);
  page = await browser.submit(page, browser.form(page, 'op.deviceInputForm'), { user_code: userCode });
  const confirm = browser.form(page, 'op.deviceConfirmForm');
  if (action === 'abort') return browser.submit(page, confirm, { abort: 'yes' });
  page = await browser.submit(page, confirm);
  expect(page.body).toContain('Sign in');
  page = await browser.submit(page, browser.form(page), { login: user, password: TEST_USERS[user]!.password });
  expect(page.body).toContain('Authorize');
  page = await browser.submit(page, browser.form(page));
  return page;
}

function credential(stdout: string): { token: string; expirationTimestamp: string } {
  const c = JSON.parse(stdout) as { kind: string; apiVersion: string; status: { token: string; expirationTimestamp: string } };
  expect(c.kind).toBe('ExecCredential');
  expect(c.apiVersion).toBe('client.authentication.k8s.io/v1');
  expect(c.status.expirationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  return c.status;
}

async function userOf(token: string): Promise<unknown> {
  const yaml = `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${idp.issuer}
    audiences: [${TEST_CLIENT_ID}]
    certificateAuthority: ${JSON.stringify(idp.ca)}
  claimMappings:
    username: {claim: email, prefix: ""}
    groups: {claim: groups, prefix: "oidc:"}
`;
  const { errors, authenticators } = validateAuthenticationConfiguration(decodeAuthenticationConfiguration(yaml));
  expect(errors).toEqual([]);
  const a = new JwtAuthenticator(authenticators);
  try {
    await a.waitReady(10_000, 20);
    return (await a.authenticateToken(token))?.user;
  } finally {
    a.close();
  }
}

describe('kube-stream-proxy login', () => {
  it('device flow approved in a browser, then the cache, then the refresh token', async () => {
    const cacheDir = join(dir, 'cache-device');
    const first = run([], { cacheDir });
    const [, verificationUri, userCode] = await first.line(/open (\S+) and enter the code (\S+)\)/);
    expect(first.stderr()).toMatch(/^Please visit the following URL in your browser: https:\/\/127\.0\.0\.1:\d+\/device\?user_code=/);
    const done = await approveDeviceCode(verificationUri!, userCode!);
    expect(done.status).toBe(200);
    expect(await first.code).toBe(0);
    const c1 = credential(first.stdout());
    expect(await userOf(c1.token)).toEqual({ username: 'alice@example.com', groups: ['oidc:developers', 'oidc:oncall'], extra: {} });
    expect(first.stderr()).not.toContain(c1.token);
    expect(idp.grants.at(-1)).toBe('urn:ietf:params:oauth:grant-type:device_code');

    // The cache: one 0600 file in a 0700 directory, named after the settings.
    const file = join(cacheDir, `${tokenCacheName({ issuer: idp.issuer, clientId: TEST_CLIENT_ID, scopes: ['openid', 'offline_access', 'email', 'groups'], extraParams: {} })}.json`);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(cacheDir)).mode & 0o777).toBe(0o700);

    // Second run: served from the cache, no request to the provider's token endpoint, nothing on stderr.
    const grants = idp.grants.length;
    const second = run([], { cacheDir });
    expect(await second.code).toBe(0);
    expect(credential(second.stdout()).token).toBe(c1.token);
    expect(second.stderr()).toBe('');
    expect(idp.grants.length).toBe(grants);

    // Third run, as if the ID token were about to expire: the refresh token gets a new one.
    const expSoon = Date.parse(c1.expirationTimestamp) - REFRESH_MARGIN_MS + 1000;
    const third = run([], { cacheDir, now: () => expSoon });
    expect(await third.code).toBe(0);
    expect(idp.grants.slice(grants)).toEqual(['refresh_token']);
    const c3 = credential(third.stdout());
    expect(await userOf(c3.token)).toMatchObject({ username: 'alice@example.com' });
    expect(third.stderr()).toBe('');
  });

  it('a device code denied in the browser fails with a clear message (exit 1, nothing on stdout)', async () => {
    const r = run([], { cacheDir: join(dir, 'cache-denied') });
    const [, uri, code] = await r.line(/open (\S+) and enter the code (\S+)\)/);
    await approveDeviceCode(uri!, code!, 'alice', 'abort');
    expect(await r.code).toBe(1);
    expect(r.stderr()).toContain('kube-stream-proxy login: the login was denied in the browser');
    expect(r.stdout()).toBe('');
  });

  it('a device code nobody approves expires with a clear message', async () => {
    const short = await startTestProvider({ deviceCodeTtl: 2 });
    try {
      const ca = join(dir, 'short-ca.pem');
      await writeFile(ca, short.ca);
      let err = '';
      const code = await loginCommand(['--oidc-issuer-url', short.issuer, '--oidc-client-id', TEST_CLIENT_ID, '--certificate-authority', ca, '--token-cache-dir', join(dir, 'cache-expired')], {
        stdout: { write: () => true },
        stderr: { write: (s: string) => (err += s) },
        env: {},
        now: Date.now,
      });
      expect(code).toBe(1);
      expect(err).toContain('kube-stream-proxy login: the device code expired before it was approved; run the command again');
    } finally {
      await short.close();
    }
  });

  it('--browser: authorization code flow with PKCE and a loopback redirect', async () => {
    const r = run(['--browser', '--skip-open-browser'], { cacheDir: join(dir, 'cache-authcode') });
    const [, url] = await r.line(/Please visit the following URL in your browser: (\S+)/);
    const auth = new URL(url!);
    expect(auth.searchParams.get('code_challenge_method')).toBe('S256');
    expect(auth.searchParams.get('redirect_uri')).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    const browser = new TestBrowser(idp.ca);
    let page = await browser.get(url!);
    page = await browser.submit(page, browser.form(page), { login: 'bob', password: TEST_USERS.bob!.password });
    page = await browser.submit(page, browser.form(page));
    expect(page.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback\?/);
    expect(page.body).toContain('Authenticated');
    expect(await r.code).toBe(0);
    const c = credential(r.stdout());
    expect(JSON.parse(Buffer.from(c.token.split('.')[1]!, 'base64url').toString())).toMatchObject({ sub: 'bob', aud: TEST_CLIENT_ID, iss: idp.issuer });
    expect(idp.grants.at(-1)).toBe('authorization_code');
  });

  it('a wrong password is refused on the login page', async () => {
    const r = run(['--browser', '--skip-open-browser', '--authentication-timeout-sec', '2'], { cacheDir: join(dir, 'cache-badpw') });
    const [, url] = await r.line(/Please visit the following URL in your browser: (\S+)/);
    const browser = new TestBrowser(idp.ca);
    let page = await browser.get(url!);
    page = await browser.submit(page, browser.form(page), { login: 'alice', password: 'wrong' });
    expect(page.status).toBe(401);
    expect(page.body).toContain('Invalid login or password');
    expect(await r.code).toBe(1);
    expect(r.stderr()).toContain('no answer from the browser within 2 s');
  });

  it('flags: kubelogin names, required ones, conflicts; registered as a CLI subcommand', async () => {
    const errs: string[] = [];
    const io: LoginIo = { stdout: { write: () => true }, stderr: { write: (s: string) => errs.push(s) }, env: {}, now: Date.now };
    expect(await loginCommand(['--oidc-client-id', 'x'], io)).toBe(2);
    expect(errs.at(-1)).toContain('--oidc-issuer-url is missing');
    expect(await loginCommand(['--oidc-issuer-url', 'https://x', '--oidc-client-id', 'x', '--browser', '--grant-type', 'device-code'], io)).toBe(2);
    expect(errs.at(-1)).toContain('--browser is the authcode grant');
    expect(await loginCommand(['--oidc-issuer-url', 'https://x', '--oidc-client-id', 'x', '--grant-type', 'password'], io)).toBe(2);
    expect(await loginCommand(['--issuer', 'https://x'], io)).toBe(2);
    expect(errs.at(-1)).toContain("Unknown option '--issuer'");
    const bad = { ...io, env: { KUBERNETES_EXEC_INFO: '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1alpha1"}' } };
    expect(await loginCommand(['--oidc-issuer-url', idp.issuer, '--oidc-client-id', 'x', '--token-cache-dir', join(dir, 'c')], bad)).toBe(1);
    expect(errs.at(-1)).toContain('unsupported ExecCredential apiVersion "client.authentication.k8s.io/v1alpha1"');
    let help = '';
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((s: string) => ((help += s), true)) as typeof process.stdout.write;
    try {
      expect(await main(['login', '--help'])).toBe(0);
    } finally {
      process.stdout.write = write;
    }
    expect(help).toContain('kube-stream-proxy login --oidc-issuer-url URL --oidc-client-id ID');
  });
});
