import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  encodeFrame,
  FrameParser,
  GoAwayStatus,
  RstStatus,
  SpdyProtocolError,
  type SpdyFrame,
} from '../../../src/spdy/index.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const wire = (f: SpdyFrame): Buffer => Buffer.concat(encodeFrame(f));

const samples: [string, SpdyFrame][] = [
  ['data', { type: 'data', streamId: 5, fin: false, data: Buffer.from('hello') }],
  ['data fin empty', { type: 'data', streamId: 0x7fffffff, fin: true, data: Buffer.alloc(0) }],
  [
    'syn_stream',
    {
      type: 'syn_stream',
      streamId: 1,
      associatedStreamId: 0,
      priority: 7,
      fin: true,
      unidirectional: true,
      headerBlock: Buffer.from([1, 2, 3]),
    },
  ],
  ['syn_reply', { type: 'syn_reply', streamId: 3, fin: false, headerBlock: Buffer.from([9, 8]) }],
  ['rst_stream', { type: 'rst_stream', streamId: 7, status: RstStatus.CANCEL }],
  [
    'settings',
    { type: 'settings', clearSettings: true, entries: [{ flags: 1, id: 7, value: 65536 }, { flags: 0, id: 4, value: 100 }] },
  ],
  ['ping', { type: 'ping', id: 0xfffffffe }],
  ['goaway', { type: 'goaway', lastGoodStreamId: 9, status: GoAwayStatus.PROTOCOL_ERROR }],
  ['headers', { type: 'headers', streamId: 11, fin: true, headerBlock: Buffer.from([0]) }],
  ['window_update', { type: 'window_update', streamId: 0, delta: 65536 }],
];

describe('encodeFrame → FrameParser', () => {
  it.each(samples)('%s round-trips', (_name, frame) => {
    expect(new FrameParser().push(wire(frame))).toEqual([frame]);
  });

  it('DATA returns the payload buffer itself (no copy)', () => {
    const payload = Buffer.alloc(100, 7);
    const parts = encodeFrame({ type: 'data', streamId: 1, fin: false, data: payload });
    expect(parts).toHaveLength(2);
    expect(parts[1]).toBe(payload);
  });

  it('parses a frame sequence split at every byte boundary identically', () => {
    const all = Buffer.concat(samples.map(([, f]) => wire(f)));
    const expected = samples.map(([, f]) => f);
    for (let i = 0; i <= all.length; i++) {
      const p = new FrameParser();
      expect([...p.push(all.subarray(0, i)), ...p.push(all.subarray(i))]).toEqual(expected);
    }
    const p = new FrameParser();
    const byByte: SpdyFrame[] = [];
    for (let i = 0; i < all.length; i++) byByte.push(...p.push(all.subarray(i, i + 1)));
    expect(byByte).toEqual(expected);
  });

  it('property: random DATA frames under random chunking', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ id: fc.integer({ min: 1, max: 0x7fffffff }), fin: fc.boolean(), data: fc.uint8Array({ maxLength: 300 }) }), { maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 20 }),
        (frames, cuts) => {
          const expected: SpdyFrame[] = frames.map((f) => ({ type: 'data', streamId: f.id, fin: f.fin, data: Buffer.from(f.data) }));
          const all = Buffer.concat(expected.map(wire));
          const p = new FrameParser();
          const got: SpdyFrame[] = [];
          let at = 0;
          for (let i = 0; at < all.length; i++) {
            const n = cuts[i % cuts.length]!;
            got.push(...p.push(all.subarray(at, at + n)));
            at += n;
          }
          expect(got).toEqual(expected);
        },
      ),
    );
  });
});

describe('golden bytes (written by hand from the SPDY/3 spec)', () => {
  it('PING id 1', () => {
    const bytes = hex('8003 0006 00 000004 00000001');
    expect(wire({ type: 'ping', id: 1 })).toEqual(bytes);
    expect(new FrameParser().push(bytes)).toEqual([{ type: 'ping', id: 1 }]);
  });
  it('RST_STREAM stream 3 CANCEL', () => {
    const bytes = hex('8003 0003 00 000008 00000003 00000005');
    expect(wire({ type: 'rst_stream', streamId: 3, status: RstStatus.CANCEL })).toEqual(bytes);
    expect(new FrameParser().push(bytes)).toEqual([{ type: 'rst_stream', streamId: 3, status: 5 }]);
  });
  it('DATA stream 1 "hi" with FIN', () => {
    const bytes = hex('00000001 01 000002 6869');
    expect(wire({ type: 'data', streamId: 1, fin: true, data: Buffer.from('hi') })).toEqual(bytes);
    expect(new FrameParser().push(bytes)).toEqual([{ type: 'data', streamId: 1, fin: true, data: Buffer.from('hi') }]);
  });
  it('GOAWAY last 7 OK', () => {
    expect(wire({ type: 'goaway', lastGoodStreamId: 7, status: 0 })).toEqual(hex('8003 0007 00 000008 00000007 00000000'));
  });
  it('SYN_STREAM header fields', () => {
    const f: SpdyFrame = { type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: hex('aabb') };
    expect(wire(f)).toEqual(hex('8003 0001 00 00000c 00000001 00000000 0000 aabb'));
  });
});

