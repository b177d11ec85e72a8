/**
 * The one request-head serializer (issue 31, finding 1): values are byte strings checked after
 * encoding, Unicode identity values go out as their UTF-8 bytes. The cases the attack review found:
 * U+010D U+010A (`čĊ`) was written as CR LF by the latin1 encoding of a JavaScript string, `š` as `a`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidRequestHeadError } from '../../../src/errors.js';
import { headerValueText, requestHeadBytes, requestHeaderLines, utf8HeaderValue } from '../../../src/wire/request-head.js';

describe('requestHeadBytes', () => {
  it('serialises request line, header lines and the blank line', () => {
    expect(requestHeadBytes('POST', '/x?y=1', [['Host', 'h'], ['A', 'b']]).toString('latin1')).toBe('POST /x?y=1 HTTP/1.1\r\nHost: h\r\nA: b\r\n\r\n');
    expect(requestHeadBytes('GET', '/', [], 'HTTP/1.0').toString('latin1')).toBe('GET / HTTP/1.0\r\n\r\n');
  });

  it.each([
    ['CR LF in a value', [['A', 'b\r\nImpersonate-Group: system:masters']]],
    ['a bare LF (Go splits header lines on it)', [['A', 'b\nImpersonate-Group: system:masters']]],
    ['NUL', [['A', 'b\0']]],
    ['DEL', [['A', 'b\x7f']]],
    ['U+010D U+010A, which latin1 would cut to CR LF', [['Impersonate-User', 'x\u010d\u010aImpersonate-Group: system:masters']]],
    ['U+0161, which latin1 would cut to `a`', [['Impersonate-User', '\u0161dmin']]],
    ['a name that is not a token', [['A B', 'c']]],
    ['an empty name', [['', 'c']]],
  ] as Array<[string, Array<[string, string]>]>)('refuses %s', (_, pairs) => {
    expect(() => requestHeadBytes('GET', '/', pairs)).toThrow(InvalidRequestHeadError);
    expect(() => requestHeaderLines(pairs)).toThrow(InvalidRequestHeadError);
  });

  it.each([
    ['a space', '/a b'],
    ['a CR', '/a\rb'],
    ['U+0120 (latin1: a space)', '/a\u0120b'],
    ['DEL', '/a\x7f'],
  ])('refuses a request-target with %s', (_, target) => {
    expect(() => requestHeadBytes('GET', target, [])).toThrow(InvalidRequestHeadError);
  });

  it('refuses a method that is not a token', () => {
    expect(() => requestHeadBytes('GET /x HTTP/1.1\r\nA:', '/', [])).toThrow(InvalidRequestHeadError);
  });

  it('writes a Unicode value as its UTF-8 bytes (after utf8HeaderValue), HTAB and obs-text allowed', () => {
    const head = requestHeadBytes('GET', '/', [['Impersonate-User', utf8HeaderValue('José šdmin 👩‍💻')], ['X', 'a\tb']]);
    const line = head.subarray(head.indexOf('Impersonate-User: ') + 18, head.indexOf('\r\nX:'));
    expect(line.equals(Buffer.from('José šdmin 👩‍💻', 'utf8'))).toBe(true);
    expect(head.includes(Buffer.from('X: a\tb\r\n'))).toBe(true);
  });

  it('refuses a lone surrogate, which has no UTF-8 form', () => {
    expect(() => utf8HeaderValue('a\ud800b')).toThrow(InvalidRequestHeadError);
    expect(utf8HeaderValue('a\ud83d\ude00b')).toBe(Buffer.from('a😀b', 'utf8').toString('latin1'));
  });

  it('property: any header value either round-trips to the very bytes or is refused; the head holds exactly one CRLF per line', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), fc.boolean(), (text, asUtf8) => {
        let value: string;
        try {
          value = asUtf8 ? utf8HeaderValue(text) : text;
        } catch (e) {
          expect(e).toBeInstanceOf(InvalidRequestHeadError);
          return;
        }
        let head: Buffer;
        try {
          head = requestHeadBytes('GET', '/', [['Host', 'h'], ['V', value]]);
        } catch (e) {
          expect(e).toBeInstanceOf(InvalidRequestHeadError);
          return;
        }
        // Exactly the lines written: request line, Host, V, blank; no CR or LF anywhere else.
        const text2 = head.toString('latin1');
        expect(text2.split('\n')).toHaveLength(5);
        expect(text2.split('\r')).toHaveLength(5);
        const got = head.subarray(head.indexOf('\r\nV: ') + 5, head.length - 4);
        if (asUtf8) expect(got.toString('utf8')).toBe(text);
        else expect(got.toString('latin1')).toBe(value);
        expect([...got].every((b) => b === 0x09 || (b >= 0x20 && b !== 0x7f))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('headerValueText', () => {
  it('reads a byte-string value as UTF-8, or undefined when it is not UTF-8', () => {
    expect(headerValueText(Buffer.from('José', 'utf8').toString('latin1'))).toBe('José');
    expect(headerValueText('Jos\xe9')).toBeUndefined();
    expect(headerValueText('plain')).toBe('plain');
  });
});
