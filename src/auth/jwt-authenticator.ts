/**
 * The JWT token authenticator: the `jwt[]` entries of an AuthenticationConfiguration, in file order,
 * behind one `authenticateToken` (kube-apiserver's `tokenunion.NewFailOnError` over its JWT
 * authenticators, plus its token cache).
 *
 * A token is routed by its unverified `iss` before any cryptography: a token that is not a compact
 * JWS (`{`-prefixed JSON serialization, not three segments, a payload that is not base64url JSON) or
 * whose `iss` equals no configured `issuer.url` gets "no opinion" (`undefined`), so the chain can
 * try TokenReview next. A token for a configured issuer is verified by that issuer's authenticator
 * only, and its error is final for the JWT set ({@link JwtAuthenticationError}, never containing the
 * token). Tokens over {@link MAX_TOKEN_BYTES} are refused outright.
 *
 * Successful verifications are cached (bounded LRU keyed by the token's SHA-256, never the token)
 * until the token's `exp` or until its issuer's key set changes, whichever is first; failures are not
 * cached (kube-apiserver's failure TTL is 0). Latency is recorded on cache misses for matched issuers.
 */
import { createHash } from 'node:crypto';
import type { CompiledJwtAuthenticator } from './authentication-config-validation.js';
import { decodeBase64Url, IssuerAuthenticator, parseJsonObject, type IssuerAuthenticatorOptions } from './issuer-authenticator.js';
import type { IssuerKeysLogger } from './issuer-keys.js';
import { JwtAuthenticationError, MAX_TOKEN_BYTES } from './jwt-error.js';
import type { JwtMetrics } from './jwt-metrics.js';
import type { UserInfo } from './user-info.js';

/** Most verified tokens remembered; the least recently used go first. */
export const JWT_CACHE_MAX_ENTRIES = 10_000;

/** Where failures and key events are logged (a pino logger fits). */
export type JwtAuthenticatorLogger = IssuerKeysLogger;

/** Options of {@link JwtAuthenticator}. */
export interface JwtAuthenticatorOptions extends Omit<IssuerAuthenticatorOptions, 'metrics' | 'log'> {
  metrics?: JwtMetrics;
  log?: JwtAuthenticatorLogger;
  /** Cache size (tests). */
  cacheMaxEntries?: number;
}

interface CacheEntry {
  user: UserInfo;
  expiresAtMs: number;
  authenticator: IssuerAuthenticator;
  keyGeneration: number;
}

const SILENT: JwtAuthenticatorLogger = { info() {}, warn() {} };

/** The issuer a token claims, unverified (kube-apiserver's `untrustedIssuer`), with its parts; undefined = not a JWT for us. */
function routeToken(token: string): { iss: string; header: string; payload: Record<string, unknown> } | undefined {
  if (token.trimStart().startsWith('{')) return undefined;
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  const bytes = decodeBase64Url(parts[1]!);
  const payload = bytes && parseJsonObject(bytes);
  if (!payload) return undefined;
  const iss = payload.iss ?? '';
  if (typeof iss !== 'string') return undefined;
  // The legacy Google issuer is coalesced with its https form (OpenID Connect Core, "GoogleIss").
  return { iss: iss === 'accounts.google.com' ? 'https://accounts.google.com' : iss, header: parts[0]!, payload };
}

/** The JWT authenticators of one configuration. */
export class JwtAuthenticator {
  readonly #byIssuer = new Map<string, IssuerAuthenticator>();
  readonly #ordered: IssuerAuthenticator[] = [];
  readonly #cache = new Map<string, CacheEntry>();
  readonly #cacheMax: number;
  readonly #metrics: JwtMetrics | undefined;
  readonly #log: JwtAuthenticatorLogger;
  readonly #now: () => number;
  #closed = false;

