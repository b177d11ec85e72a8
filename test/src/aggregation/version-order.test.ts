/** compareKubeAwareVersionStrings: golden order from Kubernetes' own docs and tests. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { compareKubeAwareVersionStrings, sortKubeAwareVersions } from '../../../src/aggregation/version-order.js';

const golden = JSON.parse(readFileSync(new URL('./fixtures/kube-aware-versions.json', import.meta.url), 'utf8')) as {
  sorted: string[];
  pairs: Array<[string, string, number]>;
};

describe('compareKubeAwareVersionStrings', () => {
  it('sorts the documented list into the documented order from any starting order', () => {
    const shuffles = [golden.sorted, [...golden.sorted].reverse(), ['foo10', 'v1', 'v12alpha1', 'foo1', 'v10beta3', 'v2', 'v11alpha2', 'v3beta1', 'v10', 'v11beta2']];
    for (const input of shuffles) expect(sortKubeAwareVersions(input)).toEqual(golden.sorted);
  });

  it.each(golden.pairs)('compare(%s, %s) has sign %d', (a, b, want) => {
    expect(Math.sign(compareKubeAwareVersionStrings(a, b))).toBe(want);
  });

  it('is antisymmetric over the golden list', () => {
    for (const a of golden.sorted) {
      for (const b of golden.sorted) {
        expect(Math.sign(compareKubeAwareVersionStrings(a, b)) || 0).toBe(0 - Math.sign(compareKubeAwareVersionStrings(b, a)) || 0);
      }
    }
  });
});
