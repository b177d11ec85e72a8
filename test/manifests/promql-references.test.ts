/**
 * The PromQL reference reader (test/manifests/promql-references.ts) on hand-made expressions: the
 * selectors and grouping labels it must find, and the texts it must refuse.
 */
import { describe, expect, it } from 'vitest';
import { PromqlReferenceError, promqlReferences } from './promql-references.js';

describe('promqlReferences', () => {
  it('finds each selector with its matchers, and each clause with the metrics under it', () => {
    const refs = promqlReferences(
      `sum by (job, code) (rate(a_total{job="x", code=~"5.."}[5m])) / ignoring (code) group_left sum by (job) (rate(a_total[5m])) > 0.1
       and on (job) absent(up{job='x'} == 1) or {__name__="b", instance!="i"} unless count without (le) (c_bucket offset 5m) or {"d", l!~\`v\`}`,
    );
    expect(refs.selectors).toEqual([
      { metric: 'a_total', matchers: [{ label: 'job', op: '=', value: 'x' }, { label: 'code', op: '=~', value: '5..' }], text: 'a_total{job="x", code=~"5.."}' },
      { metric: 'a_total', matchers: [], text: 'a_total' },
      { metric: 'up', matchers: [{ label: 'job', op: '=', value: 'x' }], text: "up{job='x'}" },
      { metric: 'b', matchers: [{ label: 'instance', op: '!=', value: 'i' }], text: '{__name__="b", instance!="i"}' },
      { metric: 'c_bucket', matchers: [], text: 'c_bucket' },
      { metric: 'd', matchers: [{ label: 'l', op: '!~', value: 'v' }], text: '{"d", l!~`v`}' },
    ]);
    expect(refs.groupings.map(({ clause, labels, metrics }) => ({ clause, labels, metrics }))).toEqual([
      { clause: 'by', labels: ['job', 'code'], metrics: ['a_total'] },
      { clause: 'by', labels: ['job'], metrics: ['a_total'] },
      { clause: 'without', labels: ['le'], metrics: ['c_bucket'] },
      { clause: 'ignoring', labels: ['code'], metrics: ['a_total'] },
      { clause: 'group_left', labels: [], metrics: ['a_total'] },
      { clause: 'on', labels: ['job'], metrics: ['a_total', 'up'] },
    ]);
  });

  it('reads group_left labels', () => {
    const refs = promqlReferences('a * on (job) group_left (cluster, pod) b');
    expect(refs.groupings.map(({ clause, labels }) => ({ clause, labels }))).toEqual([
      { clause: 'on', labels: ['job'] },
      { clause: 'group_left', labels: ['cluster', 'pod'] },
    ]);
  });

  it('refuses what does not parse, and a selector with no literal metric name', () => {
    expect(() => promqlReferences('sum by (job (rate(a[5m]))')).toThrow(PromqlReferenceError);
    expect(() => promqlReferences('rate(a[5m]) >')).toThrow(/does not parse/);
    expect(() => promqlReferences('{job="x"}')).toThrow(/without a literal metric name/);
    expect(() => promqlReferences('{__name__=~"a.*"}')).toThrow(/without a literal metric name/);
  });
});
