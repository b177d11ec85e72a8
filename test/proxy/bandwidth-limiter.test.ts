import { describe, expect, it } from 'vitest';
import { TokenBucket, BURST_SECONDS } from '../../proxy/bandwidth-limiter.js';

describe('TokenBucket', () => {
  it('makes the reader wait for the debt a chunk creates', () => {
    let now = 0;
    const bucket = new TokenBucket(1000, () => now);
    expect(bucket.take(500)).toBe(500); // 500 bytes of debt at 1000 B/s
    now = 500;
    expect(bucket.take(0)).toBe(0);
    expect(bucket.take(1000)).toBe(1000);
  });

  it('banks at most BURST_SECONDS of rate while idle', () => {
    let now = 0;
    const bucket = new TokenBucket(1000, () => now);
    now = 60_000; // a long quiet spell
    expect(bucket.take(1000 * BURST_SECONDS)).toBe(0);
    expect(bucket.take(100)).toBe(100);
  });

  it('refuses a non-positive rate', () => {
    expect(() => new TokenBucket(0)).toThrow(RangeError);
  });
});
