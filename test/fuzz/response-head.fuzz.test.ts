/**
 * Property-based fuzz tests for ResponseHeadParser (src/wire/response-head.ts) on arbitrary input.
 * (The split-invariance property for a valid head lives in test/src/wire/response-head.test.ts.)
 *
 * Runs scale with the FUZZ_RUNS environment variable (a multiplier, default 1).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MAX_RESPONSE_HEAD_BYTES, ResponseHeadParser, type CompleteResponseHead } from '../../src/wire/response-head.js';
import { MalformedResponseHeadError, ResponseHeadTooLargeError } from '../../src/errors.js';

const MULT = Number(process.env.FUZZ_RUNS ?? '1') || 1;
const runs = (n: number): number => Math.max(1, Math.round(n * MULT));
const timeout = (ms: number): number => Math.min(2 ** 31 - 1, Math.max(ms, ms * MULT));

/** Splits `buf` at the given cut points (reduced modulo the length); empty chunks kept. */
function chunk(buf: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const c of [...at, buf.length]) {
    out.push(buf.subarray(prev, c));
    prev = c;
  }
  return out;
}

// Line-oriented noise: fragments that look like HTTP heads, glued with CRLF / LF / nothing.
const fragment = fc.oneof(
  fc.constantFrom(
    'HTTP/1.1 101 Switching Protocols',
    'HTTP/1.0 200 OK',
    'HTTP/1.1 200',
    'HTTP/2.0 404 \t',
    'HTTP/1.1 99 Bad',
    'Connection: Upgrade',
    'Upgrade: SPDY/3.1',
    ' folded value',
    '\tfolded',
    'Bad Header: x',
    ':empty-name',
    'X-Ok:',
    '',
  ),
  fc.string({ unit: 'binary-ascii', maxLength: 30 }),
  fc.uint8Array({ maxLength: 30 }).map((a) => Buffer.from(a).toString('latin1')),
);
const noisyHead = fc
  .array(fc.tuple(fragment, fc.constantFrom('\r\n', '\n', '\r', '')), { maxLength: 12 })
  .map((parts) => Buffer.from(parts.map(([f, e]) => f + e).join(''), 'latin1'));
const input = fc.oneof(noisyHead, fc.uint8Array({ maxLength: 512 }).map((a) => Buffer.from(a)));
const capArb = fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1, max: 600 }), fc.constant(MAX_RESPONSE_HEAD_BYTES));

describe('fuzz: ResponseHeadParser', () => {
  it(
    'arbitrary bytes in arbitrary chunks: only its own errors, the cap is honoured, no byte lost',
    () => {
      fc.assert(
        fc.property(input, fc.array(fc.nat(), { maxLength: 12 }), capArb, (wire, cuts, cap) => {
          const parser = new ResponseHeadParser(cap);
          let fed = 0;
          let result: CompleteResponseHead | undefined;
          for (const c of chunk(wire, cuts)) {
            fed += c.length;
            try {
              result = parser.push(c);
            } catch (e) {
              if (e instanceof ResponseHeadTooLargeError) {
                expect(e.limit).toBe(cap);
                expect(fed).toBeGreaterThanOrEqual(cap);
              } else expect(e).toBeInstanceOf(MalformedResponseHeadError);
              return;
            }
            expect(parser.bytesRead).toBe(fed);
            if (result) break;
            expect(parser.bytesRead).toBeLessThan(cap);
          }
          if (!result) return;
          const { head, headBytes, rest } = result;
          expect(headBytes.length).toBeLessThanOrEqual(cap);
          expect(Buffer.concat([headBytes, rest]).equals(wire.subarray(0, fed))).toBe(true);
          expect(headBytes[headBytes.length - 1]).toBe(0x0a);
          expect(head.httpVersion).toMatch(/^HTTP\/\d\.\d$/);
          expect(head.statusCode).toBeGreaterThanOrEqual(100);
          expect(head.statusCode).toBeLessThanOrEqual(999);
          for (const [name] of head.headers.pairs) expect(name).toMatch(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/);
        }),
        { numRuns: runs(10_000) },
      );
    },
    timeout(120_000),
  );
});
