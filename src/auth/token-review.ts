/**
 * Bearer-token authentication by TokenReview (kube-apiserver's webhook token authenticator, with the
 * API server itself as the webhook): the token goes to `authentication.k8s.io/v1` TokenReview with the
 * proxy's credentials; answers are cached briefly so an interactive session's requests do not each
 * cost a review.
 */
import { createHash } from 'node:crypto';
import type { ProxyApiClient, TokenReviewResult } from '../api-client.js';

/**
 * How long a TokenReview answer is reused. kube-apiserver's webhook cache keeps successes 2 min and
 * failures 10 s; 10 s for both bounds how long a revoked token keeps working here.
 */
export const TOKEN_REVIEW_CACHE_TTL_MS = 10_000;

/** Most answers kept; the oldest go first. */
export const TOKEN_REVIEW_CACHE_MAX_ENTRIES = 10_000;

/** The bearer token of an `Authorization` value (`Bearer <token>`, scheme case-insensitive), or undefined. */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const parts = authorization.trim().split(' ');
  if (parts.length < 2 || parts[0]!.toLowerCase() !== 'bearer') return undefined;
  const token = parts[1]!;
  return token === '' ? undefined : token;
}

/** TokenReview with a small time-bounded cache keyed by the token's SHA-256. */
export class TokenReviewer {
  readonly #api: Pick<ProxyApiClient, 'reviewToken'>;
  readonly #ttlMs: number;
  readonly #cache = new Map<string, { result: TokenReviewResult; expires: number }>();

  constructor(api: Pick<ProxyApiClient, 'reviewToken'>, ttlMs = TOKEN_REVIEW_CACHE_TTL_MS) {
    this.#api = api;
    this.#ttlMs = ttlMs;
  }

  /** Review `token` (cached). Rejects when the review itself fails (the caller answers 500/401). */
  async review(token: string): Promise<TokenReviewResult> {
    const key = createHash('sha256').update(token).digest('base64');
    const now = Date.now();
    const hit = this.#cache.get(key);
    if (hit && hit.expires > now) return hit.result;
    const result = await this.#api.reviewToken(token);
    this.#cache.delete(key);
    if (this.#cache.size >= TOKEN_REVIEW_CACHE_MAX_ENTRIES) this.#cache.delete(this.#cache.keys().next().value!);
    if (this.#ttlMs > 0) this.#cache.set(key, { result, expires: now + this.#ttlMs });
    return result;
  }
}
