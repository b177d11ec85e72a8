/**
 * Property-based fuzz tests for the SPDY/3 frame codec (src/spdy/frame.ts).
 *
 * Runs scale with the FUZZ_RUNS environment variable (a multiplier, default 1): e.g. FUZZ_RUNS=100
 * for a soak run. On failure fast-check prints the seed and path needed to replay the case.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  DEFAULT_MAX_FRAME_SIZE,
  FrameParser,
  SPDY_VERSION,
  encodeFrame,
  type SpdyFrame,
} from '../../src/spdy/frame.js';
import { SpdyProtocolError } from '../../src/spdy/errors.js';

const MULT = Number(process.env.FUZZ_RUNS ?? '1') || 1;
const runs = (n: number): number => Math.max(1, Math.round(n * MULT));
const timeout = (ms: number): number => Math.min(2 ** 31 - 1, Math.max(ms, ms * MULT));

const MAX_ID = 0x7fffffff;
const id31 = fc.integer({ min: 0, max: MAX_ID });
const streamId = fc.integer({ min: 1, max: MAX_ID });
const u32 = fc.integer({ min: 0, max: 0xffffffff });
const bytes = (maxLength: number) => fc.uint8Array({ maxLength }).map((a) => Buffer.from(a));
const payload = fc.oneof(
  { weight: 4, arbitrary: bytes(256) },
  { weight: 1, arbitrary: bytes(4096) },
);

/** An unknown control frame: not encodable by encodeFrame, so it is written by hand. */
interface RawUnknown {
  type: 'raw_unknown';
  frameType: number;
  flags: number;
  payload: Buffer;
}

const frameArb: fc.Arbitrary<SpdyFrame | RawUnknown> = fc.oneof(
  fc.record({ type: fc.constant('data' as const), streamId, fin: fc.boolean(), data: payload }),
  fc.record({
    type: fc.constant('syn_stream' as const),
    streamId,
    associatedStreamId: id31,
    priority: fc.integer({ min: 0, max: 7 }),
    fin: fc.boolean(),
    unidirectional: fc.boolean(),
    headerBlock: payload,
  }),
  fc.record({ type: fc.constant('syn_reply' as const), streamId, fin: fc.boolean(), headerBlock: payload }),
  fc.record({ type: fc.constant('headers' as const), streamId, fin: fc.boolean(), headerBlock: payload }),
  fc.record({ type: fc.constant('rst_stream' as const), streamId, status: u32 }),
  fc.record({
    type: fc.constant('settings' as const),
    clearSettings: fc.boolean(),
    entries: fc.array(
      fc.record({ flags: fc.integer({ min: 0, max: 0xff }), id: fc.integer({ min: 0, max: 0xffffff }), value: u32 }),
      { maxLength: 12 },
    ),
  }),
  fc.record({ type: fc.constant('ping' as const), id: u32 }),
  fc.record({ type: fc.constant('goaway' as const), lastGoodStreamId: id31, status: u32 }),
  fc.record({ type: fc.constant('window_update' as const), streamId: id31, delta: id31 }),
  fc.record({
    type: fc.constant('raw_unknown' as const),
    frameType: fc.oneof(fc.constant(0), fc.constant(5), fc.integer({ min: 10, max: 0xffff })),
    flags: fc.integer({ min: 0, max: 0xff }),
    payload: bytes(64),
  }),
);

function encodeAny(f: SpdyFrame | RawUnknown): Buffer[] {
  if (f.type !== 'raw_unknown') return encodeFrame(f);
  const h = Buffer.alloc(8);
  h.writeUInt16BE(0x8000 | SPDY_VERSION, 0);
  h.writeUInt16BE(f.frameType, 2);
  h.writeUInt32BE(((f.flags << 24) | f.payload.length) >>> 0, 4);
  return [h, f.payload];
}

