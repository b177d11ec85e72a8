import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ResponseHeadParser, MAX_RESPONSE_HEAD_BYTES } from '../../../src/wire/response-head.js';
import { MalformedResponseHeadError, ResponseHeadTooLargeError } from '../../../src/errors.js';

const HEAD = 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n';
const SURPLUS = Buffer.from([0x80, 0x03, 0x00, 0x04, 0x00, 0x00, 0x00, 0x0c, 0xff, 0x0d, 0x0a]);
const WIRE = Buffer.concat([Buffer.from(HEAD, 'latin1'), SURPLUS]);

function feed(parser: ResponseHeadParser, parts: Buffer[]) {
  let result;
  for (const p of parts) {
    if (result) throw new Error('complete before the last part');
    result = parser.push(p);
  }
  return result;
}

describe('ResponseHeadParser', () => {
  it('parses a 101 and keeps the head bytes and the surplus apart', () => {
    const r = new ResponseHeadParser().push(WIRE)!;
    expect(r.head).toMatchObject({ httpVersion: 'HTTP/1.1', statusCode: 101, statusMessage: 'Switching Protocols' });
    expect(r.head.headers.get('x-stream-protocol-version')).toBe('v4.channel.k8s.io');
    expect(r.headBytes.toString('latin1')).toBe(HEAD);
    expect(r.rest).toEqual(SURPLUS);
  });

  it('gives the same result for a split at every byte boundary', () => {
    for (let i = 1; i < WIRE.length; i++) {
      const parser = new ResponseHeadParser();
      const first = parser.push(WIRE.subarray(0, i));
      const r = first ?? parser.push(WIRE.subarray(i))!;
      expect(r.headBytes.toString('latin1'), `split at ${i}`).toBe(HEAD);
      // When the head completes in the first part, the surplus of that part is all that was seen.
      const expectedRest = first ? WIRE.subarray(HEAD.length, i) : SURPLUS;
      expect(r.rest, `split at ${i}`).toEqual(expectedRest);
      expect(r.head.statusCode).toBe(101);
    }
  });

  it('gives the same result byte by byte', () => {
    const head = Buffer.from(HEAD, 'latin1');
    const parser = new ResponseHeadParser();
    const r = feed(parser, [...head].map((b) => Buffer.from([b])))!;
    expect(r.headBytes).toEqual(head);
    expect(r.rest.length).toBe(0);
  });

  it('agrees for random splits (property)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: WIRE.length - 1 }), { maxLength: 8 }), (cuts) => {
        const points = [0, ...cuts.sort((a, b) => a - b), WIRE.length];
        const parser = new ResponseHeadParser();
        let r;
        let seen = 0;
        for (let k = 0; k + 1 < points.length && !r; k++) {
          r = parser.push(WIRE.subarray(points[k], points[k + 1]));
          seen = points[k + 1]!;
        }
        expect(r!.headBytes.toString('latin1')).toBe(HEAD);
        expect(r!.rest).toEqual(WIRE.subarray(HEAD.length, seen));
      }),
    );
  });

  it('compares header names case-insensitively and splits token lists', () => {
    const r = new ResponseHeadParser().push(
      Buffer.from('HTTP/1.1 101 Switching Protocols\r\nconnection: keep-alive, upgrade\r\nUPGRADE: spdy/3.1\r\nSet-Cookie: a\r\nset-cookie: b\r\n\r\n'),
    )!;
    expect(r.head.headers.tokens('Connection')).toEqual(['keep-alive', 'upgrade']);
    expect(r.head.headers.get('Upgrade')).toBe('spdy/3.1');
    expect(r.head.headers.values('SET-COOKIE')).toEqual(['a', 'b']);
  });

  it('joins folded lines and trims odd whitespace; accepts bare LF and a missing reason phrase', () => {
    const r = new ResponseHeadParser().push(
      Buffer.from('HTTP/1.0 403\nX-Folded: first\n \t second part \r\n\tthird\nX-Spaces:\t  padded value \t\nX-Empty:\n\n'),
    )!;
    expect(r.head).toMatchObject({ httpVersion: 'HTTP/1.0', statusCode: 403, statusMessage: '' });
    expect(r.head.headers.get('x-folded')).toBe('first second part third');
    expect(r.head.headers.get('x-spaces')).toBe('padded value');
    expect(r.head.headers.get('x-empty')).toBe('');
  });

  it('throws ResponseHeadTooLargeError past the cap, even without a line end', () => {
    const parser = new ResponseHeadParser(1024);
    expect(parser.push(Buffer.from('HTTP/1.1 101 Switching Protocols\r\n'))).toBeUndefined();
    expect(() => parser.push(Buffer.alloc(2000, 0x61))).toThrow(ResponseHeadTooLargeError);
    const many = new ResponseHeadParser();
    const lines = Buffer.from('HTTP/1.1 200 OK\r\n' + 'X-A: b\r\n'.repeat(MAX_RESPONSE_HEAD_BYTES / 8));
    try {
      many.push(lines);
      expect.unreachable();
    } catch (e) {
      expect((e as ResponseHeadTooLargeError).code).toBe('KSP_ERR_RESPONSE_HEAD_TOO_LARGE');
    }
  });

  it('accepts a head of exactly the cap, with surplus beyond it', () => {
    const base = 'HTTP/1.1 101 Switching Protocols\r\nX-Pad: \r\n\r\n';
    const head = base.replace('X-Pad: ', `X-Pad: ${'p'.repeat(1024 - base.length)}`);
    expect(head.length).toBe(1024);
    const r = new ResponseHeadParser(1024).push(Buffer.from(head + 'surplus'))!;
    expect(r.headBytes.length).toBe(1024);
    expect(r.rest.toString()).toBe('surplus');
  });

  it.each([
    ['a non-HTTP status line', 'SSH-2.0-OpenSSH\r\n\r\n'],
    ['a header without a colon', 'HTTP/1.1 101 X\r\nNoColon\r\n\r\n'],
    ['a space before the colon', 'HTTP/1.1 101 X\r\nUpgrade : x\r\n\r\n'],
    ['a fold before any header', 'HTTP/1.1 101 X\r\n folded\r\n\r\n'],
    ['an empty status line', '\r\n\r\n'],
  ])('rejects %s', (_name, text) => {
    expect(() => new ResponseHeadParser().push(Buffer.from(text))).toThrow(MalformedResponseHeadError);
  });
});
