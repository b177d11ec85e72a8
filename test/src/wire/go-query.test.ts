/**
 * The Go query codec against Go's own test tables (`src/net/url/url_test.go`: `parseTests`,
 * `unescapeTests`, `queryEscapeTests`, `encodeQueryTests`), the parameter limit, and the canonical
 * form's properties (fast-check): a query Go reads completely re-encodes to one that Go and WHATWG
 * `URLSearchParams` read as the same values; any other is refused.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalQuery, GO_MAX_QUERY_PARAMS, goEncodeValues, goParseQuery, goQueryEscape, goQueryUnescape, type GoQueryPair } from '../../../src/wire/go-query.js';

const b = (s: string): Buffer => Buffer.from(s, 'utf8');

/** Go's Values (key → values) of a parse, as UTF-8 strings. */
function valuesOf(pairs: readonly GoQueryPair[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of pairs) (out[k.toString('utf8')] ??= []).push(v.toString('utf8'));
  return out;
}

/** The same for URLSearchParams. */
function whatwgValuesOf(query: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of new URLSearchParams(query)) (out[k] ??= []).push(v);
  return out;
}

describe('goParseQuery: Go parseTests', () => {
  it.each([
    ['a=1', { a: ['1'] }, true],
    ['a=1&b=2', { a: ['1'], b: ['2'] }, true],
    ['a=1&a=2&a=banana', { a: ['1', '2', 'banana'] }, true],
    ['ascii=%3Ckey%3A+0x90%3E', { ascii: ['<key: 0x90>'] }, true],
    ['a=1;b=2', {}, false],
    ['a;b=1', {}, false],
    ['a=%3B', { a: [';'] }, true],
    ['a%3Bb=1', { 'a;b': ['1'] }, true],
    ['a=1&a=2;a=banana', { a: ['1'] }, false],
    ['a;b&c=1', { c: ['1'] }, false],
    ['a=1&b=2;a=3&c=4', { a: ['1'], c: ['4'] }, false],
    ['a=1&b=2;c=3', { a: ['1'] }, false],
    [';', {}, false],
    ['a=1;', {}, false],
    ['a=1&;', { a: ['1'] }, false],
    [';a=1&b=2', { b: ['2'] }, false],
    ['a=1&b=2;', { a: ['1'] }, false],
    // Go's TestQueryValues: a key without `=` has the empty value.
    ['foo=bar&bar=1&bar=2&baz', { foo: ['bar'], bar: ['1', '2'], baz: [''] }, true],
  ])('%s', (query, out, ok) => {
    const parsed = goParseQuery(b(query));
    expect(valuesOf(parsed.pairs)).toEqual(out);
    expect(parsed.error === undefined).toBe(ok);
  });

  it('drops a pair with a bad escape in the key or the value, and keeps the first escape error', () => {
    expect(goParseQuery(b('container=istio-proxy%zz&container=app'))).toEqual({ pairs: [[b('container'), b('app')]], error: 'invalid URL escape "%zz"' });
    expect(goParseQuery(b('k%4=1&x=%&y=2')).error).toBe('invalid URL escape "%4"');
    expect(valuesOf(goParseQuery(b('k%4=1&x=%&y=2')).pairs)).toEqual({ y: ['2'] });
    // A semicolon's error replaces an earlier escape error (Go assigns it unconditionally).
    expect(goParseQuery(b('a=%zz&b;c')).error).toBe('invalid semicolon separator in query');
  });

  it('reads `#` as a byte of the query, as Go reads a request-target', () => {
    expect(valuesOf(goParseQuery(b('container=istio-proxy#&command=ls#x')).pairs)).toEqual({ container: ['istio-proxy#'], command: ['ls#x'] });
  });

  it(`reads nothing from a query of more than ${GO_MAX_QUERY_PARAMS} pieces`, () => {
    const at = `${'&'.repeat(GO_MAX_QUERY_PARAMS - 1)}container=app`;
    expect(valuesOf(goParseQuery(b(at)).pairs)).toEqual({ container: ['app'] });
    const over = `&${at}`;
    expect(goParseQuery(b(over))).toEqual({ pairs: [], error: 'number of URL query parameters exceeded limit' });
  });
});

