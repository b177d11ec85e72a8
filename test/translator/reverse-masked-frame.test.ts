/**
 * The client frames the reverse translator writes itself (translator/reverse-masked-frame.ts), read
 * back by `ws`'s own server-side Receiver: every length encoding, with and without the channel byte,
 * payloads in several pieces, the frame cut at every boundary; a fresh key per frame; the pieces
 * masked in place (the documented cost: none but the head).
 */
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { maskedBinaryFrame } from '../../translator/reverse-masked-frame.js';
import { ClientFrames } from './reverse-wire.js';

/** Split `payload` into `n` pieces (the last takes the rest). */
function pieces(payload: Buffer, n: number): Buffer[] {
  const size = Math.ceil(payload.length / n);
  const out: Buffer[] = [];
  for (let i = 0; i < n; i++) out.push(Buffer.from(payload.subarray(i * size, Math.min(payload.length, (i + 1) * size))));
  return out;
}

describe('maskedBinaryFrame', () => {
  it.each([0, 1, 124, 125, 126, 127, 65_534, 65_535, 65_536, 200_000])('%i payload bytes, with and without a channel byte, in 1–3 pieces: ws reads the message', (length) => {
    for (const prefix of [undefined, 0, 4, 255]) {
      for (const n of [1, 2, 3]) {
        const payload = randomBytes(length);
        const frame = Buffer.concat(maskedBinaryFrame(prefix, pieces(payload, n)));
        const reader = new ClientFrames();
        reader.push(frame);
        expect(reader.error).toBeUndefined();
        const want = prefix === undefined ? payload : Buffer.concat([Buffer.from([prefix]), payload]);
        expect(reader.messages.length).toBe(1);
        expect(reader.messages[0]!.equals(want), `${length} bytes, prefix ${prefix}, ${n} pieces`).toBe(true);
      }
    }
  });

  it('cut at every boundary, two frames in a row: ws reads both', () => {
    const a = Buffer.from('x'.repeat(130));
    const b = Buffer.from('hello');
    const wire = Buffer.concat([...maskedBinaryFrame(1, [Buffer.from(a)]), ...maskedBinaryFrame(undefined, [Buffer.from(b.subarray(0, 2)), Buffer.from(b.subarray(2))])]);
    for (let cut = 1; cut < wire.length; cut++) {
      const reader = new ClientFrames();
      // Copies: the reader unmasks in place.
      reader.push(Buffer.from(wire.subarray(0, cut)));
      reader.push(Buffer.from(wire.subarray(cut)));
      expect(reader.error).toBeUndefined();
      expect(reader.messages).toEqual([Buffer.concat([Buffer.from([1]), a]), b]);
    }
  });

  it('a fresh masking key per frame; the pieces are masked where they lie, only the head is new', () => {
    const keys = new Set<string>();
    for (let i = 0; i < 64; i++) {
      const [head] = maskedBinaryFrame(0, [Buffer.from('same payload')]);
      keys.add(head!.subarray(2, 6).toString('hex'));
    }
    expect(keys.size).toBe(64);
    const piece = Buffer.from('keep me?');
    const copy = Buffer.from(piece);
    const frame = maskedBinaryFrame(undefined, [piece]);
    expect(frame[1]).toBe(piece);
    expect(piece.equals(copy)).toBe(false);
    expect(frame[0]!.length).toBe(6);
  });
});
