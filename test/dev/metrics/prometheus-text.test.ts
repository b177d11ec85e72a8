import { describe, expect, it } from 'vitest';
import { parsePrometheusText, PrometheusParseError } from '../../../dev/metrics/prometheus-text.js';

describe('parsePrometheusText', () => {
  it('reads HELP, TYPE, labels, values and timestamps', () => {
    const text = [
      '# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds',
      '# TYPE node_cpu_usage_seconds_total counter',
      'node_cpu_usage_seconds_total 80.57476 1677049494541',
      '# a plain comment',
      '',
      '# TYPE container_memory_working_set_bytes gauge',
      'container_memory_working_set_bytes{container="a\\\\b",namespace="x\\ny",pod="q\\"r",} 1.5646720e+07 1677049498418',
      'weird_value{le="+Inf"} +Inf',
      'nan_value NaN',
    ].join('\n');
    const parsed = parsePrometheusText(text);
    expect(parsed.types).toEqual(new Map([
      ['node_cpu_usage_seconds_total', 'counter'],
      ['container_memory_working_set_bytes', 'gauge'],
    ]));
    expect(parsed.help.get('node_cpu_usage_seconds_total')).toBe('[STABLE] Cumulative cpu time consumed by the node in core-seconds');
    expect(parsed.samples[0]).toEqual({ name: 'node_cpu_usage_seconds_total', labels: {}, value: 80.57476, timestampMs: 1677049494541 });
    expect(parsed.samples[1]).toEqual({
      name: 'container_memory_working_set_bytes',
      labels: { container: 'a\\b', namespace: 'x\ny', pod: 'q"r' },
      value: 15646720,
      timestampMs: 1677049498418,
    });
    expect(parsed.samples[2]!.value).toBe(Infinity);
    expect(parsed.samples[3]!.value).toBeNaN();
  });

  it.each([
    ['a bad metric name', '1abc 1', 1],
    ['no value', 'abc', 1],
    ['a bad value', 'abc one', 1],
    ['a bad timestamp', 'abc 1 1.5', 1],
    ['three fields', 'abc 1 2 3', 1],
    ['an unterminated label value', 'abc{a="x} 1', 1],
    ['a bad escape', 'abc{a="\\t"} 1', 1],
    ['a duplicate label', 'abc{a="1",a="2"} 1', 1],
    ['a missing comma', 'abc{a="1" b="2"} 1', 1],
    ['an unknown TYPE', '# TYPE abc countre', 1],
    ['a second TYPE', '# TYPE abc gauge\n# TYPE abc gauge', 2],
    ['a TYPE after samples', 'abc 1\n# TYPE abc gauge', 2],
  ])('refuses %s, naming the line', (_name, text, line) => {
    let err: unknown;
    try {
      parsePrometheusText(text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PrometheusParseError);
    expect((err as PrometheusParseError).line).toBe(line);
  });
});
