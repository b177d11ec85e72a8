/**
 * `kube-stream-proxy login`: a kubectl exec credential plugin that logs in to an OpenID Provider and
 * prints an `ExecCredential` with the ID token. Flags use int128/kubelogin's `get-token` names where
 * the meaning is the same (docs/decisions.md). The flow per run (one kubectl command is one run):
 * 1. take the cache entry's lock (concurrent kubectl processes wait for one login);
 * 2. a cached ID token valid for more than {@link REFRESH_MARGIN_MS} more is printed as is;
 * 3. otherwise a cached refresh token is used (the answer must contain an ID token);
 * 4. otherwise (or when the refresh fails) the device authorization grant runs, or with `--browser`
 *    the authorization code flow with PKCE; the tokens are cached (0600) and the ID token printed.
 * Everything for the user goes to stderr; stdout carries only the ExecCredential. Tokens are never
 * printed anywhere else.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import * as client from 'openid-client';
import { authcodeFlow } from './authcode-flow.js';
import { deviceFlow, type GrantTokens } from './device-flow.js';
import { execCredential, jwtExpiry, readExecInfo } from './exec-credential.js';
import { discoverProvider, oauthErrorText } from './oidc-client.js';
import { defaultTokenCacheDir, TokenCache } from './token-cache.js';

/** A cached ID token expiring sooner than this is refreshed first (kubelogin refreshes only after expiry). */
export const REFRESH_MARGIN_MS = 60_000;

/** `--authentication-timeout-sec` default (kubelogin's). */
export const DEFAULT_AUTHENTICATION_TIMEOUT_SEC = 180;

/** How long a run waits for another process's login holding the cache lock. */
export const CACHE_LOCK_TIMEOUT_MS = 10 * 60_000;

/** The `login --help` text. */
export const LOGIN_USAGE = `kube-stream-proxy login: a kubectl exec credential plugin (client.authentication.k8s.io/v1) that gets
an OpenID Connect ID token and prints it as an ExecCredential, for a proxy (or cluster) configured with
--authentication-config for the same issuer. By default it uses the device authorization grant: it
prints a URL and a code on stderr, which you open and approve in any browser. With --browser it uses
the authorization code flow with PKCE and a loopback redirect on this machine. Tokens are cached in
--token-cache-dir (mode 0600) and the refresh token is used before the ID token expires.

Usage:
  kube-stream-proxy login --oidc-issuer-url URL --oidc-client-id ID [flags]

kubeconfig:
  users:
  - name: oidc
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1
        command: kube-stream-proxy
        args: [login, --oidc-issuer-url=https://issuer.example.com, --oidc-client-id=kubernetes]
        interactiveMode: Never

Flags:
  --oidc-issuer-url URL                The provider's issuer URL (required).
  --oidc-client-id ID                  The client id (required).
  --oidc-client-secret SECRET          The client secret (confidential clients only).
  --oidc-extra-scope SCOPE             A scope to request besides openid (repeatable, or comma-separated),
                                       e.g. offline_access for refresh tokens, email, groups.
  --grant-type device-code|authcode    The login flow (default device-code).
  --browser                            Same as --grant-type=authcode.
  --listen-address HOST:PORT           [authcode] The loopback redirect's address (default 127.0.0.1:0, a random port).
  --skip-open-browser                  [authcode] Do not run xdg-open; only print the URL.
  --oidc-auth-request-extra-params K=V [authcode] An extra authorization request parameter (repeatable), e.g. prompt=consent.
  --authentication-timeout-sec N       [authcode] How long to wait for the browser (default ${DEFAULT_AUTHENTICATION_TIMEOUT_SEC}).
  --certificate-authority PATH         PEM CA that verifies the provider (repeatable); default: the system roots.
  --certificate-authority-data BASE64  The same, inline (base64 of the PEM).
  --token-cache-dir DIR                Token cache directory (default $KUBECACHEDIR/kube-stream-proxy or
                                       ~/.kube/cache/kube-stream-proxy).
  --force-refresh                      Ignore a cached ID token that is still valid.
  -h, --help                           Show this help.
`;

/** Where the command writes and what it reads (tests inject these). */
export interface LoginIo {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
  env: NodeJS.ProcessEnv;
  /** Clock for the cache decision, in milliseconds. */
  now: () => number;
}

/** The options the flags give. */
export interface LoginOptions {
  issuer: string;
  clientId: string;
  clientSecret?: string;
  scopes: string[];
  grantType: 'device-code' | 'authcode';
  listenAddress?: string;
  skipOpenBrowser: boolean;
  extraParams: Record<string, string>;
  timeoutMs: number;
  ca: string[];
  cacheDir: string;
  forceRefresh: boolean;
}

/** A command-line problem (exit code 2). */
export class LoginUsageError extends Error {
  override readonly name = 'LoginUsageError';
}

