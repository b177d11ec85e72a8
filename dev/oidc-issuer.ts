/**
 * A real OpenID Provider for the demo (`demo --oidc`) and the tests: npm `oidc-provider` (panva,
 * OpenID Certified) over HTTPS on loopback with the dev PKI, with the device flow on, a public
 * native client `kube-stream-proxy` (authorization code with PKCE on any loopback port, refresh
 * tokens, device code) and demo users with passwords behind a small login and consent page
 * (oidc-provider's interaction API; its devInteractions, which accept any password, are off).
 *
 * `oidc-provider` is an optionalDependency, imported when an issuer starts (never by `serve`):
 * without it, {@link DevOidcIssuer.start} throws {@link OidcProviderMissingError} saying how to get it.
 *
 * Its signing keys are generated here, so a test can also mint tokens of its own with jose signed by
 * a key the provider's JWKS serves (`mint`). `rotateKeys` rebuilds the provider with new keys (the
 * JWKS changes, sessions are lost). `jwksRequests` counts GETs of the JWKS; `offline` makes every
 * request fail at the socket, as an unreachable issuer does.
 */
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload, type CryptoKey } from 'jose';
import type Provider from 'oidc-provider';
import type { Configuration } from 'oidc-provider';
import { createTestPki, type TestPki } from './dev-pki.js';

/** The client id of the kubectl plugin. */
export const TEST_CLIENT_ID = 'kube-stream-proxy';

/** npm `oidc-provider` is not installed (an optionalDependency: `npm install --omit=optional` leaves it out). */
export class OidcProviderMissingError extends Error {
  override readonly name = 'OidcProviderMissingError';
  readonly code = 'DEV_OIDC_PROVIDER_MISSING' as const;
}

/** The oidc-provider constructor, imported on first use. */
async function providerClass(): Promise<typeof Provider> {
  try {
    return (await import('oidc-provider')).default;
  } catch (e) {
    throw new OidcProviderMissingError(
      `the demo's OpenID Provider needs the npm package oidc-provider (an optionalDependency of kube-stream-proxy): run \`npm install\` without --omit=optional, or \`npm install oidc-provider@~9.13.3\` (${(e as Error).message})`,
      { cause: e },
    );
  }
}

/** A demo user. */
export interface TestUser {
  password: string;
  email: string;
  emailVerified?: boolean;
  groups: string[];
  name?: string;
}

/** The default users. */
export const TEST_USERS: Record<string, TestUser> = {
  alice: { password: 'alice-password', email: 'alice@example.com', emailVerified: true, groups: ['developers', 'oncall'], name: 'Alice' },
  bob: { password: 'bob-password', email: 'bob@example.com', emailVerified: false, groups: ['viewers'], name: 'Bob' },
};

/** One signing key: the private half for minting, the public JWK the provider serves. */
export interface TestSigningKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  privateKey: CryptoKey;
  privateJwk: JWK;
}

/** Options of {@link startTestProvider}. */
export interface TestProviderOptions {
  users?: Record<string, TestUser>;
  /** ID token lifetime in seconds (default 3600). */
  idTokenTtl?: number;
  /** Device code lifetime in seconds (default oidc-provider's 600). */
  deviceCodeTtl?: number;
  /** Listen host (default 127.0.0.1) and port (default 0: a free one). */
  host?: string;
  port?: number;
  /** Folder for its PKI (default: a new temp folder, removed on close). */
  dir?: string;
}

async function newKeys(generation: number): Promise<TestSigningKey[]> {
  const out: TestSigningKey[] = [];
  for (const alg of ['RS256', 'ES256'] as const) {
    const { privateKey } = await generateKeyPair(alg, { extractable: true });
    const kid = `${alg.toLowerCase()}-${generation}`;
    const privateJwk = { ...(await exportJWK(privateKey)), kid, alg, use: 'sig' };
    out.push({ kid, alg, privateKey, privateJwk });
  }
  return out;
}

function readBody(req: IncomingMessage): Promise<URLSearchParams> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(new URLSearchParams(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', reject);
  });
}

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(res: ServerResponse, title: string, body: string, status = 200): void {
  res.statusCode = status;
  res.setHeader('content-type', 'text/html; charset=utf-8');
  res.end(
    `<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title><style>${PAGE_STYLE}</style></head>` +
      `<body><main><p class="brand">kube-stream-proxy demo OpenID Provider</p><h1>${title}</h1>${body}</main></body></html>`,
  );
}

