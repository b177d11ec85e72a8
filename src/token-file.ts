/**
 * The proxy's bearer token when it comes from a file, read as client-go reads one
 * (`transport.NewCachedFileTokenSource`): surrounding whitespace trimmed — a Secret made with
 * `kubectl create secret --from-file` or `echo token > file` ends in `\n` or `\r\n`, which is not a
 * legal header value — and re-read once a minute, keeping the last good token while the file is empty
 * or mid-rotation. One reader serves every use of the proxy's credentials: its upstream calls
 * (`upstream.ts`) and the client-node KubeConfig behind TokenReview, SubjectAccessReview and the
 * kubelet mode's pod and node lookups ({@link useTrimmedTokenFiles}).
 */
import { readFileSync } from 'node:fs';
import type { KubeConfig, User } from '@kubernetes/client-node';
import { ConfigError } from './errors.js';

/**
 * How often a bearer token file is re-read. Bound service-account tokens rotate (the kubelet refreshes
 * them at 80 % of their lifetime); client-go's cached file token source re-reads once a minute too.
 */
export const TOKEN_FILE_REFRESH_MS = 60_000;

/** A bearer token file: read (and checked) once now, re-read every {@link TOKEN_FILE_REFRESH_MS}. */
export class TokenFile {
  readonly path: string;
  #token: string;
  #readAt: number;

  /** Throws ConfigError naming `flag` when the file cannot be read or holds only whitespace. */
  constructor(path: string, flag = '--upstream-token-file') {
    this.path = path;
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      throw new ConfigError(`${flag}: cannot read ${path}: ${(e as Error).message}`, { cause: e });
    }
    this.#token = text.trim();
    if (this.#token === '') throw new ConfigError(`${flag}: ${path} is empty`);
    this.#readAt = Date.now();
  }

  /** The current token, trimmed. */
  token(): string {
    if (Date.now() - this.#readAt >= TOKEN_FILE_REFRESH_MS) {
      try {
        const fresh = readFileSync(this.path, 'utf8').trim();
        if (fresh !== '') this.#token = fresh;
      } catch {
        // Keep the last good token; the file may be mid-rotation.
      }
      this.#readAt = Date.now();
    }
    return this.#token;
  }
}

/** The auth-provider name {@link useTrimmedTokenFiles} gives token-file users. */
export const TOKEN_FILE_AUTH_PROVIDER = 'kube-stream-proxy-token-file';

/** client-node's authenticator interface (not exported by its index). */
type KubeConfigAuthenticator = Parameters<KubeConfig['addAuthenticator']>[0];

/** The client-node authenticator of {@link TOKEN_FILE_AUTH_PROVIDER} users: `Authorization: Bearer <trimmed token>`. */
class TokenFileAuthenticator implements KubeConfigAuthenticator {
  readonly #files = new Map<string, TokenFile>();

  isAuthProvider(user: User): boolean {
    return (user.authProvider as { name?: unknown } | undefined)?.name === TOKEN_FILE_AUTH_PROVIDER;
  }

  async applyAuthentication(user: User, opts: Parameters<KubeConfigAuthenticator['applyAuthentication']>[1]): Promise<void> {
    const path = String((user.authProvider as { config: { path: string } }).config.path);
    let file = this.#files.get(path);
    if (!file) this.#files.set(path, (file = new TokenFile(path, 'token file')));
    // client-node always hands over an object of header names (its FileAuth writes the same way).
    const o = opts as { headers?: Record<string, unknown> };
    o.headers ??= {};
    o.headers.Authorization = `Bearer ${file.token()}`;
  }
}

/**
 * Make `kc` send trimmed tokens, whatever its source: client-node's `tokenFile` auth provider
 * (in-cluster, and the `--upstream-token-file` kubeconfig) reads the file raw, and a kubeconfig's
 * `token-file` (and `token`) is taken raw at load time; both would put a `\n` into the header.
 * Token-file users are switched to a provider backed by {@link TokenFile}; static tokens are trimmed.
 * Returns `kc`.
 */
export function useTrimmedTokenFiles(kc: KubeConfig): KubeConfig {
  kc.addAuthenticator(new TokenFileAuthenticator());
  kc.users = kc.users.map((user): User => {
    const tokenFile = (user.authProvider as { config?: { tokenFile?: unknown } } | undefined)?.config?.tokenFile;
    if (typeof tokenFile === 'string' && tokenFile !== '') {
      return { ...user, authProvider: { name: TOKEN_FILE_AUTH_PROVIDER, config: { path: tokenFile } } };
    }
    if (typeof user.token === 'string' && user.token !== user.token.trim()) return { ...user, token: user.token.trim() };
    return user;
  });
  return kc;
}