/** Parse the flags; `undefined` for `--help`. Throws {@link LoginUsageError}. */
export function parseLoginArgs(argv: string[], env: NodeJS.ProcessEnv): LoginOptions | undefined {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        'oidc-issuer-url': { type: 'string' },
        'oidc-client-id': { type: 'string' },
        'oidc-client-secret': { type: 'string' },
        'oidc-extra-scope': { type: 'string', multiple: true },
        'grant-type': { type: 'string' },
        browser: { type: 'boolean' },
        'listen-address': { type: 'string' },
        'skip-open-browser': { type: 'boolean' },
        'oidc-auth-request-extra-params': { type: 'string', multiple: true },
        'authentication-timeout-sec': { type: 'string' },
        'certificate-authority': { type: 'string', multiple: true },
        'certificate-authority-data': { type: 'string' },
        'token-cache-dir': { type: 'string' },
        'force-refresh': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new LoginUsageError((err as Error).message);
  }
  if (values.help) return undefined;
  const issuer = values['oidc-issuer-url'];
  const clientId = values['oidc-client-id'];
  if (!issuer) throw new LoginUsageError('--oidc-issuer-url is missing');
  if (!clientId) throw new LoginUsageError('--oidc-client-id is missing');
  const grant = values['grant-type'] ?? (values.browser ? 'authcode' : 'device-code');
  if (grant !== 'device-code' && grant !== 'authcode') throw new LoginUsageError(`--grant-type must be one of (device-code|authcode), not ${JSON.stringify(grant)}`);
  if (values.browser && grant !== 'authcode') throw new LoginUsageError('--browser is the authcode grant; it cannot be combined with --grant-type=device-code');
  const extraParams: Record<string, string> = {};
  for (const kv of values['oidc-auth-request-extra-params'] ?? []) {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new LoginUsageError(`--oidc-auth-request-extra-params ${JSON.stringify(kv)}: want KEY=VALUE`);
    extraParams[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  const timeoutSec = Number(values['authentication-timeout-sec'] ?? DEFAULT_AUTHENTICATION_TIMEOUT_SEC);
  if (!Number.isFinite(timeoutSec) || timeoutSec <= 0) throw new LoginUsageError('--authentication-timeout-sec must be a positive number');
  const ca: string[] = [];
  for (const path of values['certificate-authority'] ?? []) {
    try {
      ca.push(readFileSync(path, 'utf8'));
    } catch (err) {
      throw new LoginUsageError(`--certificate-authority ${path}: ${(err as Error).message}`);
    }
  }
  if (values['certificate-authority-data']) ca.push(Buffer.from(values['certificate-authority-data'], 'base64').toString('utf8'));
  const scopes = ['openid', ...(values['oidc-extra-scope'] ?? []).flatMap((s) => s.split(',')).map((s) => s.trim()).filter((s) => s !== '')];
  return {
    issuer,
    clientId,
    ...(values['oidc-client-secret'] ? { clientSecret: values['oidc-client-secret'] } : {}),
    scopes: [...new Set(scopes)],
    grantType: grant,
    ...(values['listen-address'] ? { listenAddress: values['listen-address'] } : {}),
    skipOpenBrowser: values['skip-open-browser'] ?? false,
    extraParams,
    timeoutMs: timeoutSec * 1000,
    ca,
    cacheDir: values['token-cache-dir'] ?? defaultTokenCacheDir(env),
    forceRefresh: values['force-refresh'] ?? false,
  };
}

/** Get a valid ID token for `o`: cached, refreshed, or from a new login. */
export async function obtainIdToken(o: LoginOptions, io: LoginIo): Promise<string> {
  const print = (line: string): void => void io.stderr.write(`${line}\n`);
  const cache = new TokenCache(o.cacheDir, { issuer: o.issuer, clientId: o.clientId, ...(o.clientSecret ? { clientSecret: o.clientSecret } : {}), scopes: o.scopes, extraParams: o.extraParams });
  await cache.lock(CACHE_LOCK_TIMEOUT_MS);
  try {
    const cached = await cache.load();
    const exp = cached.id_token ? jwtExpiry(cached.id_token) : undefined;
    if (cached.id_token && !o.forceRefresh && exp !== undefined && exp - io.now() > REFRESH_MARGIN_MS) return cached.id_token;
    const config = await discoverProvider({ issuer: o.issuer, clientId: o.clientId, ...(o.clientSecret ? { clientSecret: o.clientSecret } : {}), ca: o.ca });
    if (cached.refresh_token) {
      try {
        const t = await client.refreshTokenGrant(config, cached.refresh_token);
        if (!t.id_token) throw new Error('the refresh answer has no id_token');
        await cache.save({ id_token: t.id_token, refresh_token: t.refresh_token ?? cached.refresh_token });
        return t.id_token;
      } catch (err) {
        print(`The refresh token was not accepted (${oauthErrorText(err)}); logging in again.`);
        await cache.clear();
      }
    }
    const tokens: GrantTokens =
      o.grantType === 'authcode'
        ? await authcodeFlow(config, { scopes: o.scopes, ...(o.listenAddress ? { listenAddress: o.listenAddress } : {}), skipOpenBrowser: o.skipOpenBrowser, extraParams: o.extraParams, timeoutMs: o.timeoutMs, print })
        : await deviceFlow(config, o.scopes, print);
    await cache.save(tokens);
    return tokens.id_token;
  } finally {
    await cache.unlock();
  }
}

/** Run `login` with `argv` (after the subcommand); resolves with the exit code. */
export async function loginCommand(argv: string[], io: LoginIo = { stdout: process.stdout, stderr: process.stderr, env: process.env, now: Date.now }): Promise<number> {
  let options: LoginOptions | undefined;
  try {
    options = parseLoginArgs(argv, io.env);
  } catch (err) {
    io.stderr.write(`kube-stream-proxy login: ${(err as Error).message}\nRun 'kube-stream-proxy login --help' for the flags.\n`);
    return 2;
  }
  if (!options) {
    io.stdout.write(LOGIN_USAGE);
    return 0;
  }
  try {
    const info = readExecInfo(io.env);
    const token = await obtainIdToken(options, io);
    io.stdout.write(execCredential(info, token, jwtExpiry(token)));
    return 0;
  } catch (err) {
    io.stderr.write(`kube-stream-proxy login: ${oauthErrorText(err)}\n`);
    return 1;
  }
}
