/** Discovery order of APIServices: kube-aggregator's legacy order and the aggregated-discovery order. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  sortedByGroupAndVersion,
  sortedForAggregatedDiscovery,
  type SortableAPIService,
} from '../../../src/aggregation/apiservice-sort.js';

const golden = JSON.parse(readFileSync(new URL('./fixtures/apiservice-sort.json', import.meta.url), 'utf8')) as {
  input: Array<[string, number, number]>;
  legacyOrder: string[][];
  aggregatedOrder: string[][];
};

function apiService([name, groupPriorityMinimum, versionPriority]: [string, number, number]): SortableAPIService {
  const dot = name.indexOf('.');
  return { metadata: { name }, spec: { version: name.slice(0, dot), group: name.slice(dot + 1), groupPriorityMinimum, versionPriority } };
}

const names = (groups: SortableAPIService[][]) => groups.map((g) => g.map((a) => a.metadata.name));
const input = golden.input.map(apiService);

describe('sortedByGroupAndVersion (legacy /apis order)', () => {
  it('matches the golden order, from the given and the reversed input', () => {
    expect(names(sortedByGroupAndVersion(input))).toEqual(golden.legacyOrder);
    expect(names(sortedByGroupAndVersion([...input].reverse()))).toEqual(golden.legacyOrder);
  });

  it('breaks group-priority ties by APIService name, not group name', () => {
    // v1.b.tie.io < v2.a.tie.io by name, so b.tie.io is listed first though "a" < "b".
    const groups = sortedByGroupAndVersion(input).map((g) => g[0]!.spec.group);
    expect(groups.indexOf('b.tie.io')).toBeLessThan(groups.indexOf('a.tie.io'));
  });

  it('places a group by its best APIService (a low-priority version does not pull it down)', () => {
    // a.tie.io has 500 (v2) and 400 (v1): it sorts at 500.
    const groups = sortedByGroupAndVersion(input).map((g) => g[0]!.spec.group);
    expect(groups.indexOf('a.tie.io')).toBeLessThan(groups.indexOf('metrics.k8s.io'));
  });

  it('does not modify its input', () => {
    const copy = input.map((a) => a.metadata.name);
    sortedByGroupAndVersion(input);
    expect(input.map((a) => a.metadata.name)).toEqual(copy);
  });
});

describe('sortedForAggregatedDiscovery', () => {
  it('matches the golden order: ties by group name', () => {
    expect(names(sortedForAggregatedDiscovery(input))).toEqual(golden.aggregatedOrder);
    expect(names(sortedForAggregatedDiscovery([...input].reverse()))).toEqual(golden.aggregatedOrder);
  });
});
