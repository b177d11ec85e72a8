import { describe, expect, it } from 'vitest';
import { formatGoDuration } from '../../../dev/metrics/go-duration.js';

describe('formatGoDuration', () => {
  it.each([
    [0, '0s'],
    [1, '1ms'],
    [537, '537ms'],
    [1000, '1s'],
    [1500, '1.5s'],
    [20064, '20.064s'],
    [15000, '15s'],
    [60000, '1m0s'],
    [75500, '1m15.5s'],
    [3_600_000, '1h0m0s'],
    [3_661_010, '1h1m1.01s'],
  ])('%d ms is %s', (ms, want) => {
    expect(formatGoDuration(ms)).toBe(want);
  });
});
