/**
 * Property-based fuzz tests for SPDY/3 header blocks (src/spdy/header-block.ts).
 *
 * Runs scale with the FUZZ_RUNS environment variable (a multiplier, default 1).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  HeaderCompressor,
  HeaderDecompressor,
  decodeHeaderPairs,
  encodeHeaderPairs,
  type SpdyHeaders,
  type SpdyHeadersInit,
} from '../../src/spdy/header-block.js';
import { SpdyProtocolError } from '../../src/spdy/errors.js';

const MULT = Number(process.env.FUZZ_RUNS ?? '1') || 1;
const runs = (n: number): number => Math.max(1, Math.round(n * MULT));
const timeout = (ms: number): number => Math.min(2 ** 31 - 1, Math.max(ms, ms * MULT));

/** Lowercase names: tokens, some awkward ones, and arbitrary Unicode already in lower case. */
const nameArb = fc.oneof(
  fc.stringMatching(/^[a-z0-9:!#$%&'*+.^_`|~-]{1,24}$/),
  fc.constantFrom(':method', ':path', ':status', ':version', '__proto__', 'constructor', 'hasownproperty', 'tostring'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }).filter((s) => s === s.toLowerCase() && !s.includes('\0')),
);
/** A single value: anything (valid Unicode) but NUL. */
const valueArb = fc.string({ unit: 'binary', maxLength: 40 }).filter((s) => !s.includes('\0'));
const headerMapArb: fc.Arbitrary<Record<string, string[]>> = fc
  .uniqueArray(fc.tuple(nameArb, fc.array(valueArb, { minLength: 1, maxLength: 4 })), {
    selector: ([n]) => n,
    maxLength: 10,
  })
  .map((pairs) => {
    const o = Object.create(null) as Record<string, string[]>;
    for (const [n, v] of pairs) o[n] = v;
    return o;
  });

/** The same map in the input shapes the encoder accepts: single strings, numbers and arrays. */
function asInit(h: Record<string, string[]>, shape: number): SpdyHeadersInit {
  const o: SpdyHeadersInit = Object.create(null) as SpdyHeadersInit;
  for (const [n, v] of Object.entries(h)) {
    if (v.length === 1 && shape % 2 === 1) {
      const num = Number(v[0]);
      o[n] = /^(0|[1-9][0-9]{0,14})$/.test(v[0]!) && String(num) === v[0] ? num : v[0]!;
    } else o[n] = v;
  }
  return o;
}

const plain = (h: SpdyHeaders): Record<string, string[]> => ({ ...h });

describe('fuzz: SPDY header blocks', () => {
  it(
    'encodeHeaderPairs / decodeHeaderPairs round-trip random lowercase header maps',
    () => {
      fc.assert(
        fc.property(headerMapArb, fc.nat(), fc.option(fc.integer({ min: 1, max: 0x7fffffff })), (h, shape, sid) => {
          const decoded = decodeHeaderPairs(encodeHeaderPairs(asInit(h, shape)), sid ?? undefined);
          expect(plain(decoded)).toEqual(plain(h));
          expect(Object.keys(decoded)).toEqual(Object.keys(h));
        }),
        { numRuns: runs(5000) },
      );
    },
    timeout(120_000),
  );

  it(
    'encodeHeaderPairs lowercases and merges names that differ only in case',
    () => {
      fc.assert(
        fc.property(
          fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/),
          fc.array(fc.tuple(fc.array(fc.boolean(), { minLength: 16, maxLength: 16 }), valueArb), {
            minLength: 1,
            maxLength: 4,
          }),
          (name, variants) => {
            const init: SpdyHeadersInit = {};
            const want: string[] = [];
            const seen = new Set<string>();
            for (const [upper, value] of variants) {
              const cased = [...name].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('');
              if (seen.has(cased)) continue;
              seen.add(cased);
              init[cased] = value;
              want.push(value);
            }
            expect(plain(decodeHeaderPairs(encodeHeaderPairs(init)))).toEqual({ [name]: want });
          },
        ),
        { numRuns: runs(1000) },
      );
    },
    timeout(120_000),
  );

  // Raw blocks built from length-prefixed pieces so the parser gets past the count check often.
  const lenPrefixed = fc
    .tuple(
      fc.oneof(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 0xffffffff })),
      fc.array(
        fc.tuple(
          fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 0xffffffff })),
          fc.uint8Array({ maxLength: 40 }),
        ),
        { maxLength: 8 },
      ),
      fc.uint8Array({ maxLength: 4 }),
    )
    .map(([count, parts, tail]) => {
      const bufs: Buffer[] = [];
      const c = Buffer.alloc(4);
      c.writeUInt32BE(count, 0);
      bufs.push(c);
      for (const [len, body] of parts) {
        const l = Buffer.alloc(4);
        l.writeUInt32BE(len, 0);
        bufs.push(l, Buffer.from(body));
      }
      bufs.push(Buffer.from(tail));
      return Buffer.concat(bufs);
    });
  const anyBlock = fc.oneof(
    fc.uint8Array({ maxLength: 256 }).map((a) => Buffer.from(a)),
    lenPrefixed,
    // A valid block with one byte changed or the end cut off.
    fc
      .tuple(headerMapArb, fc.nat(), fc.integer({ min: 0, max: 255 }), fc.boolean())
      .map(([h, at, byte, cut]) => {
        const b = Buffer.from(encodeHeaderPairs(h));
        if (b.length === 0) return b;
        if (cut) return b.subarray(0, at % b.length);
        b[at % b.length] = byte;
        return b;
      }),
  );

  it(
    'decodeHeaderPairs on arbitrary bytes returns headers or throws SpdyProtocolError only',
    () => {
      fc.assert(
        fc.property(anyBlock, fc.option(fc.integer({ min: 1, max: 0x7fffffff })), (block, sid) => {
          let out: SpdyHeaders;
          try {
            out = decodeHeaderPairs(block, sid ?? undefined);
          } catch (e) {
            expect(e).toBeInstanceOf(SpdyProtocolError);
            const err = e as SpdyProtocolError;
            expect(err.code).toBe('SPDY_BAD_HEADER_BLOCK');
            expect(err.streamScoped).toBe(sid !== null);
            if (sid !== null) expect(err.streamId).toBe(sid);
            return;
          }
          for (const [name, values] of Object.entries(out)) {
            expect(name.length).toBeGreaterThan(0);
            expect(name).toBe(name.toLowerCase());
            expect(values.length).toBeGreaterThan(0);
          }
        }),
        { numRuns: runs(4000) },
      );
    },
    timeout(120_000),
  );

  it(
    'HeaderCompressor -> HeaderDecompressor round-trips sequences of header maps',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(headerMapArb, { minLength: 1, maxLength: 8 }), async (maps) => {
          const c = new HeaderCompressor();
          const d = new HeaderDecompressor();
          try {
            // Issue every decompress before awaiting any: results must come back in call order.
            const pending = maps.map((h, i) => d.decompress(c.compress(h), i % 2 === 0 ? undefined : 2 * i + 1));
            const got = await Promise.all(pending);
            expect(got.map(plain)).toEqual(maps.map(plain));
          } finally {
            d.close();
          }
        }),
        { numRuns: runs(200) },
      );
    },
    timeout(120_000),
  );

  it(
    'HeaderDecompressor on arbitrary bytes settles with headers or SpdyProtocolError only',
    async () => {
      const valid = new HeaderCompressor();
      const first = valid.compress({ ':status': '200' });
      await fc.assert(
        fc.asyncProperty(
          fc.boolean(),
          fc.array(fc.uint8Array({ maxLength: 128 }).map((a) => Buffer.from(a)), { minLength: 1, maxLength: 4 }),
          async (validStart, blocks) => {
            const d = new HeaderDecompressor();
            try {
              const all = validStart ? [first, ...blocks] : blocks;
              const results = await Promise.allSettled(all.map((b) => d.decompress(b)));
              for (const r of results) {
                if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(SpdyProtocolError);
              }
              if (validStart) expect(results[0]!.status).toBe('fulfilled');
            } finally {
              d.close();
            }
          },
        ),
        { numRuns: runs(200) },
      );
    },
    timeout(120_000),
  );
});