const PAGE_STYLE =
  'body{font-family:system-ui,sans-serif;background:#f3f4f6;margin:0}main{max-width:22rem;margin:4rem auto;background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px #0002}' +
  '.brand{color:#326ce5;font-weight:600;margin:0}h1{font-size:1.4rem}label{display:block;margin:.8rem 0 .2rem}input{width:100%;box-sizing:border-box;padding:.5rem;font-size:1rem}' +
  'button{margin-top:1.2rem;padding:.6rem 1.2rem;font-size:1rem;background:#326ce5;color:#fff;border:0;border-radius:4px}.error{color:#b00020}';

/** The sign-in form (the field names are what a browser submits). */
function loginForm(uid: string): string {
  return (
    `<form id="login" method="post" action="/interaction/${escapeHtml(uid)}/login">` +
    '<label for="login-name">User</label><input id="login-name" type="text" name="login" autocomplete="username" autofocus/>' +
    '<label for="login-password">Password</label><input id="login-password" type="password" name="password" autocomplete="current-password"/>' +
    '<button type="submit">Sign in</button></form>'
  );
}

/** A running test provider. */
export class TestProvider {
  /** Requests for the JWKS so far. */
  jwksRequests = 0;
  /** Requests for the discovery document so far. */
  discoveryRequests = 0;
  /** When true, every connection is destroyed before an answer. */
  offline = false;
  /** The grant type of every successful token request, in order. */
  readonly grants: string[] = [];
  keys: TestSigningKey[] = [];
  #provider!: Provider;
  #Provider!: typeof Provider;
  #generation = 0;
  #ownDir = true;

  private constructor(
    readonly server: Server,
    readonly issuer: string,
    readonly pki: TestPki,
    readonly dir: string,
    readonly users: Record<string, TestUser>,
    readonly idTokenTtl: number,
    readonly deviceCodeTtl: number | undefined,
  ) {}

  /** The PEM CA that verifies the provider's serving certificate. */
  get ca(): string {
    return this.pki.ca.cert.toString('utf8');
  }

  /** The JWKS path (`jwks_uri` of the discovery document). */
  get jwksPath(): string {
    return '/jwks';
  }

