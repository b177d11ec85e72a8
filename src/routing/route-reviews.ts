/**
 * TokenReview and SubjectAccessReview sent along a {@link Route}: how the `impersonate` mode reviews
 * a caller at the cluster a route leads to when that cluster is not the proxy's own API — a cluster
 * behind an agent, whose tunnel carries the review like any other request. The route must carry no
 * caller identity: the reviews are made with the credentials the far end adds (the agent's own, in
 * `--access-as impersonate`). Bodies and answers are read as the client-node path does
 * (`src/api-client.ts`); a non-2xx answer rejects with its Status message.
 */
import type { IncomingMessage } from 'node:http';
import { accessDecision, subjectAccessReviewBody, tokenReviewBody, tokenReviewResult, type ReviewApi, type TokenReviewStatus } from '../api-client.js';
import type { Route } from './route.js';

/** Largest review answer read (a TokenReview with many groups is a few KiB). */
export const MAX_REVIEW_ANSWER_BYTES = 1024 * 1024;

/** How long one review may take before it fails (the caller then gets 401/500, as on a failed review). */
export const REVIEW_TIMEOUT_MS = 10_000;

/** A review call that did not get a 2xx answer. */
export class ReviewRequestError extends Error {
  override readonly name = 'ReviewRequestError';
  constructor(
    message: string,
    readonly statusCode?: number,
  ) {
    super(message);
  }
}

/** POST `body` as JSON to `path` along `route`; the parsed JSON answer. */
function postJson(route: Route, path: string, body: unknown): Promise<unknown> {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = route.request({
      method: 'POST',
      path: route.target(path),
      headers: { Host: route.host, 'Content-Type': 'application/json', Accept: 'application/json', 'Content-Length': String(payload.length) },
    });
    const timer = setTimeout(() => req.destroy(new ReviewRequestError(`${path}: no answer within ${REVIEW_TIMEOUT_MS} ms`)), REVIEW_TIMEOUT_MS);
    req.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.once('response', (res: IncomingMessage) => {
      const parts: Buffer[] = [];
      let size = 0;
      res.on('data', (d: Buffer) => {
        size += d.length;
        if (size > MAX_REVIEW_ANSWER_BYTES) res.destroy(new ReviewRequestError(`${path}: answer larger than ${MAX_REVIEW_ANSWER_BYTES} bytes`));
        else parts.push(d);
      });
      res.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      res.once('end', () => {
        clearTimeout(timer);
        const text = Buffer.concat(parts).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        const code = res.statusCode ?? 0;
        if (code < 200 || code > 299) {
          const message = (json as { message?: unknown } | undefined)?.message;
          reject(new ReviewRequestError(`${path}: ${code} ${typeof message === 'string' ? message : text.slice(0, 200)}`, code));
          return;
        }
        if (json === undefined) reject(new ReviewRequestError(`${path}: the answer is not JSON`, code));
        else resolve(json);
      });
    });
    req.end(payload);
  });
}

/** The reviews along `route` (see the file comment). */
export function reviewApiOver(route: Route): ReviewApi {
  return {
    async reviewToken(token) {
      const review = (await postJson(route, '/apis/authentication.k8s.io/v1/tokenreviews', tokenReviewBody(token))) as { status?: TokenReviewStatus };
      return tokenReviewResult(review.status);
    },
    async reviewAccess(user, attributes) {
      const review = (await postJson(route, '/apis/authorization.k8s.io/v1/subjectaccessreviews', subjectAccessReviewBody(user, attributes))) as {
        status?: Parameters<typeof accessDecision>[0];
      };
      return accessDecision(review.status);
    },
  };
}
