/**
 * PieceBatch (src/piece-batch.ts): pieces in order, large ones kept as the same views (no copy),
 * small ones copied together into few buffers, the taken buffers never written again.
 */
import { describe, expect, it } from 'vitest';
import { MAX_COPY_BUFFER_BYTES, PieceBatch, SMALL_PIECE_BYTES } from '../../src/piece-batch.js';

describe('PieceBatch', () => {
  it('keeps large pieces as views, copies small ones together, in order', () => {
    const b = new PieceBatch();
    const big = Buffer.alloc(SMALL_PIECE_BYTES, 0x61);
    const smalls = Array.from({ length: 100 }, (_, i) => Buffer.from([i]));
    for (const x of smalls.slice(0, 50)) b.add(x);
    b.add(big);
    for (const x of smalls.slice(50)) b.add(x);
    expect(b.bytes).toBe(100 + big.length);
    expect(b.count).toBe(101);
    const parts = b.take();
    expect(parts).toHaveLength(3);
    expect(parts[1]).toBe(big);
    expect(Buffer.concat(parts).equals(Buffer.concat([...smalls.slice(0, 50), big, ...smalls.slice(50)]))).toBe(true);
    expect(b.bytes).toBe(0);
    expect(b.take()).toEqual([]);
  });

  it('a copy is a copy: changing the source afterwards changes nothing; later batches never overwrite taken bytes', () => {
    const b = new PieceBatch();
    const src = Buffer.from('hello world');
    b.addCopy(src, 0, 5);
    src.fill(0);
    const first = b.take();
    for (let i = 0; i < 5000; i++) b.add(Buffer.from([0x7a]));
    const second = b.take();
    expect(Buffer.concat(first).toString()).toBe('hello');
    expect(Buffer.concat(second).equals(Buffer.alloc(5000, 0x7a))).toBe(true);
  });

  it('100,000 one-byte pieces become buffers of at most MAX_COPY_BUFFER_BYTES, few of them', () => {
    const b = new PieceBatch();
    for (let i = 0; i < 100_000; i++) b.add(Buffer.from([i & 0xff]));
    const parts = b.take();
    expect(parts.every((p) => p.length <= MAX_COPY_BUFFER_BYTES)).toBe(true);
    expect(parts.length).toBeLessThan(20);
    const all = Buffer.concat(parts);
    expect(all.length).toBe(100_000);
    for (let i = 0; i < 100_000; i += 997) expect(all[i]).toBe(i & 0xff);
  });
});
