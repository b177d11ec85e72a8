/**
 * Who a recorded session's caller is when the proxy does not authenticate it (`--authn passthrough`):
 * the upstream is asked, with the caller's own credentials, by a SelfSubjectReview
 * (`POST /apis/authentication.k8s.io/v1/selfsubjectreviews`, what `kubectl auth whoami` sends) along
 * the request's own route — the same backend, the same cluster behind an agent — before the upgrade.
 * The answer names the recording (cast header, index entry) and the audit line.
 *
 * - The credential lines are the ones the upstream would authenticate the session with: every
 *   `Authorization` and `Impersonate-*` line exactly as received (passthrough forwards them
 *   unchanged), or, without an `Authorization` line, the WebSocket subprotocol token
 *   (`base64url.bearer.authorization.k8s.io.…`) as `Authorization: Bearer`, which kube-apiserver
 *   authenticates the same way. A client certificate ends at the proxy's TLS: it cannot be presented
 *   upstream, so such a caller (or one with no credential at all) is not asked about: unknown.
 * - Answers are cached per credential (the SHA-256 of the route and the credential lines: never the
 *   token itself as a key, log or metric value) for {@link CALLER_IDENTITY_CACHE_TTL_MS}, at most
 *   {@link CALLER_IDENTITY_CACHE_MAX_ENTRIES}, as TokenReview answers are (`src/auth/token-review.ts`);
 *   concurrent asks for one credential share one review. Failures (no answer, 5xx, a bad body) are
 *   not cached.
 * - A review never refuses a session: whatever fails, the identity is unknown with the reason, and an
 *   `enforce`d session is still recorded (docs/recording.md, "Who a recording names").
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { SELF_SUBJECT_REVIEW_VERSIONS, selfSubjectReviewBody, selfSubjectReviewUser } from '../api-client.js';
import { websocketBearer } from '../auth/websocket-bearer.js';
import type { Route } from '../routing/route.js';

/**
 * How long an answer is reused: TokenReview's 10 s (`TOKEN_REVIEW_CACHE_TTL_MS`), so an interactive
 * user's sessions cost one review and a changed identity shows within seconds.
 */
export const CALLER_IDENTITY_CACHE_TTL_MS = 10_000;

/** Most answers kept; the oldest go first. */
export const CALLER_IDENTITY_CACHE_MAX_ENTRIES = 10_000;

/** How long the session waits for the review before it goes on with an unknown caller. */
export const CALLER_IDENTITY_TIMEOUT_MS = 5_000;

/** Largest review answer read (a user with many groups and extras fits many times over). */
export const MAX_REVIEW_ANSWER_BYTES = 256 * 1024;

/** Who the upstream says the caller is, or why that is unknown. */
export type CallerIdentity = { user: string; uid?: string; groups: string[] } | { unknown: string };

/** Why a caller without forwardable credentials is unknown. */
export const NO_FORWARDABLE_CREDENTIAL =
  'no credential the proxy can forward: neither an Authorization nor an Impersonate-* line nor a WebSocket bearer token (a client certificate ends at the proxy in passthrough)';

/** Options of {@link CallerIdentities}. */
export interface CallerIdentitiesOptions {
  ttlMs?: number;
  maxEntries?: number;
  timeoutMs?: number;
  /** The clock (tests). */
  now?: () => number;
}

/** The lines of `rawHeaders` the upstream authenticates a request with (see the file comment). */
export function credentialLines(rawHeaders: readonly string[]): Array<[string, string]> {
  const lines: Array<[string, string]> = [];
  let authorization = false;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (lower === 'authorization') authorization = true;
    else if (!lower.startsWith('impersonate-')) continue;
    lines.push([name, rawHeaders[i + 1]!]);
  }
  if (!authorization) {
    const { token } = websocketBearer(rawHeaders);
    if (token !== undefined) lines.unshift(['Authorization', `Bearer ${token}`]);
  }
  return lines;
}

/** A review's outcome: an identity (cached), or an unknown one, cached only when `cache` says so. */
interface Outcome {
  identity: CallerIdentity;
  cache: boolean;
}

/** SelfSubjectReview with a small time-bounded cache, per server. */
export class CallerIdentities {
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #cache = new Map<string, { identity: CallerIdentity; expires: number }>();
  readonly #pending = new Map<string, Promise<CallerIdentity>>();
  /** Per route: the index in SELF_SUBJECT_REVIEW_VERSIONS its backend last answered. */
  readonly #versions = new Map<string, number>();

  constructor(options: CallerIdentitiesOptions = {}) {
    this.#ttlMs = options.ttlMs ?? CALLER_IDENTITY_CACHE_TTL_MS;
    this.#maxEntries = options.maxEntries ?? CALLER_IDENTITY_CACHE_MAX_ENTRIES;
    this.#timeoutMs = options.timeoutMs ?? CALLER_IDENTITY_TIMEOUT_MS;
    this.#now = options.now ?? Date.now;
  }

