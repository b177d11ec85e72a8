import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  decodeHeaderPairs,
  encodeHeaderPairs,
  FrameParser,
  HeaderCompressor,
  HeaderDecompressor,
  headerValue,
  SPDY3_DICTIONARY,
  SPDY3_DICTIONARY_ID,
  SpdyProtocolError,
  type SpdyHeadersInit,
} from '../../../src/spdy/index.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

function adler32(b: Buffer): number {
  let a = 1;
  let s = 0;
  for (const byte of b) {
    a = (a + byte) % 65521;
    s = (s + a) % 65521;
  }
  return ((s << 16) | a) >>> 0;
}

/** A persistent deflate with the SPDY/3 dictionary, sync-flushed per block: what Go's framer does. */
function goLikeDeflater(): (pairs: Buffer) => Promise<Buffer> {
  const d = zlib.createDeflate({ dictionary: SPDY3_DICTIONARY, level: 9 });
  const out: Buffer[] = [];
  d.on('data', (c: Buffer) => out.push(c));
  return (pairs) =>
    new Promise((resolve) => {
      d.write(pairs);
      d.flush(zlib.constants.Z_SYNC_FLUSH, () => resolve(Buffer.concat(out.splice(0))));
    });
}

describe('SPDY/3 dictionary', () => {
  it('is 1423 bytes with DICTID 0xe3c6a7c2', () => {
    expect(SPDY3_DICTIONARY.length).toBe(1423);
    expect(adler32(SPDY3_DICTIONARY)).toBe(SPDY3_DICTIONARY_ID);
    expect(SPDY3_DICTIONARY.subarray(0, 11)).toEqual(hex('00000007 6f7074696f6e73'));
    expect(SPDY3_DICTIONARY.subarray(-6).toString()).toBe('enq=0.');
  });
});

describe('header pairs', () => {
  it('encodes to the spec layout, lowercasing names and NUL-joining values', () => {
    expect(encodeHeaderPairs({ StreamType: 'stdout', port: 8080, 'x-a': ['1', '2'] })).toEqual(
      hex('00000003' + '0000000a' + Buffer.from('streamtype').toString('hex') + '00000006' + Buffer.from('stdout').toString('hex') +
        '00000004' + Buffer.from('port').toString('hex') + '00000004' + Buffer.from('8080').toString('hex') +
        '00000003' + Buffer.from('x-a').toString('hex') + '00000003' + '310032'),
    );
  });

  it('decodes multi-value NUL joins and looks values up case-insensitively', () => {
    const h = decodeHeaderPairs(encodeHeaderPairs({ a: ['x', 'y', 'z'], streamtype: 'error' }));
    expect(h['a']).toEqual(['x', 'y', 'z']);
    expect(headerValue(h, 'StreamType')).toBe('error');
    expect(headerValue(h, 'missing')).toBeUndefined();
    expect(decodeHeaderPairs(hex('00000000'))).toEqual({});
  });

  const pair = (n: string, v: string): string =>
    (Buffer.from(n).length.toString(16).padStart(8, '0') + Buffer.from(n).toString('hex') +
      Buffer.from(v).length.toString(16).padStart(8, '0') + Buffer.from(v).toString('hex'));

  it.each([
    ['empty buffer', ''],
    ['truncated count', '000000'],
    ['count without pairs', '00000001'],
    ['name length overruns', '00000001 000000ff 61'],
    ['value length overruns', '00000001 00000001 61 00000009 61'],
    ['zero-length name', '00000001 00000000 00000001 61'],
    ['uppercase name', '00000001' + pair('Abc', 'x')],
    ['duplicate names', '00000002' + pair('a', 'x') + pair('a', 'y')],
    ['trailing bytes', '00000001' + pair('a', 'x') + '00'],
    ['absurd count', 'ffffffff 00000000'],
  ])('rejects %s', (_n, h) => {
    expect(() => decodeHeaderPairs(hex(h))).toThrow(SpdyProtocolError);
    expect(() => decodeHeaderPairs(hex(h), 5)).toThrow(expect.objectContaining({ streamId: 5, code: 'SPDY_BAD_HEADER_BLOCK' }));
  });
});

