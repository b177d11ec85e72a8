/**
 * Verification of a token for one `jwt[]` entry, as kube-apiserver's JWT authenticator (go-oidc
 * `Verify` + `AuthenticateToken`) does it, with `jose` doing the JWS work:
 * - the header must be a base64url JSON object whose `alg` is one of the allowed asymmetric
 *   algorithms (all nine RS/ES/PS ones from a configuration file; `--oidc-signing-algs` for the flags),
 *   so `none`, every HMAC (`HS256` keyed with the issuer's public key included) and EdDSA are refused
 *   before any key is looked at; `crit` and nested tokens (`cty: JWT`) are refused;
 * - the signature must verify with a key of the issuer's JWKS (jose picks by `kid`/`alg`; with
 *   several candidates each is tried, as go-oidc does); an unknown key triggers one rate-limited
 *   refresh ({@link IssuerKeys});
 * - then `iss` equal to `issuer.url` (byte for byte), `aud` containing one of `audiences`, `exp`
 *   required and not passed (no leeway: expired when `exp < now`), `nbf` at most 60 s ahead
 *   (go-oidc's allowance), `iat` not checked (kube-apiserver does not);
 * - then the claim mappings and rules (`jwt-claims.ts`).
 * kube-apiserver checks the claims before the signature; this checks the signature first, so a
 * forged token is never told apart by its claims.
 */
import { compactVerify, errors as joseErrors, type KeyObject, type CryptoKey } from 'jose';
import type { CompiledJwtAuthenticator } from './authentication-config-validation.js';
import { IssuerKeys, type IssuerKeysOptions, type KeySnapshot } from './issuer-keys.js';
import { userFromClaims, type Claims } from './jwt-claims.js';
import { JwtAuthenticationError, messageValue, type JwtFailureReason } from './jwt-error.js';
import type { UserInfo } from './user-info.js';

/** Every algorithm a configuration file's authenticator accepts (`oidc.AllValidSigningAlgorithms`). */
export const ALL_SIGNING_ALGORITHMS = ['ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'RS256', 'RS384', 'RS512'] as const;

/** go-oidc's allowance for `nbf` in the future. */
export const NOT_BEFORE_LEEWAY_MS = 60_000;

/** A verified token: who it is and until when the answer holds. */
export interface VerifiedToken {
  user: UserInfo;
  /** `exp`, in milliseconds since the epoch. */
  expiresAtMs: number;
  /** The key-set generation that verified it. */
  keyGeneration: number;
}

/**
 * What {@link IssuerAuthenticator.verify} decided. A refusal carries `keyGeneration` when the
 * signature verified with that key set: the token is genuine and refused for its claims (expired,
 * audience, a claim rule, a CEL error or cost), a verdict that stands while those keys do. A refusal
 * without it (malformed, forged, unknown key, keys not known yet) says nothing lasting about the token.
 */
export type Verdict = ({ ok: true } & VerifiedToken) | { ok: false; error: JwtAuthenticationError; keyGeneration?: number };

/** Options of {@link IssuerAuthenticator}. */
export interface IssuerAuthenticatorOptions extends Omit<IssuerKeysOptions, 'issuer' | 'discoveryURL' | 'certificateAuthority'> {
  /** Allowed `alg` values; default {@link ALL_SIGNING_ALGORITHMS}. */
  signingAlgorithms?: readonly string[];
}

/** The three segments of a compact JWS and its (unverified) decoded header and payload. */
export interface ParsedToken {
  token: string;
  header: string;
  payload: Claims;
}

function fail(reason: JwtFailureReason, message: string): never {
  throw new JwtAuthenticationError(reason, message);
}

/** Strict unpadded base64url (Go's `RawURLEncoding`): undefined for anything else. */
export function decodeBase64Url(segment: string): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(segment) || segment.length % 4 === 1) return undefined;
  return Buffer.from(segment, 'base64url');
}

/** A JSON object, or undefined. */
export function parseJsonObject(bytes: Buffer): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(bytes.toString('utf8'));
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function rfc3339(ms: number): string {
  return Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms);
}

