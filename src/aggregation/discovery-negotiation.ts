/**
 * HTTP side of the discovery documents: choosing the format from `Accept` and the caching headers.
 *
 * Negotiation follows kube-apiserver (`endpoints/discovery/aggregated/wrapper.go` over
 * `handlers/negotiation` and goautoneg's Accept parsing):
 *
 * - clauses are ordered by `q` (highest first), then concrete types before `*` (a stable sort);
 * - if **any** clause matching JSON (`application/json`, `application/*`, `*\/*`) carries
 *   `g=apidiscovery.k8s.io;as=APIGroupDiscoveryList` with `v=v2` or `v=v2beta1` (parameters in any
 *   order; `profile=nopeer` allowed), the first such clause picks the aggregated format: the
 *   discovery restrictions skip plain clauses, so aggregated wins even over a plain clause with a
 *   higher `q`, as on kube-apiserver;
 * - otherwise the first plain JSON clause (no `g`/`v`/`as`) picks the legacy document;
 * - otherwise nothing is acceptable: 406. An absent or empty Accept means legacy JSON.
 *
 * Two deliberate differences: only JSON is produced (a clause for protobuf or YAML is skipped, so
 * kubectl's own headers, which list JSON too, work), and a clause with `q=0` is "not acceptable"
 * (RFC 9110) rather than a match.
 */
import { createHash } from 'node:crypto';
import { errorStatus, type V1Status } from '../status.js';
import { APIDISCOVERY_GROUP, type AggregatedDiscoveryVersion } from './discovery-types.js';

/** The Content-Type of aggregated discovery v2, echoed in the answer. */
export const AGGREGATED_CONTENT_TYPE_V2 = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';
/** The Content-Type of aggregated discovery v2beta1 (kubectl 1.26–1.29). */
export const AGGREGATED_CONTENT_TYPE_V2BETA1 = 'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList';
/** The Content-Type of the legacy documents. */
export const LEGACY_CONTENT_TYPE = 'application/json';

/** Which document a request gets. */
export type DiscoveryFormat = AggregatedDiscoveryVersion | 'legacy';

/** The outcome of {@link negotiateDiscovery}: a format and the Content-Type to send, or `none` (406). */
export type NegotiatedDiscovery =
  | { format: DiscoveryFormat; contentType: string }
  | { format: 'none'; contentType: '' };

/** One parsed Accept clause. */
export interface AcceptClause {
  type: string;
  subType: string;
  q: number;
  params: Record<string, string>;
}

/** goautoneg's `ParseAccept`, sorted: q descending, then concrete type, then concrete subtype. */
export function parseAccept(header: string): AcceptClause[] {
  const clauses: AcceptClause[] = [];
  for (const part of header.split(',')) {
    const [range = '', ...rawParams] = part.split(';');
    const [t = '', st] = range.trim().toLowerCase().split('/', 2);
    const type = t.trim();
    let subType: string;
    if (st === undefined) {
      if (type !== '*') continue;
      subType = '*';
    } else subType = st.trim();
    if (type === '' || subType === '') continue;
    const clause: AcceptClause = { type, subType, q: 1, params: {} };
    for (const p of rawParams) {
      const eq = p.indexOf('=');
      if (eq < 0) continue;
      const key = p.slice(0, eq).trim().toLowerCase();
      let value = p.slice(eq + 1).trim();
      if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
      if (key === 'q') {
        const q = Number(value);
        clause.q = Number.isFinite(q) ? q : 0;
      } else clause.params[key] = value;
    }
    clauses.push(clause);
  }
  const rank = (c: AcceptClause) => (c.type === '*' ? 0 : 2) + (c.subType === '*' ? 0 : 1);
  return clauses
    .map((c, i) => ({ c, i }))
    .sort((a, b) => b.c.q - a.c.q || rank(b.c) - rank(a.c) || a.i - b.i)
    .map(({ c }) => c);
}