function expectError(bytes: Buffer, code: string, status: number, streamId?: number, max?: number): void {
  const p = new FrameParser(max === undefined ? {} : { maxFrameSize: max });
  let err: unknown;
  try {
    p.push(bytes);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(SpdyProtocolError);
  const e = err as SpdyProtocolError;
  expect(e.code).toBe(code);
  expect(e.status).toBe(status);
  expect(e.streamId).toBe(streamId);
}

describe('FrameParser errors', () => {
  it('keeps a chunk pushed while a stream-scoped error is pending (found by the fuzz tests)', () => {
    const p = new FrameParser({ maxFrameSize: 4 });
    const ping = (id: number): SpdyFrame => ({ type: 'ping', id });
    const tooBig: SpdyFrame = { type: 'data', streamId: 1, fin: false, data: Buffer.from('12345') };
    expect(p.push(Buffer.concat([wire(ping(1)), wire(tooBig)]))).toEqual([ping(1)]);
    expect(p.hasPendingError).toBe(true);
    expect(() => p.push(wire(ping(2)))).toThrow(SpdyProtocolError); // the pending error, stream 1 only
    expect(p.push(Buffer.alloc(0))).toEqual([ping(2)]); // PING 2 was kept, not dropped
  });

  it.each([
    ['version 2', hex('8002 0006 00 000004 00000001'), 'SPDY_BAD_VERSION'],
    ['PING length 5', hex('8003 0006 00 000005 0000000100'), 'SPDY_BAD_FRAME'],
    ['RST length 4', hex('8003 0003 00 000004 00000001'), 'SPDY_BAD_FRAME'],
    ['GOAWAY length 4', hex('8003 0007 00 000004 00000001'), 'SPDY_BAD_FRAME'],
    ['SETTINGS count mismatch', hex('8003 0004 00 00000c 00000002 00000001 00000000'), 'SPDY_BAD_FRAME'],
    ['SYN_STREAM too short', hex('8003 0001 00 000004 00000001'), 'SPDY_BAD_FRAME'],
    ['SYN_STREAM stream 0', hex('8003 0001 00 00000a 00000000 00000000 0000'), 'SPDY_BAD_FRAME'],
    ['RST stream 0', hex('8003 0003 00 000008 00000000 00000005'), 'SPDY_BAD_FRAME'],
    ['DATA stream 0', hex('00000000 00 000001 ff'), 'SPDY_BAD_FRAME'],
  ])('%s → connection error', (_n, bytes, code) => {
    expectError(bytes, code, GoAwayStatus.PROTOCOL_ERROR);
  });

  it('control frame over the maximum → connection error before buffering it', () => {
    expectError(hex('8003 0001 00 000100'), 'SPDY_FRAME_TOO_LARGE', GoAwayStatus.PROTOCOL_ERROR, undefined, 255);
  });

  it('DATA over the maximum → stream error, payload skipped, parsing continues', () => {
    const p = new FrameParser({ maxFrameSize: 4 });
    const big = wire({ type: 'data', streamId: 3, fin: false, data: Buffer.alloc(10, 1) });
    const ping = wire({ type: 'ping', id: 2 });
    expect(() => p.push(big.subarray(0, 9))).toThrow(expect.objectContaining({ code: 'SPDY_FRAME_TOO_LARGE', streamId: 3, status: RstStatus.FRAME_TOO_LARGE }));
    expect(p.push(Buffer.concat([big.subarray(9), ping]))).toEqual([{ type: 'ping', id: 2 }]);
  });

  it('frames before an error are returned and the error is thrown by the next push', () => {
    const p = new FrameParser();
    const bytes = Buffer.concat([wire({ type: 'ping', id: 2 }), hex('8002 0006 00 000004 00000001')]);
    expect(p.push(bytes)).toEqual([{ type: 'ping', id: 2 }]);
    expect(p.hasPendingError).toBe(true);
    expect(() => p.push(Buffer.alloc(0))).toThrow(SpdyProtocolError);
    expect(() => p.push(wire({ type: 'ping', id: 4 }))).toThrow(SpdyProtocolError); // fatal stays fatal
  });

  it('unknown control type is skipped and reported', () => {
    const p = new FrameParser();
    const bytes = Buffer.concat([hex('8003 000a 07 000003 010203'), wire({ type: 'ping', id: 4 })]);
    expect(p.push(bytes.subarray(0, 10))).toEqual([{ type: 'unknown', frameType: 10, flags: 7 }]);
    expect(p.push(bytes.subarray(10))).toEqual([{ type: 'ping', id: 4 }]);
  });

  it('a large DATA payload split over many chunks is assembled with one copy', () => {
    const payload = Buffer.alloc(1 << 20);
    for (let i = 0; i < payload.length; i++) payload[i] = i & 0xff;
    const all = wire({ type: 'data', streamId: 1, fin: false, data: payload });
    const p = new FrameParser();
    const out: SpdyFrame[] = [];
    for (let at = 0; at < all.length; at += 1000) out.push(...p.push(all.subarray(at, at + 1000)));
    expect(out).toHaveLength(1);
    expect((out[0] as { data: Buffer }).data.equals(payload)).toBe(true);
    expect(p.bufferedBytes).toBe(0);
  });
});

describe('FrameParser streamData mode (DATA pieces as the bytes arrive)', () => {
  type Data = Extract<SpdyFrame, { type: 'data' }>;
  /** Joins the pieces of each DATA frame back into whole frames; checks the piece rules on the way. */
  const join = (out: SpdyFrame[]): SpdyFrame[] => {
    const frames: SpdyFrame[] = [];
    let open: { id: number; parts: Buffer[] } | undefined;
    for (const f of out) {
      if (f.type !== 'data') {
        expect(open).toBeUndefined();
        frames.push(f);
        continue;
      }
      if (f.continued) {
        expect(open?.id).toBe(f.streamId);
      } else {
        expect(open).toBeUndefined();
        open = { id: f.streamId, parts: [] };
      }
      open!.parts.push(f.data);
      if (f.fin) {
        frames.push({ type: 'data', streamId: f.streamId, fin: f.fin, data: Buffer.concat(open!.parts) });
        open = undefined;
      }
    }
    return frames;
  };

  it('a frame inside one chunk comes out whole, as a view of the input', () => {
    const payload = Buffer.from('payload bytes');
    const bytes = wire({ type: 'data', streamId: 3, fin: true, data: payload });
    const out = new FrameParser({ streamData: true }).push(bytes);
    expect(out).toEqual([{ type: 'data', streamId: 3, fin: true, data: payload }]);
    expect((out[0] as Data).data.buffer).toBe(bytes.buffer);
  });

  it('an empty FIN frame comes out once', () => {
    const p = new FrameParser({ streamData: true });
    expect(p.push(wire({ type: 'data', streamId: 1, fin: true, data: Buffer.alloc(0) }))).toEqual([
      { type: 'data', streamId: 1, fin: true, data: Buffer.alloc(0) },
    ]);
    expect(p.midFrame).toBe(false);
  });

  it('a frame spanning chunks comes out in pieces without copying, FIN only on the last', () => {
    const payload = Buffer.alloc(100_000);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) & 0xff;
    const all = Buffer.concat([
      wire({ type: 'data', streamId: 5, fin: true, data: payload }),
      wire({ type: 'ping', id: 2 }),
    ]);
    const p = new FrameParser({ streamData: true });
    const out: SpdyFrame[] = [];
    const inputs: Buffer[] = [];
    for (let at = 0; at < all.length; at += 65_536) {
      const c = Buffer.from(all.subarray(at, at + 65_536)); // each chunk its own memory, like socket reads
      inputs.push(c);
      out.push(...p.push(c));
      if (at === 0) expect(p.midFrame).toBe(true);
    }
    const pieces = out.filter((f): f is Data => f.type === 'data');
    expect(pieces.length).toBe(2);
    expect(pieces.map((f) => [f.fin, f.continued === true])).toEqual([
      [false, false],
      [true, true],
    ]);
    pieces.forEach((f, i) => expect(f.data.buffer).toBe(inputs[i]!.buffer));
    expect(Buffer.concat(pieces.map((f) => f.data)).equals(payload)).toBe(true);
    expect(out[out.length - 1]).toEqual({ type: 'ping', id: 2 });
    expect(p.midFrame).toBe(false);
  });

  it('property: random frames under random chunking join back to the frames sent', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ id: fc.integer({ min: 1, max: 0x7fffffff }), data: fc.uint8Array({ maxLength: 300 }) }), { maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 20 }),
        (frames, cuts) => {
          // FIN on every frame so that join() knows where each one ends.
          const expected: SpdyFrame[] = frames.map((f) => ({ type: 'data', streamId: f.id, fin: true, data: Buffer.from(f.data) }));
          const all = Buffer.concat([...expected.map(wire), wire({ type: 'ping', id: 1 })]);
          const p = new FrameParser({ streamData: true });
          const got: SpdyFrame[] = [];
          let at = 0;
          for (let i = 0; at < all.length; i++) {
            const n = cuts[i % cuts.length]!;
            got.push(...p.push(all.subarray(at, at + n)));
            at += n;
          }
          for (const f of got) if (f.type === 'data') expect(f.data.length > 0 || f.fin).toBe(true);
          expect(join(got)).toEqual([...expected, { type: 'ping', id: 1 }]);
        },
      ),
    );
  });

  it('oversized DATA is still a stream error with the payload skipped', () => {
    const p = new FrameParser({ streamData: true, maxFrameSize: 10 });
    const big = wire({ type: 'data', streamId: 3, fin: false, data: Buffer.alloc(20) });
    expect(() => p.push(big)).toThrow(SpdyProtocolError);
    expect(p.push(wire({ type: 'ping', id: 4 }))).toEqual([{ type: 'ping', id: 4 }]);
  });
});