/** A NumericDate claim in milliseconds, or why not. */
function numericDate(claims: Claims, name: string): number | undefined {
  const v = claims[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) fail('malformed', `oidc: malformed jwt: claim ${name} is not a number`);
  return v * 1000;
}

/** The authenticator of one issuer. */
export class IssuerAuthenticator {
  readonly issuer: string;
  readonly #a: CompiledJwtAuthenticator;
  readonly #keys: IssuerKeys;
  readonly #algorithms: readonly string[];
  readonly #audiences: ReadonlySet<string>;
  readonly #now: () => number;

  constructor(compiled: CompiledJwtAuthenticator, options: IssuerAuthenticatorOptions = {}) {
    this.#a = compiled;
    this.issuer = compiled.config.issuer.url;
    this.#algorithms = options.signingAlgorithms ?? ALL_SIGNING_ALGORITHMS;
    this.#audiences = new Set(compiled.config.issuer.audiences);
    this.#now = options.now ?? Date.now;
    const { signingAlgorithms: _ignored, ...keyOptions } = options;
    this.#keys = new IssuerKeys({
      ...keyOptions,
      issuer: this.issuer,
      discoveryURL: compiled.config.issuer.discoveryURL,
      certificateAuthority: compiled.config.issuer.certificateAuthority,
    });
  }

  /** Start fetching the issuer's keys in the background. */
  start(): void {
    this.#keys.start();
  }

  /** Why this authenticator cannot verify tokens yet, or undefined when it can. */
  get problem(): string | undefined {
    return this.#keys.problem;
  }

  /** The current key-set generation (0 before the keys are known). */
  get keyGeneration(): number {
    return this.#keys.keys?.generation ?? 0;
  }

  /** Stop background fetching. */
  close(): void {
    this.#keys.close();
  }

  /**
   * Verify a token already routed here by its `iss`: the user, or the refusal (a
   * {@link JwtAuthenticationError} with `issuer` set). Other errors (bugs) are thrown.
   */
  async verify(t: ParsedToken): Promise<Verdict> {
    let signedWith: number | undefined;
    try {
      return { ok: true, ...(await this.#verify(t, (generation) => (signedWith = generation))) };
    } catch (err) {
      if (!(err instanceof JwtAuthenticationError)) throw err;
      const error = new JwtAuthenticationError(err.reason, err.message, this.issuer);
      return signedWith === undefined ? { ok: false, error } : { ok: false, error, keyGeneration: signedWith };
    }
  }

  async #verify(t: ParsedToken, signatureVerified: (generation: number) => void): Promise<VerifiedToken> {
    const snapshot = this.#keys.keys;
    if (!snapshot) fail('not_initialized', 'oidc: authenticator not initialized');
    const signature = t.token.slice(t.token.lastIndexOf('.') + 1);
    if (!decodeBase64Url(signature)) fail('malformed', 'oidc: malformed jwt: the signature is not unpadded base64url');
    const headerBytes = decodeBase64Url(t.header);
    const header = headerBytes && parseJsonObject(headerBytes);
    if (!header) fail('malformed', 'oidc: malformed jwt: the header is not base64url-encoded JSON');
    const alg = header.alg;
    if (typeof alg !== 'string' || !this.#algorithms.includes(alg)) {
      fail('unsupported_algorithm', `oidc: verify token: oidc: id token signed with unsupported algorithm, expected [${this.#algorithms.join(' ')}] got ${JSON.stringify(messageValue(alg ?? ''))}`);
    }
    if (header.crit !== undefined) fail('malformed', 'oidc: malformed jwt: critical header parameters are not supported');
    if (typeof header.cty === 'string' && header.cty.toUpperCase() === 'JWT') fail('malformed', 'oidc: malformed jwt: nested tokens are not accepted');
    const generation = await this.#verifySignature(t.token, header, snapshot);
    signatureVerified(generation);
    const claims = t.payload;
    this.#checkClaims(claims);
    const user = userFromClaims(this.#a, claims);
    if (user.username === '') fail('claim_mapping', 'oidc: empty username');
    return { user, expiresAtMs: (claims.exp as number) * 1000, keyGeneration: generation };
  }

  /** Verify with the current keys; one rate-limited refresh when no key fits. Returns the generation used. */
  async #verifySignature(token: string, header: Record<string, unknown>, snapshot: KeySnapshot): Promise<number> {
    let outcome = await this.#tryKeys(token, snapshot);
    // A token naming an unknown key (or, without `kid`, matching none) may be signed by a key the
    // issuer added since the last fetch.
    if (outcome === 'no_key' || (outcome === 'bad_signature' && header.kid === undefined)) {
      if (await this.#keys.refreshForUnknownKey()) outcome = await this.#tryKeys(token, this.#keys.keys!);
    }
    if (outcome === 'no_key') {
      fail('unknown_key', `oidc: verify token: no key of the issuer's JWKS matches kid ${JSON.stringify(messageValue(header.kid ?? ''))} and alg ${header.alg as string}`);
    }
    if (outcome === 'bad_signature') fail('invalid_signature', 'oidc: verify token: failed to verify signature: failed to verify id token signature');
    if (outcome === 'malformed') fail('malformed', 'oidc: malformed jwt: not a valid compact JWS');
    return outcome;
  }

  /** Verify against one key set: its generation when the signature verifies, else why not. */
  async #tryKeys(token: string, { resolve, generation }: KeySnapshot): Promise<number | 'no_key' | 'bad_signature' | 'malformed'> {
    const options = { algorithms: [...this.#algorithms] };
    try {
      await compactVerify(token, resolve, options);
      return generation;
    } catch (err) {
      if (err instanceof joseErrors.JWKSNoMatchingKey) return 'no_key';
      if (err instanceof joseErrors.JWKSMultipleMatchingKeys) {
        // Several keys fit (no `kid`, or a repeated one): try each, as go-oidc does.
        for await (const key of err as unknown as AsyncIterable<KeyObject | CryptoKey>) {
          try {
            await compactVerify(token, key, options);
            return generation;
          } catch (inner) {
            if (!(inner instanceof joseErrors.JWSSignatureVerificationFailed)) return 'malformed';
          }
        }
        return 'bad_signature';
      }
      if (err instanceof joseErrors.JWSInvalid) return 'malformed';
      // A signature that does not verify, or a key of the set that cannot be used for it.
      return 'bad_signature';
    }
  }

  #checkClaims(claims: Claims): void {
    const iss = claims.iss;
    if (iss !== this.issuer && !(this.issuer === 'https://accounts.google.com' && iss === 'accounts.google.com')) {
      fail('malformed', `oidc: verify token: oidc: id token issued by a different provider, expected ${JSON.stringify(this.issuer)} got ${JSON.stringify(messageValue(iss))}`);
    }
    const aud = claims.aud;
    const auds = typeof aud === 'string' ? [aud] : Array.isArray(aud) && aud.every((a) => typeof a === 'string') ? (aud as string[]) : undefined;
    if (auds === undefined) fail('malformed', 'oidc: malformed jwt: claim aud is neither a string nor a list of strings');
    if (!auds.some((a) => this.#audiences.has(a))) {
      fail('audience', `oidc: verify token: oidc: expected audience in [${[...this.#audiences].join(' ')}] got [${auds.slice(0, 4).map(messageValue).join(' ')}${auds.length > 4 ? ' ...' : ''}]`);
    }
    const now = this.#now();
    const exp = numericDate(claims, 'exp') ?? 0;
    if (exp < now) fail('expired', `oidc: verify token: oidc: token is expired (Token Expiry: ${rfc3339(exp)})`);
    const nbf = numericDate(claims, 'nbf');
    if (nbf !== undefined && now + NOT_BEFORE_LEEWAY_MS < nbf) {
      fail('not_yet_valid', `oidc: verify token: oidc: current time ${rfc3339(now)} before the nbf (not before) time: ${rfc3339(nbf)}`);
    }
    numericDate(claims, 'iat'); // a type check only: kube-apiserver does not check iat's value
  }
}
