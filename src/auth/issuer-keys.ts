/**
 * One OpenID issuer's signing keys, kept current for the JWT authenticator.
 *
 * Start-up never waits on the issuer: discovery (`{issuer.url}/.well-known/openid-configuration`, or
 * `issuer.discoveryURL`) and the first JWKS fetch are tried at once and then every
 * {@link DISCOVERY_RETRY_INTERVAL_MS} until both succeed (kube-apiserver polls discovery every 10 s);
 * until then {@link IssuerKeys.problem} says why, and tokens for this issuer are refused. The
 * discovery document's `issuer` must equal `issuer.url`, and its `jwks_uri` is read once, as
 * kube-apiserver does with its JWKS metrics on.
 *
 * Refresh: the key set is re-fetched every {@link JWKS_REFRESH_INTERVAL_MS} (so a key removed at the
 * issuer stops verifying tokens within that bound), and on demand when a token names a key the set
 * does not have, at most once per {@link UNKNOWN_KEY_REFRESH_MIN_INTERVAL_MS} however many such tokens
 * arrive (concurrent callers share one fetch). A failed fetch keeps the keys there were. Each key-set
 * change bumps {@link IssuerKeys.generation}, which retires the token cache's entries.
 */
import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { fetchIssuerDocument } from './issuer-http.js';
import type { JwtMetrics } from './jwt-metrics.js';

/** How often discovery and the first JWKS fetch are retried until both succeed (kube-apiserver: 10 s). */
export const DISCOVERY_RETRY_INTERVAL_MS = 10_000;

/**
 * Period of the JWKS refresh: the bound on how long a key removed from the issuer's JWKS keeps
 * verifying tokens (the limit is 5 minutes; a fetch a minute per issuer costs nothing).
 */
export const JWKS_REFRESH_INTERVAL_MS = 60_000;

/** Least time between two fetches caused by tokens naming an unknown key. */
export const UNKNOWN_KEY_REFRESH_MIN_INTERVAL_MS = 5_000;

/** The discovery path appended to the issuer URL (without its trailing slashes). */
export const WELL_KNOWN_PATH = '/.well-known/openid-configuration';

/** Where {@link IssuerKeys} reports (a pino logger fits). */
export interface IssuerKeysLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Options of {@link IssuerKeys}. */
export interface IssuerKeysOptions {
  /** `issuer.url`. */
  issuer: string;
  /** `issuer.discoveryURL` (empty: derived from the issuer). */
  discoveryURL?: string;
  /** `issuer.certificateAuthority` (PEM). */
  certificateAuthority?: string;
  metrics?: JwtMetrics;
  log?: IssuerKeysLogger;
  /** Overrides for tests. */
  retryIntervalMs?: number;
  refreshIntervalMs?: number;
  unknownKeyMinIntervalMs?: number;
  fetchTimeoutMs?: number;
  now?: () => number;
}

const SILENT: IssuerKeysLogger = { info() {}, warn() {} };

/** A key set in force. */
export interface KeySnapshot {
  /** jose's key resolver over the set (selects by `kid`, `alg`, `use`, `key_ops`). */
  resolve: JWTVerifyGetKey;
  /** Increases by one each time the key set's content changes. */
  generation: number;
}

function reasonOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The signing keys of one issuer, fetched in the background. */
export class IssuerKeys {
  readonly #o: IssuerKeysOptions;
  readonly #log: IssuerKeysLogger;
  readonly #now: () => number;
  #jwksUri: string | undefined;
  #keys: KeySnapshot | undefined;
  #body: string | undefined;
  #problem: string;
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  #lastOnDemand = Number.NEGATIVE_INFINITY;
  #closed = false;

  constructor(options: IssuerKeysOptions) {
    this.#o = options;
    this.#log = options.log ?? SILENT;
    this.#now = options.now ?? Date.now;
    this.#problem = 'not initialized';
  }

  /** Begin discovery and key fetching (returns at once; {@link ready} resolves when the keys are known). */
  start(): void {
    void this.#initialize();
  }

  /** The keys in force, or undefined while they are not known. */
  get keys(): KeySnapshot | undefined {
    return this.#keys;
  }

  /** Why the keys are not usable yet (`not initialized`, the last error), or undefined once they are. */
  get problem(): string | undefined {
    return this.#keys ? undefined : this.#problem;
  }

  /** The discovery document's URL. */
  get discoveryURL(): string {
    return this.#o.discoveryURL || this.#o.issuer.replace(/\/+$/, '') + WELL_KNOWN_PATH;
  }