  /** Who `req`'s caller is, as the upstream `route` leads to says. Never rejects. */
  review(req: Pick<IncomingMessage, 'rawHeaders'>, route: Route): Promise<CallerIdentity> {
    const lines = credentialLines(req.rawHeaders);
    if (lines.length === 0) return Promise.resolve({ unknown: NO_FORWARDABLE_CREDENTIAL });
    const hash = createHash('sha256').update(route.name).update('\n');
    for (const [n, v] of lines) hash.update(`${n.toLowerCase()}: ${v}\n`);
    const key = hash.digest('base64');
    const hit = this.#cache.get(key);
    if (hit && hit.expires > this.#now()) return Promise.resolve(hit.identity);
    const pending = this.#pending.get(key);
    if (pending) return pending;
    const p = this.#ask(route, lines).then(
      ({ identity, cache }) => {
        this.#pending.delete(key);
        this.#cache.delete(key);
        if (cache && this.#ttlMs > 0) {
          if (this.#cache.size >= this.#maxEntries) this.#cache.delete(this.#cache.keys().next().value!);
          this.#cache.set(key, { identity, expires: this.#now() + this.#ttlMs });
        }
        return identity;
      },
      (e: unknown) => {
        this.#pending.delete(key);
        return { unknown: `the SelfSubjectReview failed: ${(e as Error).message}` };
      },
    );
    this.#pending.set(key, p);
    return p;
  }

  /** Ask, newest version first (from the one this route answered last), on 404 the next. */
  async #ask(route: Route, lines: ReadonlyArray<[string, string]>): Promise<Outcome> {
    const deadline = this.#now() + this.#timeoutMs;
    const routeAuth = Object.entries(await route.callerAuthHeaders());
    const replaced = new Set(routeAuth.map(([n]) => n.toLowerCase()));
    const headerLines = [...lines.filter(([n]) => !replaced.has(n.toLowerCase()))];
    for (const [n, v] of routeAuth) for (const value of typeof v === 'string' ? [v] : v) headerLines.push([n, value]);
    const first = this.#versions.get(route.name) ?? 0;
    for (let i = first; i < SELF_SUBJECT_REVIEW_VERSIONS.length; i++) {
      const version = SELF_SUBJECT_REVIEW_VERSIONS[i]!;
      const answer = await post(route, version, headerLines, Math.max(0, deadline - this.#now()), this.#timeoutMs);
      if (answer.status === 404) continue;
      if (answer.status === 201 || answer.status === 200) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(answer.body.toString('utf8'));
        } catch {
          return { identity: { unknown: 'the SelfSubjectReview answer is not JSON' }, cache: false };
        }
        const user = selfSubjectReviewUser(parsed);
        if (!user) return { identity: { unknown: 'the SelfSubjectReview answer names no user' }, cache: false };
        this.#versions.set(route.name, i);
        return { identity: { user: user.username, ...(user.uid !== undefined ? { uid: user.uid } : {}), groups: user.groups }, cache: true };
      }
      if (answer.status === 401 || answer.status === 403) {
        const what = answer.status === 401 ? 'did not authenticate the caller' : 'forbade the caller its SelfSubjectReview';
        return { identity: { unknown: `the upstream ${what} (${answer.status})` }, cache: true };
      }
      return { identity: { unknown: `the upstream answered the SelfSubjectReview with ${answer.status}` }, cache: false };
    }
    return { identity: { unknown: 'the upstream serves no SelfSubjectReview (404 for authentication.k8s.io v1, v1beta1 and v1alpha1)' }, cache: false };
  }
}

/** POST one SelfSubjectReview along `route`; rejects on a transport failure or after `waitMs`. */
function post(route: Route, version: (typeof SELF_SUBJECT_REVIEW_VERSIONS)[number], lines: ReadonlyArray<[string, string]>, waitMs: number, timeoutMs: number): Promise<{ status: number; body: Buffer }> {
  const body = Buffer.from(JSON.stringify(selfSubjectReviewBody(version)));
  return new Promise((resolve, reject) => {
    const headers = ['Host', route.host, 'Content-Type', 'application/json', 'Accept', 'application/json', 'Content-Length', String(body.length), ...lines.flat()];
    const req = route.request({ method: 'POST', path: route.target(`/apis/authentication.k8s.io/${version}/selfsubjectreviews`), headers });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), waitMs);
    req.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_REVIEW_ANSWER_BYTES) req.destroy(new Error(`answer larger than ${MAX_REVIEW_ANSWER_BYTES} bytes`));
        else chunks.push(c);
      });
      res.once('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) });
      });
      res.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    req.end(body);
  });
}