  static async start(options: TestProviderOptions = {}): Promise<TestProvider> {
    const ProviderClass = await providerClass();
    const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'ksp-oidc-')));
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const pki = await createTestPki(dir);
    let self: TestProvider | undefined;
    const server = createServer({ cert: pki.server.cert, key: pki.server.key }, (req, res) => {
      if (!self) return res.destroy();
      self.#handle(req, res);
    });
    const host = options.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const port = (server.address() as { port: number }).port;
    self = new TestProvider(server, `https://${host.includes(':') ? `[${host}]` : host}:${port}`, pki, dir, options.users ?? TEST_USERS, options.idTokenTtl ?? 3600, options.deviceCodeTtl);
    self.#Provider = ProviderClass;
    self.#ownDir = options.dir === undefined;
    await self.rotateKeys();
    return self;
  }

  /** Replace the signing keys by new ones (and the provider serving them). */
  async rotateKeys(): Promise<TestSigningKey[]> {
    this.#generation++;
    this.keys = await newKeys(this.#generation);
    this.#provider = this.#build();
    return this.keys;
  }

  /** A key by algorithm. */
  key(alg: 'RS256' | 'ES256' = 'RS256'): TestSigningKey {
    return this.keys.find((k) => k.alg === alg)!;
  }

  /**
   * A token signed with one of the provider's keys: `iss` is the issuer, `aud` the client, `sub`
   * alice, valid for 10 minutes, unless `claims` say otherwise (`undefined` values are dropped).
   */
  async mint(claims: Record<string, unknown> = {}, options: { alg?: 'RS256' | 'ES256'; header?: Record<string, unknown>; key?: TestSigningKey } = {}): Promise<string> {
    const key = options.key ?? this.key(options.alg);
    const now = Math.floor(Date.now() / 1000);
    const payload: Record<string, unknown> = { iss: this.issuer, aud: TEST_CLIENT_ID, sub: 'alice', iat: now, exp: now + 600, ...claims };
    for (const k of Object.keys(payload)) if (payload[k] === undefined) delete payload[k];
    return new SignJWT(payload as JWTPayload).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT', ...options.header }).sign(key.privateKey);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
    if (this.#ownDir) await rm(this.dir, { recursive: true, force: true });
  }

  #build(): Provider {
    const users = this.users;
    const config: Configuration = {
      clients: [
        {
          client_id: TEST_CLIENT_ID,
          application_type: 'native',
          token_endpoint_auth_method: 'none',
          grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
          response_types: ['code'],
          redirect_uris: ['http://127.0.0.1/callback'],
        },
      ],
      jwks: { keys: this.keys.map((k) => k.privateJwk) } as Configuration['jwks'],
      features: { devInteractions: { enabled: false }, deviceFlow: { enabled: true } },
      scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
      claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
      conformIdTokenClaims: false,
      ttl: { IdToken: this.idTokenTtl, AccessToken: this.idTokenTtl, ...(this.deviceCodeTtl ? { DeviceCode: this.deviceCodeTtl } : {}) },
      cookies: { keys: ['test-cookie-key'] },
      interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
      findAccount: async (_ctx, id) => {
        const u = users[id];
        if (!u) return undefined;
        return {
          accountId: id,
          claims: async () => ({ sub: id, email: u.email, email_verified: u.emailVerified ?? false, groups: u.groups, name: u.name ?? id }),
        };
      },
    };
    const provider = new this.#Provider(this.issuer, config);
    // Keep the test output free of oidc-provider's development warnings and of expected errors.
    provider.on('server_error', () => {});
    provider.on('grant.success', (ctx) => this.grants.push(String(ctx.oidc.params?.grant_type)));
    return provider;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    if (this.offline) {
      req.socket.destroy();
      return;
    }
    const path = (req.url ?? '/').split('?')[0]!;
    if (path === this.jwksPath) this.jwksRequests++;
    if (path === '/.well-known/openid-configuration') this.discoveryRequests++;
    const provider = this.#provider;
    if (path.startsWith('/interaction/')) {
      this.#interaction(provider, req, res, path).catch((err: unknown) => page(res, 'Error', `<p>${escapeHtml(String(err))}</p>`, 500));
      return;
    }
    void provider.callback()(req, res);
  }

  /** The login and consent pages (GET shows, POST `/interaction/UID/login|confirm` acts). */
  async #interaction(provider: Provider, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const [, , uid, action] = path.split('/');
    const details = await provider.interactionDetails(req, res);
    if (req.method === 'GET') {
      if (details.prompt.name === 'login') {
        page(res, 'Sign in', loginForm(uid!));
      } else {
        page(res, 'Authorize', `<p>${escapeHtml(String(details.params.client_id))} asks for ${escapeHtml(String(details.params.scope))}</p><form id="consent" method="post" action="/interaction/${escapeHtml(uid!)}/confirm"><button type="submit">Allow</button></form>`);
      }
      return;
    }
    const form = await readBody(req);
    if (action === 'login') {
      const login = form.get('login') ?? '';
      const user = this.users[login];
      if (!user || user.password !== form.get('password')) {
        page(res, 'Sign in', `<p class="error">Invalid login or password</p>${loginForm(uid!)}`, 401);
        return;
      }
      await provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
      return;
    }
    // confirm: grant what the prompt says is missing.
    const accountId = details.session!.accountId;
    const grant = details.grantId ? (await provider.Grant.find(details.grantId))! : new provider.Grant({ accountId, clientId: String(details.params.client_id) });
    const missing = details.prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[] };
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: details.grantId ? {} : { grantId } }, { mergeWithLastSubmission: true });
  }
}

/** Start a {@link TestProvider}. */
export function startTestProvider(options: TestProviderOptions = {}): Promise<TestProvider> {
  return TestProvider.start(options);
}

/** The demo's names for the same things. */
export { TestProvider as DevOidcIssuer, startTestProvider as startDevOidcIssuer, TEST_CLIENT_ID as DEMO_CLIENT_ID };
export type { TestUser as DevOidcUser, TestProviderOptions as DevOidcIssuerOptions };