  /**
   * A token named a key the set lacks: re-fetch the set unless one was fetched on demand less than
   * {@link UNKNOWN_KEY_REFRESH_MIN_INTERVAL_MS} ago. Resolves when the fetch (possibly another
   * caller's) is done, with whether the key set changed.
   */
  async refreshForUnknownKey(): Promise<boolean> {
    if (this.#closed || !this.#jwksUri) return false;
    const before = this.#keys?.generation;
    if (this.#inFlight) {
      await this.#inFlight;
      return this.#keys?.generation !== before;
    }
    const minMs = this.#o.unknownKeyMinIntervalMs ?? UNKNOWN_KEY_REFRESH_MIN_INTERVAL_MS;
    if (this.#now() - this.#lastOnDemand < minMs) return false;
    this.#lastOnDemand = this.#now();
    await this.#fetchKeys();
    return this.#keys?.generation !== before;
  }

  /** Stop all background work. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(ms: number, fn: () => Promise<void>): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void fn(), ms);
    this.#timer.unref();
  }

  async #initialize(): Promise<void> {
    if (this.#closed) return;
    if (!this.#jwksUri) {
      try {
        this.#jwksUri = await this.#discover();
      } catch (err) {
        this.#fail(`fetching the discovery document ${this.discoveryURL}: ${reasonOf(err)}`);
        this.#schedule(this.#o.retryIntervalMs ?? DISCOVERY_RETRY_INTERVAL_MS, () => this.#initialize());
        return;
      }
    }
    await this.#fetchKeys();
    if (!this.#keys) this.#schedule(this.#o.retryIntervalMs ?? DISCOVERY_RETRY_INTERVAL_MS, () => this.#initialize());
  }

  #fail(problem: string): void {
    if (this.#closed) return;
    if (!this.#keys) this.#problem = problem;
    this.#log.warn({ issuer: this.#o.issuer }, `jwt authenticator for ${this.#o.issuer}: ${problem}`);
  }

  async #discover(): Promise<string> {
    const body = await fetchIssuerDocument(this.discoveryURL, this.#fetchOptions());
    let doc: unknown;
    try {
      doc = JSON.parse(body);
    } catch {
      throw new Error('the discovery document is not JSON');
    }
    const d = (doc ?? {}) as { issuer?: unknown; jwks_uri?: unknown };
    if (d.issuer !== this.#o.issuer) {
      throw new Error(`oidc: issuer did not match the issuer returned by provider, expected ${JSON.stringify(this.#o.issuer)} got ${JSON.stringify(d.issuer ?? '')}`);
    }
    if (typeof d.jwks_uri !== 'string' || d.jwks_uri === '') throw new Error('provider did not return JWKS URL');
    new URL(d.jwks_uri); // throws on a bad URL
    return d.jwks_uri;
  }

  #fetchOptions(): { ca?: string; timeoutMs?: number } {
    return {
      ...(this.#o.certificateAuthority ? { ca: this.#o.certificateAuthority } : {}),
      ...(this.#o.fetchTimeoutMs !== undefined ? { timeoutMs: this.#o.fetchTimeoutMs } : {}),
    };
  }

  /** One JWKS fetch (single-flight), then the next periodic refresh is scheduled. */
  #fetchKeys(): Promise<void> {
    this.#inFlight ??= (async () => {
      try {
        await this.#fetchKeysOnce();
      } finally {
        this.#inFlight = undefined;
        if (this.#keys) this.#schedule(this.#o.refreshIntervalMs ?? JWKS_REFRESH_INTERVAL_MS, () => this.#fetchKeys());
      }
    })();
    return this.#inFlight;
  }

  async #fetchKeysOnce(): Promise<void> {
    const uri = this.#jwksUri!;
    let body: string;
    let resolve: JWTVerifyGetKey;
    try {
      body = await fetchIssuerDocument(uri, this.#fetchOptions());
      const jwks = JSON.parse(body) as JSONWebKeySet;
      resolve = createLocalJWKSet(jwks); // throws JWKSInvalid unless {keys: [...]}
    } catch (err) {
      if (this.#closed) return;
      this.#o.metrics?.recordJwksFetch(this.#o.issuer, 'failure');
      this.#fail(`fetching the JWKS ${uri}: ${err instanceof SyntaxError ? 'not JSON' : reasonOf(err)}`);
      return;
    }
    if (this.#closed) return;
    this.#o.metrics?.recordJwksFetch(this.#o.issuer, 'success', body);
    if (body === this.#body) return;
    const first = this.#keys === undefined;
    this.#body = body;
    this.#keys = { resolve, generation: (this.#keys?.generation ?? 0) + 1 };
    this.#log.info({ issuer: this.#o.issuer }, `jwt authenticator for ${this.#o.issuer}: ${first ? 'keys fetched' : 'key set changed'}`);
  }
}