function matchesJSON(c: AcceptClause): boolean {
  return (c.type === 'application' && (c.subType === 'json' || c.subType === '*')) || (c.type === '*' && c.subType === '*');
}

function profileAllowed(c: AcceptClause): boolean {
  return c.params.profile === undefined || c.params.profile === '' || c.params.profile === 'nopeer';
}

/** The aggregated version a clause asks for, `null` for a plain clause, `undefined` for a conversion we do not serve. */
function conversionOf(c: AcceptClause): AggregatedDiscoveryVersion | null | undefined {
  const { g, v, as } = c.params;
  if (g === undefined && v === undefined && as === undefined) return null;
  if (g === APIDISCOVERY_GROUP && as === 'APIGroupDiscoveryList' && (v === 'v2' || v === 'v2beta1')) return v;
  return undefined;
}

/** Choose the discovery document for an `Accept` header, as the module doc describes. */
export function negotiateDiscovery(accept: string | undefined): NegotiatedDiscovery {
  if (accept === undefined || accept.trim() === '') return { format: 'legacy', contentType: LEGACY_CONTENT_TYPE };
  const clauses = parseAccept(accept).filter((c) => c.q > 0 && matchesJSON(c));
  for (const c of clauses) {
    const v = conversionOf(c);
    if (v && profileAllowed(c)) return { format: v, contentType: v === 'v2' ? AGGREGATED_CONTENT_TYPE_V2 : AGGREGATED_CONTENT_TYPE_V2BETA1 };
  }
  if (clauses.some((c) => conversionOf(c) === null)) return { format: 'legacy', contentType: LEGACY_CONTENT_TYPE };
  return { format: 'none', contentType: '' };
}

/** The 406 Status for an Accept header nothing matches (`NewNotAcceptableError`). */
export function notAcceptableStatus(): V1Status {
  const supported = [LEGACY_CONTENT_TYPE, AGGREGATED_CONTENT_TYPE_V2, AGGREGATED_CONTENT_TYPE_V2BETA1].join(', ');
  return errorStatus(406, `only the following media types are accepted: ${supported}`, 'NotAcceptable');
}

/**
 * The ETag of a discovery document: the quoted, upper-case hex SHA-512 of its bytes
 * (`etag.go`: `fmt.Sprintf("%X", sha512.Sum512(json))`, then `strconv.Quote`).
 */
export function discoveryETag(body: Buffer | string): string {
  return `"${createHash('sha512').update(body).digest('hex').toUpperCase()}"`;
}

/**
 * True when `If-None-Match` names `etag`, so the answer is 304. kube-apiserver compares the whole
 * header; this also accepts a list, weak tags (`W/"…"`) and `*`, as RFC 9110 asks.
 */
export function ifNoneMatchHits(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || tag === etag || tag === `W/${etag}`;
  });
}

/** The headers of a discovery answer (200 or 304): Content-Type, ETag, `Vary: Accept`, `Cache-Control: public`. */
export function discoveryHeaders(contentType: string, etag: string): Record<string, string> {
  return { 'content-type': contentType, etag, vary: 'Accept', 'cache-control': 'public' };
}

/** A discovery answer ready to send: 200 with the body, or 304 without one. */
export interface DiscoveryReply {
  statusCode: 200 | 304;
  headers: Record<string, string>;
  body: Buffer | undefined;
}

/**
 * The answer for a cached document (`ServeHTTPWithETag`): its caching headers always, and 304 with
 * no body when `ifNoneMatch` names its ETag.
 */
export function discoveryReply(doc: { body: Buffer; etag: string; contentType: string }, ifNoneMatch: string | undefined): DiscoveryReply {
  const headers = discoveryHeaders(doc.contentType, doc.etag);
  if (ifNoneMatchHits(ifNoneMatch, doc.etag)) return { statusCode: 304, headers, body: undefined };
  return { statusCode: 200, headers, body: doc.body };
}
