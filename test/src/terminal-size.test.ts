import { describe, expect, it } from 'vitest';
import { MAX_PENDING_RESIZE_BYTES, TerminalSizeDecodeError, TerminalSizeDecoder } from '../../src/terminal-size.js';

describe('TerminalSizeDecoder', () => {
  it.each([
    ['Go field names', '{"Width":80,"Height":24}', [{ width: 80, height: 24 }]],
    ['JS field names', '{"height":24,"width":80}', [{ width: 80, height: 24 }]],
    ['mixed case', '{"wIdTh":1,"HEIGHT":2}', [{ width: 1, height: 2 }]],
    ['two in one chunk', '{"Width":1,"Height":2}{"Width":3,"Height":4}', [{ width: 1, height: 2 }, { width: 3, height: 4 }]],
    ['whitespace between', ' {"Width":1,"Height":2}\n\t{"Width":3,"Height":4} ', [{ width: 1, height: 2 }, { width: 3, height: 4 }]],
    ['unknown keys ignored', '{"Width":5,"Height":6,"x":{"y":"}"}}', [{ width: 5, height: 6 }]],
    ['missing key is 0', '{"Width":5}', [{ width: 5, height: 0 }]],
    ['null is skipped', 'null{"Width":1,"Height":1}', [{ width: 1, height: 1 }]],
  ])('%s', (_name, input, want) => {
    expect(new TerminalSizeDecoder().push(Buffer.from(input))).toEqual(want);
  });

  it('decodes objects split at every byte boundary', () => {
    const text = Buffer.from('{"Width":120,"Height":40} {"height":33,"width":99}');
    for (let cut = 0; cut <= text.length; cut++) {
      const d = new TerminalSizeDecoder();
      const got = [...d.push(text.subarray(0, cut)), ...d.push(text.subarray(cut))];
      expect(got).toEqual([{ width: 120, height: 40 }, { width: 99, height: 33 }]);
    }
  });

  it('decodes byte by byte', () => {
    const d = new TerminalSizeDecoder();
    const got = [];
    for (const b of Buffer.from('{"Width":7,"Height":8}{"Width":9,"Height":10}')) got.push(...d.push(Buffer.from([b])));
    expect(got).toEqual([{ width: 7, height: 8 }, { width: 9, height: 10 }]);
  });

  it.each([
    ['garbage', 'hello', 'RESIZE_SYNTAX'],
    ['an array', '[1,2]', 'RESIZE_SYNTAX'],
    ['a number', '42', 'RESIZE_SYNTAX'],
    ['a string width', '{"Width":"80","Height":24}', 'RESIZE_TYPE'],
    ['a negative width', '{"Width":-1,"Height":24}', 'RESIZE_TYPE'],
    ['a width above uint16', '{"Width":65536,"Height":24}', 'RESIZE_TYPE'],
    ['a fractional height', '{"Width":1,"Height":2.5}', 'RESIZE_TYPE'],
    ['broken JSON inside braces', '{"Width":,}', 'RESIZE_SYNTAX'],
  ])('rejects %s with a typed error', (_name, input, code) => {
    const d = new TerminalSizeDecoder();
    let err: unknown;
    try {
      d.push(Buffer.from(input));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TerminalSizeDecodeError);
    expect((err as TerminalSizeDecodeError).code).toBe(code);
    // once failed, it stays failed
    expect(() => d.push(Buffer.from('{"Width":1,"Height":1}'))).toThrow(TerminalSizeDecodeError);
  });

  it('keeps the sizes decoded before the garbage', () => {
    const d = new TerminalSizeDecoder();
    try {
      d.push(Buffer.from('{"Width":1,"Height":2}oops'));
      expect.unreachable();
    } catch (e) {
      expect((e as TerminalSizeDecodeError).decoded).toEqual([{ width: 1, height: 2 }]);
    }
  });

  it('bounds the bytes kept for an unfinished object', () => {
    const d = new TerminalSizeDecoder();
    expect(d.push(Buffer.from('{"Width":1,"pad":"'))).toEqual([]);
    expect(() => d.push(Buffer.alloc(MAX_PENDING_RESIZE_BYTES, 0x61))).toThrow(
      expect.objectContaining({ code: 'RESIZE_TOO_LARGE' }),
    );
  });
});