describe('goQueryUnescape and goQueryEscape: Go unescapeTests and queryEscapeTests', () => {
  it.each([
    ['', ''],
    ['abc', 'abc'],
    ['1%41', '1A'],
    ['1%41%42%43', '1ABC'],
    ['%4a', 'J'],
    ['%6F', 'o'],
    ['a+b', 'a b'],
    ['a%20b', 'a b'],
  ])('unescape %s', (s, out) => {
    expect(goQueryUnescape(b(s)).toString('utf8')).toBe(out);
  });

  it.each([
    ['%', '%'],
    ['%a', '%a'],
    ['%1', '%1'],
    ['123%45%6', '%6'],
    ['%zzzzz', '%zz'],
  ])('unescape %s fails with EscapeError(%s)', (s, escape) => {
    expect(() => goQueryUnescape(b(s))).toThrow(`invalid URL escape ${JSON.stringify(escape)}`);
  });

  it.each([
    ['', ''],
    ['abc', 'abc'],
    ['one two', 'one+two'],
    ['10%', '10%25'],
    [' ?&=#+%!<>#"{}|\\^[]`☺\t:/@$\'()*,;', '+%3F%26%3D%23%2B%25%21%3C%3E%23%22%7B%7D%7C%5C%5E%5B%5D%60%E2%98%BA%09%3A%2F%40%24%27%28%29%2A%2C%3B'],
  ])('escape %j', (s, out) => {
    expect(goQueryEscape(b(s))).toBe(out);
    expect(goQueryUnescape(b(out)).toString('utf8')).toBe(s);
  });
});

describe('goEncodeValues: Go encodeQueryTests', () => {
  const pairs = (m: Record<string, string[]>): GoQueryPair[] => Object.entries(m).flatMap(([k, vs]) => vs.map((v): GoQueryPair => [b(k), b(v)]));
  it.each([
    [{}, ''],
    [{ q: ['puppies'], oe: ['utf8'] }, 'oe=utf8&q=puppies'],
    [{ q: ['dogs', '&', '7'] }, 'q=dogs&q=%26&q=7'],
    [{ c: ['c1', 'c2', 'c3'], a: ['a1', 'a2', 'a3'], b: ['b1', 'b2', 'b3'] }, 'a=a1&a=a2&a=a3&b=b1&b=b2&b=b3&c=c1&c=c2&c=c3'],
  ])('%j', (m, out) => {
    expect(goEncodeValues(pairs(m))).toBe(out);
  });

  it('sorts keys by their bytes (UTF-8), not by UTF-16 code units', () => {
    // U+FF21 sorts before U+1F600 in UTF-8 bytes (EF… < F0…); JavaScript's default sort puts the surrogate pair first.
    expect(goEncodeValues([[b('😀'), b('1')], [b('Ａ'), b('2')]])).toBe('%EF%BC%A1=2&%F0%9F%98%80=1');
  });
});

describe('canonicalQuery', () => {
  it('refuses what Go would drop or cannot be read as the same characters, and re-encodes the rest', () => {
    expect(canonicalQuery('container=istio-proxy%zz&container=app')).toEqual({ ok: false, reason: 'invalid URL escape "%zz"' });
    expect(canonicalQuery('container=istio-proxy#;&container=app')).toEqual({ ok: false, reason: 'invalid semicolon separator in query' });
    expect(canonicalQuery('container=%C0%AFapp')).toMatchObject({ ok: false, reason: expect.stringContaining('UTF-8') });
    expect(canonicalQuery(`${'&'.repeat(GO_MAX_QUERY_PARAMS)}x`)).toMatchObject({ ok: false });
    expect(canonicalQuery('command=%E2%98%BA&container=app#x&stdout')).toEqual({ ok: true, query: 'command=%E2%98%BA&container=app%23x&stdout=' });
    expect(canonicalQuery('')).toEqual({ ok: true, query: '' });
    expect(canonicalQuery('&&')).toEqual({ ok: true, query: '' });
  });

  // Printable ASCII is what Node's HTTP parser lets into a request-target.
  const queryChar = fc.oneof(
    fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
    fc.constantFrom('%', '%zz', '%2', '%C3%A9', '%FF', '%00', '%26', '%3B', '%23', '%2B', '+', '&', '=', ';', '#'),
  );
  const rawQuery = fc.array(queryChar, { maxLength: 40 }).map((a) => a.join(''));

  it('property: refused exactly when Go drops a pair or a value is not UTF-8; otherwise Go, URLSearchParams and the original read the same values', () => {
    fc.assert(
      fc.property(rawQuery, (raw) => {
        const original = goParseQuery(Buffer.from(raw, 'latin1'));
        const utf8 = original.pairs.every(([k, v]) => Buffer.from(k.toString('utf8')).equals(k) && Buffer.from(v.toString('utf8')).equals(v));
        const c = canonicalQuery(raw);
        expect(c.ok).toBe(original.error === undefined && utf8);
        if (!c.ok) return;
        const again = goParseQuery(Buffer.from(c.query, 'latin1'));
        expect(again.error).toBeUndefined();
        expect(valuesOf(again.pairs)).toEqual(valuesOf(original.pairs));
        expect(whatwgValuesOf(c.query)).toEqual(valuesOf(original.pairs));
        // The canonical form is a fixed point.
        expect(canonicalQuery(c.query)).toEqual(c);
      }),
      { numRuns: 2000 },
    );
  });
});
