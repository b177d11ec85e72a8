/**
 * Go's `net/url` query codec, byte for byte: `url.ParseQuery`, `QueryUnescape`, `QueryEscape` and
 * `Values.Encode`. kube-apiserver and the kubelet read a request's query with `URL.Query()`, which is
 * ParseQuery with its errors dropped: a pair holding `;` or a bad `%` escape is silently left out,
 * and a query of more than {@link GO_MAX_QUERY_PARAMS} pieces yields no values at all. WHATWG's
 * `URLSearchParams` (what JavaScript reads) keeps all of those, splits at `#`, and decodes invalid
 * UTF-8 to U+FFFD — so the two can read different values from one query (issue 31, finding 5).
 *
 * {@link canonicalQuery} closes that gap for the requests whose query decides something (streaming
 * requests: the container a recording rule exempts, the command in the audit line): either the query
 * is one Go reads completely, and it is re-encoded as `Values.Encode` writes it (every reader then
 * reads the same values), or it is refused. Pure; Go strings are bytes, so keys and values are Buffers.
 */
import { isUtf8 } from 'node:buffer';

/**
 * Go's default `urlmaxqueryparams` (Go 1.24.12, 1.25.6 and later): a query with more pieces than
 * this (`&` count + 1) makes ParseQuery fail before it reads any pair.
 */
export const GO_MAX_QUERY_PARAMS = 10_000;

/** One key=value pair as Go decoded it. */
export type GoQueryPair = readonly [key: Buffer, value: Buffer];

/** What `url.ParseQuery` returns: the pairs it kept, in order, and its first error. */
export interface GoParsedQuery {
  pairs: GoQueryPair[];
  /** Go's error text (`invalid URL escape "%zz"`, `invalid semicolon separator in query`, …). */
  error?: string;
}

/** Go's `EscapeError`. */
export class GoEscapeError extends Error {
  override readonly name = 'GoEscapeError';
  constructor(readonly escape: string) {
    super(`invalid URL escape ${JSON.stringify(escape)}`);
  }
}

const PERCENT = 0x25;
const PLUS = 0x2b;

function isHex(c: number | undefined): boolean {
  return c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66));
}

function unhex(c: number): number {
  return c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x61 + 10;
}

/** `url.QueryUnescape`: `+` is a space, `%XX` a byte; a `%` without two hex digits throws {@link GoEscapeError}. */
export function goQueryUnescape(s: Buffer): Buffer {
  const out = Buffer.allocUnsafe(s.length);
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === PERCENT) {
      if (!isHex(s[i + 1]) || !isHex(s[i + 2])) throw new GoEscapeError(s.subarray(i, i + 3).toString('latin1'));
      out[n++] = (unhex(s[i + 1]!) << 4) | unhex(s[i + 2]!);
      i += 2;
    } else out[n++] = c === PLUS ? 0x20 : c;
  }
  return out.subarray(0, n);
}

/** `url.ParseQuery` over the query's bytes. */
export function goParseQuery(query: Buffer): GoParsedQuery {
  let pieces = 1;
  for (const c of query) if (c === 0x26) pieces++;
  if (pieces > GO_MAX_QUERY_PARAMS) return { pairs: [], error: 'number of URL query parameters exceeded limit' };
  const pairs: GoQueryPair[] = [];
  let error: string | undefined;
  let at = 0;
  while (at < query.length) {
    let end = query.indexOf(0x26, at);
    if (end < 0) end = query.length;
    const piece = query.subarray(at, end);
    at = end + 1;
    if (piece.includes(0x3b)) {
      // Go overwrites its error here (the others keep the first): the semicolon's error wins.
      error = 'invalid semicolon separator in query';
      continue;
    }
    if (piece.length === 0) continue;
    const eq = piece.indexOf(0x3d);
    try {
      const key = goQueryUnescape(eq < 0 ? piece : piece.subarray(0, eq));
      const value = goQueryUnescape(eq < 0 ? Buffer.alloc(0) : piece.subarray(eq + 1));
      pairs.push([key, value]);
    } catch (e) {
      error ??= (e as GoEscapeError).message;
    }
  }
  return error === undefined ? { pairs } : { pairs, error };
}

/** Bytes `QueryEscape` leaves as they are: ALPHA, DIGIT and `-_.~`. */
function isUnreserved(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f || c === 0x2e || c === 0x7e;
}

const UPPER_HEX = '0123456789ABCDEF';

/** `url.QueryEscape`: a space becomes `+`, every byte but ALPHA, DIGIT and `-_.~` becomes `%XX` (upper case). */
export function goQueryEscape(s: Buffer): string {
  let out = '';
  for (const c of s) {
    if (isUnreserved(c)) out += String.fromCharCode(c);
    else if (c === 0x20) out += '+';
    else out += `%${UPPER_HEX[c >> 4]}${UPPER_HEX[c & 15]}`;
  }
  return out;
}

/** `url.Values.Encode` of the pairs: keys in byte order (`slices.Sort`), each key's values in the order given. */
export function goEncodeValues(pairs: readonly GoQueryPair[]): string {
  const byKey = new Map<string, { key: Buffer; values: Buffer[] }>();
  for (const [key, value] of pairs) {
    const id = key.toString('latin1');
    const entry = byKey.get(id);
    if (entry) entry.values.push(value);
    else byKey.set(id, { key, values: [value] });
  }
  const keys = [...byKey.values()].sort((a, b) => Buffer.compare(a.key, b.key));
  const parts: string[] = [];
  for (const { key, values } of keys) {
    const k = goQueryEscape(key);
    for (const v of values) parts.push(`${k}=${goQueryEscape(v)}`);
  }
  return parts.join('&');
}

/** A query as every reader will read it, or why it is refused. */
export type CanonicalQuery = { ok: true; query: string } | { ok: false; reason: string };

/**
 * The query of a request-target (the text after its first `?`, as Node hands it over: one character
 * per byte) re-encoded as Go's `Values.Encode` would write what Go's `ParseQuery` read — or the
 * reason it cannot be: a pair Go drops (a `;`, a bad `%` escape), more pieces than Go reads at all, a
 * key or value that is not UTF-8 once unescaped (JavaScript would read other characters than the
 * upstream's bytes), a character that is not a byte. `#` is an ordinary byte here, as in Go's request
 * parser (`ParseRequestURI` keeps it in the query; WHATWG URLs would cut the query there).
 */
export function canonicalQuery(raw: string): CanonicalQuery {
  for (let i = 0; i < raw.length; i++) {
    if (raw.charCodeAt(i) > 0xff) return { ok: false, reason: 'the query holds a character that is not a byte' };
  }
  const parsed = goParseQuery(Buffer.from(raw, 'latin1'));
  if (parsed.error !== undefined) return { ok: false, reason: parsed.error };
  for (const [key, value] of parsed.pairs) {
    if (!isUtf8(key) || !isUtf8(value)) return { ok: false, reason: 'a query key or value is not valid UTF-8 once unescaped' };
  }
  return { ok: true, query: goEncodeValues(parsed.pairs) };
}