function expected(f: SpdyFrame | RawUnknown): SpdyFrame {
  return f.type === 'raw_unknown' ? { type: 'unknown', frameType: f.frameType, flags: f.flags } : f;
}

/** Splits `buf` at the given cut points (any values; reduced modulo the length, deduplicated). */
function chunk(buf: Buffer, cuts: number[]): Buffer[] {
  if (buf.length === 0) return [buf];
  const at = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const c of [...at, buf.length]) {
    out.push(buf.subarray(prev, c)); // empty chunks included on purpose
    prev = c;
  }
  return out;
}

/** Plain-object view with Buffers turned into hex so deep equality is cheap and readable. */
function plain(f: SpdyFrame): unknown {
  const o: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(f)) o[k] = Buffer.isBuffer(v) ? `hex:${v.toString('hex')}` : v;
  return o;
}

const cutsArb = fc.array(fc.nat(), { maxLength: 24 });

describe('fuzz: SPDY frame codec', () => {
  it(
    'round-trips any valid frame sequence in any chunking (whole frames)',
    () => {
      fc.assert(
        fc.property(fc.array(frameArb, { maxLength: 10 }), cutsArb, fc.boolean(), (frames, cuts, bigLimit) => {
          const wire = Buffer.concat(frames.flatMap(encodeAny));
          // The tight limit is the largest payload in the sequence: every frame must still pass.
          const largest = Math.max(0, ...frames.map((f) => encodeAny(f).reduce((n, b) => n + b.length, 0) - 8));
          const parser = new FrameParser({ maxFrameSize: bigLimit ? DEFAULT_MAX_FRAME_SIZE : largest });
          const got: SpdyFrame[] = [];
          for (const c of chunk(wire, cuts)) {
            got.push(...parser.push(c));
            expect(parser.bufferedBytes).toBeLessThanOrEqual(largest + 8);
          }
          expect(got.map(plain)).toEqual(frames.map(expected).map(plain));
          expect(parser.midFrame).toBe(false);
          expect(parser.bufferedBytes).toBe(0);
          expect(parser.hasPendingError).toBe(false);
        }),
        { numRuns: runs(4000) },
      );
    },
    timeout(120_000),
  );

  it(
    'round-trips any valid frame sequence in any chunking (streamData pieces)',
    () => {
      fc.assert(
        fc.property(fc.array(frameArb, { maxLength: 10 }), cutsArb, (frames, cuts) => {
          const wire = Buffer.concat(frames.flatMap(encodeAny));
          const parser = new FrameParser({ streamData: true });
          const out: SpdyFrame[] = [];
          for (const c of chunk(wire, cuts)) out.push(...parser.push(c));
          // Reassemble DATA pieces: a piece without `continued` starts a frame.
          const merged: SpdyFrame[] = [];
          let open: { frame: Extract<SpdyFrame, { type: 'data' }>; parts: Buffer[] } | undefined;
          const close = () => {
            if (!open) return;
            merged.push({ ...open.frame, data: Buffer.concat(open.parts) });
            open = undefined;
          };
          for (const f of out) {
            if (f.type === 'data' && f.continued) {
              expect(open, 'continued piece without a first piece').toBeDefined();
              expect(f.streamId).toBe(open!.frame.streamId);
              expect(open!.frame.fin, 'fin on a piece that was not the last').toBe(false);
              expect(f.data.length).toBeGreaterThan(0);
              open!.frame = { type: 'data', streamId: f.streamId, fin: f.fin, data: f.data };
              open!.parts.push(f.data);
              continue;
            }
            close();
            if (f.type === 'data') {
              expect(f.continued).toBeUndefined();
              open = { frame: { type: 'data', streamId: f.streamId, fin: f.fin, data: f.data }, parts: [f.data] };
            } else merged.push(f);
          }
          close();
          expect(merged.map(plain)).toEqual(frames.map(expected).map(plain));
          // Pieces are never empty, except the single piece of an empty DATA frame.
          const nonEmptyFrames = frames.filter((f) => f.type === 'data' && f.data.length > 0).length;
          const emptyPieces = out.filter((f) => f.type === 'data' && f.data.length === 0).length;
          expect(emptyPieces).toBe(frames.filter((f) => f.type === 'data').length - nonEmptyFrames);
          expect(parser.midFrame).toBe(false);
          expect(parser.bufferedBytes).toBe(0);
        }),
        { numRuns: runs(3000) },
      );
    },
    timeout(120_000),
  );

  // Segments that get past the 8-byte header checks more often than uniform noise does.
  const noisySegment = fc.oneof(
    { weight: 3, arbitrary: bytes(64) },
    { weight: 3, arbitrary: frameArb.map((f) => Buffer.concat(encodeAny(f))) },
    {
      weight: 3,
      arbitrary: fc
        .record({
          control: fc.boolean(),
          version: fc.oneof({ weight: 5, arbitrary: fc.constant(SPDY_VERSION) }, fc.integer({ min: 0, max: 0x7fff })),
          typeOrStream: fc.oneof(fc.integer({ min: 0, max: 10 }), u32),
          flags: fc.integer({ min: 0, max: 0xff }),
          length: fc.oneof(fc.integer({ min: 0, max: 64 }), fc.integer({ min: 0, max: 0xffffff })),
          body: bytes(64),
        })
        .map((r) => {
          const h = Buffer.alloc(8);
          if (r.control) {
            h.writeUInt16BE(0x8000 | r.version, 0);
            h.writeUInt16BE(r.typeOrStream & 0xffff, 2);
          } else h.writeUInt32BE(r.typeOrStream & MAX_ID, 0);
          h.writeUInt32BE(((r.flags << 24) | r.length) >>> 0, 4);
          return Buffer.concat([h, r.body]);
        }),
    },
  );
  const maxFrameSizeArb = fc.oneof(
    fc.integer({ min: 0, max: 128 }),
    fc.integer({ min: 0, max: 8192 }),
    fc.constant(DEFAULT_MAX_FRAME_SIZE),
  );

  it(
    'arbitrary bytes in arbitrary chunks: only SpdyProtocolError, bounded buffering, sane frames',
    () => {
      fc.assert(
        fc.property(
          fc.oneof(bytes(2048), fc.array(noisySegment, { maxLength: 12 }).map((s) => Buffer.concat(s))),
          cutsArb,
          maxFrameSizeArb,
          fc.boolean(),
          (wire, cuts, maxFrameSize, streamData) => {
            const parser = new FrameParser({ maxFrameSize, streamData });
            let fatal: unknown;
            const check = (frames: SpdyFrame[]) => {
              for (const f of frames) {
                if ('streamId' in f) expect(f.streamId).toBeLessThanOrEqual(MAX_ID);
                if (f.type === 'data') {
                  expect(f.streamId).toBeGreaterThan(0);
                  expect(f.data.length).toBeLessThanOrEqual(maxFrameSize);
                }
              }
              // With an error deferred, the rest of the chunk waits unparsed for the next push.
              if (!parser.hasPendingError) expect(parser.bufferedBytes).toBeLessThanOrEqual(maxFrameSize + 8);
            };
            const push = (c: Buffer): void => {
              try {
                check(parser.push(c));
              } catch (e) {
                if (!(e instanceof SpdyProtocolError)) throw e;
                if (!e.streamScoped) fatal = e;
              }
            };
            for (const c of chunk(wire, cuts)) {
              push(c);
              // As documented: a deferred error is collected with an empty push before more input.
              while (fatal === undefined && parser.hasPendingError) push(Buffer.alloc(0));
              if (fatal !== undefined) {
                // Connection-scoped errors are sticky.
                expect(() => parser.push(Buffer.from([0]))).toThrow(fatal as Error);
                return;
              }
            }
          },
        ),
        { numRuns: runs(3000) },
      );
    },
    timeout(120_000),
  );
});
