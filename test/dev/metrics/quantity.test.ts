import { describe, expect, it } from 'vitest';
import { formatCpuNanocores, formatDecimalSI, formatMemoryBytes } from '../../../dev/metrics/quantity.js';

// Expected strings are what apimachinery's Quantity.String() prints for the same values.
describe('formatCpuNanocores (DecimalSI, scale -9)', () => {
  it.each([
    [0, '0'],
    [1, '1n'],
    [329087452, '329087452n'],
    [5_000_000, '5m'],
    [1_500_000, '1500u'],
    [100_000_000, '100m'],
    [1_000_000_000, '1'],
    [2_500_000_000, '2500m'],
    [1_000, '1u'],
    [10_000, '10u'],
  ])('%d nanocores is %s', (n, want) => {
    expect(formatCpuNanocores(n)).toBe(want);
  });
  it('refuses negative and fractional counts', () => {
    expect(() => formatCpuNanocores(-1)).toThrow(RangeError);
    expect(() => formatCpuNanocores(1.5)).toThrow(RangeError);
  });
});

describe('formatMemoryBytes (BinarySI)', () => {
  it.each([
    [0, '0'],
    [512, '512'],
    [1000, '1k'],
    [1023, '1023'],
    [1024, '1Ki'],
    [1500, '1500'],
    [12345 * 1024, '12345Ki'],
    [1024 * 1024, '1Mi'],
    [2748180 * 1024, '2748180Ki'],
    [3 * 1024 ** 3, '3Gi'],
  ])('%d bytes is %s', (n, want) => {
    expect(formatMemoryBytes(n)).toBe(want);
  });
});

describe('formatDecimalSI', () => {
  it('moves to the next suffix a multiple of 3 away', () => {
    expect(formatDecimalSI(1500, 0)).toBe('1500');
    expect(formatDecimalSI(1_500_000, 0)).toBe('1500k');
    expect(formatDecimalSI(3, 9)).toBe('3G');
  });
});