  /** Build (and start) one authenticator per validated entry; construction never waits on an issuer. */
  constructor(authenticators: readonly CompiledJwtAuthenticator[], options: JwtAuthenticatorOptions = {}) {
    this.#cacheMax = options.cacheMaxEntries ?? JWT_CACHE_MAX_ENTRIES;
    this.#metrics = options.metrics;
    this.#log = options.log ?? SILENT;
    this.#now = options.now ?? Date.now;
    for (const compiled of authenticators) {
      const a = new IssuerAuthenticator(compiled, { ...options, log: this.#log, ...(options.metrics ? { metrics: options.metrics } : {}) });
      this.#byIssuer.set(a.issuer, a);
      this.#ordered.push(a);
      a.start();
    }
  }

  /** The configured issuer URLs, in file order. */
  get issuers(): string[] {
    return this.#ordered.map((a) => a.issuer);
  }

  /**
   * Authenticate a bearer token: the user when it is a valid JWT of a configured issuer, `undefined`
   * when it is not a JWT of any configured issuer (no opinion). Throws {@link JwtAuthenticationError}
   * when it is one and is not valid (logged here, without the token).
   */
  async authenticateToken(token: string): Promise<{ user: UserInfo } | undefined> {
    if (this.#ordered.length === 0 || this.#closed) return undefined;
    if (Buffer.byteLength(token, 'utf8') > MAX_TOKEN_BYTES) {
      const err = new JwtAuthenticationError('too_large', `oidc: token larger than ${MAX_TOKEN_BYTES} bytes`);
      this.#logFailure(err);
      throw err;
    }
    const key = createHash('sha256').update(token).digest('base64');
    const hit = this.#cache.get(key);
    if (hit) {
      if (hit.expiresAtMs >= this.#now() && hit.authenticator.keyGeneration === hit.keyGeneration) {
        this.#cache.delete(key);
        this.#cache.set(key, hit);
        return { user: hit.user };
      }
      this.#cache.delete(key);
    }
    const routed = routeToken(token);
    const authenticator = routed && this.#byIssuer.get(routed.iss);
    if (!routed || !authenticator) return undefined;
    const start = process.hrtime.bigint();
    try {
      const v = await authenticator.verify({ token, header: routed.header, payload: routed.payload });
      this.#metrics?.observeAuthentication(authenticator.issuer, 'success', Number(process.hrtime.bigint() - start) / 1e9);
      this.#remember(key, { user: v.user, expiresAtMs: v.expiresAtMs, authenticator, keyGeneration: v.keyGeneration });
      return { user: v.user };
    } catch (err) {
      this.#metrics?.observeAuthentication(authenticator.issuer, 'failure', Number(process.hrtime.bigint() - start) / 1e9);
      if (err instanceof JwtAuthenticationError) this.#logFailure(err);
      throw err;
    }
  }

  /**
   * Readiness: one line per authenticator that cannot verify tokens yet,
   * `jwt authenticator for <issuer>: <reason>`; empty when all can.
   */
  problems(): string[] {
    return this.#ordered.flatMap((a) => (a.problem === undefined ? [] : [`jwt authenticator for ${a.issuer}: ${a.problem}`]));
  }

  /** Resolves when every authenticator has its keys, or rejects with the problems after `timeoutMs`. */
  async waitReady(timeoutMs: number, pollMs = 100): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const problems = this.problems();
      if (problems.length === 0) return;
      if (this.#closed || Date.now() >= deadline) throw new Error(problems.join('; '));
      await new Promise((r) => setTimeout(r, pollMs).unref());
    }
  }

  /** Stop every authenticator's background fetching and forget the cache; later tokens get no opinion. */
  close(): void {
    this.#closed = true;
    for (const a of this.#ordered) a.close();
    this.#cache.clear();
  }

  #remember(key: string, entry: CacheEntry): void {
    if (this.#cacheMax <= 0) return;
    if (this.#cache.size >= this.#cacheMax) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(key, entry);
  }

  #logFailure(err: JwtAuthenticationError): void {
    this.#log.warn({ issuer: err.issuer, reason: err.reason }, `jwt authentication failed: ${err.message}`);
  }
}