describe('HeaderCompressor / HeaderDecompressor', () => {
  it('first block carries a zlib header with FDICT and the dictionary id; later ones do not', () => {
    const c = new HeaderCompressor();
    const first = c.compress({ streamtype: 'error' });
    expect(first[0]).toBe(0x78);
    expect(first[1]! & 0x20).toBe(0x20);
    expect(((first[0]! << 8) | first[1]!) % 31).toBe(0);
    expect(first.readUInt32BE(2)).toBe(SPDY3_DICTIONARY_ID);
    expect(first.subarray(-4)).toEqual(hex('0000ffff')); // sync-flush boundary
    const second = c.compress({ streamtype: 'stdout' });
    expect(second[0]).not.toBe(0x78);
  });

  it('round-trips 1,000 consecutive blocks through one compressor and one decompressor', async () => {
    const c = new HeaderCompressor();
    const d = new HeaderDecompressor();
    const inputs: SpdyHeadersInit[] = [];
    for (let i = 0; i < 1000; i++) {
      inputs.push({ streamtype: ['error', 'stdin', 'stdout', 'stderr'][i % 4]!, port: i, requestid: String(i), big: 'v'.repeat(i * 37), multi: ['a', String(i)] });
    }
    const outs = await Promise.all(inputs.map((h) => d.decompress(c.compress(h))));
    outs.forEach((h, i) => {
      expect(h['requestid']).toEqual([String(i)]);
      expect(h['big']).toEqual(['v'.repeat(i * 37)]);
      expect(h['multi']).toEqual(['a', String(i)]);
    });
    d.close();
  });

  it('Node’s own persistent inflate with the dictionary reads the whole compressed sequence', () => {
    const c = new HeaderCompressor();
    const blocks = Array.from({ length: 200 }, (_, i) => c.compress({ streamtype: 'stdout', n: i }));
    const out = zlib.inflateSync(Buffer.concat(blocks), { dictionary: SPDY3_DICTIONARY, finishFlush: zlib.constants.Z_SYNC_FLUSH });
    let at = 0;
    for (let i = 0; i < 200; i++) {
      const pairs = encodeHeaderPairs({ streamtype: 'stdout', n: i });
      expect(out.subarray(at, at + pairs.length)).toEqual(pairs);
      at += pairs.length;
    }
    expect(at).toBe(out.length);
  });

  it('decodes blocks from a persistent deflate WITH the dictionary (what Go does), back-references included', async () => {
    const deflate = goLikeDeflater();
    const d = new HeaderDecompressor();
    for (let i = 0; i < 50; i++) {
      const headers = { streamtype: 'stdout', requestid: String(i % 3), port: '8080' };
      const block = await deflate(encodeHeaderPairs(headers));
      if (i === 0) expect(block.subarray(0, 6)).toEqual(hex('78f9 e3c6a7c2'));
      expect(await d.decompress(block, 1 + 2 * i)).toEqual({ streamtype: ['stdout'], requestid: [String(i % 3)], port: ['8080'] });
    }
    d.close();
  });

  it('decodes a SYN_STREAM as moby/spdystream (Go compress/zlib, BestCompression) writes it', async () => {
    // streamtype=stdout on stream 1; bytes as published for spdystream v0.2.0 interop tests.
    const wire = hex(
      '80030001 0000002b 00000001 00000000 0000 78f9e3c6a7c2 626060 6004a7b392a2d4c45c6851c2565c92925f5a020000 00ffff',
    );
    const [frame] = new FrameParser().push(wire);
    expect(frame?.type).toBe('syn_stream');
    const d = new HeaderDecompressor();
    expect(await d.decompress((frame as { headerBlock: Buffer }).headerBlock)).toEqual({ streamtype: ['stdout'] });
    d.close();
  });

  it('rejects a block that fails to inflate, connection-scoped, and stays failed', async () => {
    const d = new HeaderDecompressor();
    const bad = d.decompress(hex('78f9 00000000 0102030405'), 1);
    await expect(bad).rejects.toMatchObject({ code: 'SPDY_BAD_COMPRESSION', streamId: undefined, status: 1 });
    await expect(d.decompress(new HeaderCompressor().compress({ a: 'b' }))).rejects.toBeInstanceOf(SpdyProtocolError);
  });

  it('a block that inflates but has a bad pair list is stream-scoped', async () => {
    const c = new HeaderCompressor();
    const d = new HeaderDecompressor();
    const raw = zlib.deflateRawSync(hex('00000001 00000001 41 00000000'), { finishFlush: zlib.constants.Z_SYNC_FLUSH });
    const first = c.compress({ ok: 'yes' });
    expect(await d.decompress(first)).toEqual({ ok: ['yes'] });
    await expect(d.decompress(raw, 7)).rejects.toMatchObject({ code: 'SPDY_BAD_HEADER_BLOCK', streamId: 7 });
    expect(await d.decompress(c.compress({ still: 'works' }))).toEqual({ still: ['works'] });
    d.close();
  });
});
