/**
 * Property-based fuzz tests for TerminalSizeDecoder (src/terminal-size.ts).
 *
 * Runs scale with the FUZZ_RUNS environment variable (a multiplier, default 1).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { TerminalSizeDecodeError, TerminalSizeDecoder, type TerminalSize } from '../../src/terminal-size.js';

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

const u16 = fc.integer({ min: 0, max: 0xffff });
const ws = fc.stringMatching(/^[ \t\r\n]{0,3}$/);
const casing = (word: string) =>
  fc.array(fc.boolean(), { minLength: word.length, maxLength: word.length }).map((up) =>
    [...word].map((c, i) => (up[i] ? c.toUpperCase() : c)).join(''),
  );
const jsonString = fc.string({ unit: 'binary', maxLength: 12 }).map((s) => JSON.stringify(s));
/** Extra members Go ignores: unknown keys with any JSON value, including nested braces in strings. */
const extraMember = fc.tuple(
  jsonString.filter((k) => !['width', 'height'].includes((JSON.parse(k) as string).toLowerCase())),
  fc.oneof(jsonString, fc.integer().map(String), fc.constant('null'), fc.json({ maxDepth: 2 })),
);

/** One size object as JSON text, with random key casing, member order, whitespace and extras. */
const sizeText = fc
  .record({
    width: u16,
    height: u16,
    wKey: casing('width'),
    hKey: casing('height'),
    heightFirst: fc.boolean(),
    extras: fc.array(extraMember, { maxLength: 2 }),
    extrasAt: fc.nat(),
    pad: fc.array(ws, { minLength: 8, maxLength: 8 }),
  })
  .map((r) => {
    const p = r.pad;
    const members = [
      `${p[0]}"${r.wKey}"${p[1]}:${p[2]}${r.width}`,
      `${p[3]}"${r.hKey}"${p[4]}:${p[5]}${r.height}`,
    ];
    if (r.heightFirst) members.reverse();
    const extra = r.extras.map(([k, v]) => `${k}:${v}`);
    members.splice(r.extrasAt % (members.length + 1), 0, ...extra);
    const size: TerminalSize = { width: r.width, height: r.height };
    return { text: `{${members.join(',')}${p[6]}}${p[7]}`, size };
  });

describe('fuzz: TerminalSizeDecoder', () => {
  it(
    'a stream of size objects split arbitrarily decodes to the same sizes',
    () => {
      fc.assert(
        fc.property(
          fc.array(fc.oneof({ weight: 6, arbitrary: sizeText }, { weight: 1, arbitrary: fc.constant({ text: 'null ', size: null }) }), {
            maxLength: 8,
          }),
          fc.array(fc.nat(), { maxLength: 16 }),
          (objects, cuts) => {
            const wire = Buffer.from(objects.map((o) => o.text).join(''), 'utf8');
            const want = objects.flatMap((o) => (o.size ? [o.size] : []));
            const d = new TerminalSizeDecoder();
            const got: TerminalSize[] = [];
            for (const c of chunk(wire, cuts)) got.push(...d.push(c));
            expect(got).toEqual(want);
          },
        ),
        { numRuns: runs(5000) },
      );
    },
    timeout(120_000),
  );

  it(
    'garbage throws only TerminalSizeDecodeError, and a failed decoder stays failed',
    () => {
      const garbage = fc.oneof(
        fc.uint8Array({ maxLength: 256 }).map((a) => Buffer.from(a)),
        fc.json({ maxDepth: 3 }).map((s) => Buffer.from(s)),
        fc
          .array(fc.oneof(fc.constantFrom('{', '}', '[', ']', '"', '\\', ':', ',', 'null', 'nul', ' ', '1', '-1', '1e2', '65536', '"width"', '"Height"'), fc.string({ maxLength: 4 })), { maxLength: 30 })
          .map((parts) => Buffer.from(parts.join(''))),
        fc.integer({ min: 4000, max: 5000 }).map((n) => Buffer.from(`{"width":1,"x":"${'a'.repeat(n)}`)),
      );
      fc.assert(
        fc.property(garbage, fc.array(fc.nat(), { maxLength: 16 }), (wire, cuts) => {
          const d = new TerminalSizeDecoder();
          for (const c of chunk(wire, cuts)) {
            let sizes: TerminalSize[];
            try {
              sizes = d.push(c);
            } catch (e) {
              expect(e).toBeInstanceOf(TerminalSizeDecodeError);
              const err = e as TerminalSizeDecodeError;
              expect(['RESIZE_SYNTAX', 'RESIZE_TYPE', 'RESIZE_TOO_LARGE']).toContain(err.code);
              expect(() => d.push(Buffer.from('{"width":1,"height":2}'))).toThrow(err);
              return;
            }
            for (const s of sizes) {
              for (const v of [s.width, s.height]) {
                expect(Number.isInteger(v)).toBe(true);
                expect(v).toBeGreaterThanOrEqual(0);
                expect(v).toBeLessThanOrEqual(0xffff);
              }
            }
          }
        }),
        { numRuns: runs(5000) },
      );
    },
    timeout(120_000),
  );
});
