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
 * Verdicts are cached (bounded LRU keyed by the token's SHA-256, never the token), both ways:
 * - an accepted token until its `exp` or until its issuer's key set changes, whichever is first;
 * - a refused token whose signature verified (expired, wrong audience, a claim rule, a CEL error or
 *   its cost limit) for {@link JWT_FAILURE_CACHE_TTL_MS}, or until the key set changes: a signed
 *   token cannot be varied at will, so its evaluation runs once per TTL however often it is replayed;
 * - never a token whose signature did not verify (anyone can make those: they must not fill the cache).
 * Concurrent presentations of one token share one verification (kube-apiserver's cached token
 * authenticator joins them the same way). Latency is recorded on cache misses for matched issuers
 * (kube-apiserver's definition), so a cache hit is visible as a missing observation.
 */
import { createHash } from 'node:crypto';
import type { CompiledJwtAuthenticator } from './authentication-config-validation.js';
import { decodeBase64Url, IssuerAuthenticator, parseJsonObject, type IssuerAuthenticatorOptions, type Verdict } from './issuer-authenticator.js';
import type { IssuerKeysLogger } from './issuer-keys.js';
import { JwtAuthenticationError, MAX_TOKEN_BYTES } from './jwt-error.js';
import type { JwtMetrics } from './jwt-metrics.js';
import type { UserInfo } from './user-info.js';

/** Most verdicts remembered; the least recently used go first. */
export const JWT_CACHE_MAX_ENTRIES = 10_000;

/**
 * How long the refusal of a genuine (signature-verified) token is remembered. kube-apiserver caches
 * its token authenticators' answers for 10 s (`TokenSuccessCacheTTL`) and its failures for 0 s by
 * default (`TokenFailureCacheTTL`; concurrent requests still share one evaluation): this proxy keeps
 * refusals for the same 10 s, so a replayed token whose claims are expensive to evaluate costs one
 * evaluation per 10 s, while a token refused for its time bounds (`nbf` a little ahead) or a
 * configuration about to change is re-examined soon enough.
 */
export const JWT_FAILURE_CACHE_TTL_MS = 10_000;

/** Where failures and key events are logged (a pino logger fits). */
export type JwtAuthenticatorLogger = IssuerKeysLogger;

/** Options of {@link JwtAuthenticator}. */
export interface JwtAuthenticatorOptions extends Omit<IssuerAuthenticatorOptions, 'metrics' | 'log'> {
  metrics?: JwtMetrics;
  log?: JwtAuthenticatorLogger;
  /** Cache size (tests). */
  cacheMaxEntries?: number;
}

/** What a token came to: its user, or its refusal. */
type Outcome = { user: UserInfo } | { error: JwtAuthenticationError };

interface CacheEntry {
  outcome: Outcome;
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
  /** Verifications in progress, by token hash: later presentations wait for the first one's outcome. */
  readonly #inFlight = new Map<string, Promise<Outcome>>();
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
    const outcome = this.#cached(key) ?? (await this.#verifyOnce(key, token));
    if (outcome === undefined) return undefined;
    if ('user' in outcome) return { user: outcome.user };
    this.#logFailure(outcome.error);
    throw outcome.error;
  }

  /** The cached outcome for `key` while it holds (marked most recently used), else undefined. */
  #cached(key: string): Outcome | undefined {
    const hit = this.#cache.get(key);
    if (!hit) return undefined;
    this.#cache.delete(key);
    if (hit.expiresAtMs < this.#now() || hit.authenticator.keyGeneration !== hit.keyGeneration) return undefined;
    this.#cache.set(key, hit);
    return hit.outcome;
  }

  /** Verify a token not in the cache, joining a verification of the same token already under way; undefined = not ours. */
  async #verifyOnce(key: string, token: string): Promise<Outcome | undefined> {
    const pending = this.#inFlight.get(key);
    if (pending) return pending;
    const routed = routeToken(token);
    const authenticator = routed && this.#byIssuer.get(routed.iss);
    if (!routed || !authenticator) return undefined;
    const verification = this.#verify(key, authenticator, { token, header: routed.header, payload: routed.payload });
    this.#inFlight.set(key, verification);
    try {
      return await verification;
    } finally {
      this.#inFlight.delete(key);
    }
  }

  /** One verification: measured, and its outcome cached when it says something lasting about the token. */
  async #verify(key: string, authenticator: IssuerAuthenticator, t: Parameters<IssuerAuthenticator['verify']>[0]): Promise<Outcome> {
    const start = process.hrtime.bigint();
    let v: Verdict;
    try {
      v = await authenticator.verify(t);
    } catch (err) {
      this.#metrics?.observeAuthentication(authenticator.issuer, 'failure', Number(process.hrtime.bigint() - start) / 1e9);
      throw err;
    }
    this.#metrics?.observeAuthentication(authenticator.issuer, v.ok ? 'success' : 'failure', Number(process.hrtime.bigint() - start) / 1e9);
    if (v.ok) {
      this.#remember(key, { outcome: { user: v.user }, expiresAtMs: v.expiresAtMs, authenticator, keyGeneration: v.keyGeneration });
      return { user: v.user };
    }
    if (v.keyGeneration !== undefined) {
      this.#remember(key, { outcome: { error: v.error }, expiresAtMs: this.#now() + JWT_FAILURE_CACHE_TTL_MS, authenticator, keyGeneration: v.keyGeneration });
    }
    return { error: v.error };
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
