import { describe, expect, it } from 'vitest';
import {
  metaTime,
  metricsList,
  metricsNotFound,
  nodeMetricsObject,
  objectNotFound,
  podMetricsObject,
} from '../../../dev/metrics/metrics-objects.js';

const NOW = Date.parse('2023-03-03T04:38:08.765Z');

describe('metrics objects (metrics-server JSON shapes)', () => {
  it('PodMetrics, golden', () => {
    const obj = podMetricsObject(
      { name: 'web', namespace: 'default', labels: { app: 'web' } },
      { timestampMs: Date.parse('2023-03-03T04:37:54.321Z'), windowMs: 20064, containers: [
        { name: 'app', cpuNanocores: 329087452, memoryBytes: 2748180 * 1024 },
        { name: 'side', cpuNanocores: 0, memoryBytes: 1500 },
      ] },
      NOW,
    );
    expect(JSON.stringify(obj)).toBe(
      '{"kind":"PodMetrics","apiVersion":"metrics.k8s.io/v1beta1",' +
        '"metadata":{"name":"web","namespace":"default","creationTimestamp":"2023-03-03T04:38:08Z","labels":{"app":"web"}},' +
        '"timestamp":"2023-03-03T04:37:54Z","window":"20.064s",' +
        '"containers":[{"name":"app","usage":{"cpu":"329087452n","memory":"2748180Ki"}},{"name":"side","usage":{"cpu":"0","memory":"1500"}}]}',
    );
  });

  it('NodeMetrics, golden (no labels key when there are none)', () => {
    const obj = nodeMetricsObject(
      { name: 'ub18', labels: {} },
      { timestampMs: Date.parse('2023-03-03T04:37:54Z'), windowMs: 15000, cpuNanocores: 5_000_000, memoryBytes: 1024 ** 3 },
      NOW,
    );
    expect(JSON.stringify(obj)).toBe(
      '{"kind":"NodeMetrics","apiVersion":"metrics.k8s.io/v1beta1",' +
        '"metadata":{"name":"ub18","creationTimestamp":"2023-03-03T04:38:08Z"},' +
        '"timestamp":"2023-03-03T04:37:54Z","window":"15s","usage":{"cpu":"5m","memory":"1Gi"}}',
    );
  });

  it('lists carry items without kind and apiVersion', () => {
    const item = nodeMetricsObject({ name: 'n', labels: {} }, { timestampMs: 0, windowMs: 1000, cpuNanocores: 1, memoryBytes: 1 }, 0, false);
    expect(metricsList('NodeMetricsList', [item])).toEqual({
      kind: 'NodeMetricsList',
      apiVersion: 'metrics.k8s.io/v1beta1',
      metadata: {},
      items: [{ metadata: { name: 'n', creationTimestamp: '1970-01-01T00:00:00Z' }, timestamp: '1970-01-01T00:00:00Z', window: '1s', usage: { cpu: '1n', memory: '1' } }],
    });
  });

  it('NotFound Statuses as metrics-server answers them', () => {
    expect(objectNotFound('pod', 'x')).toEqual({
      kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'pod "x" not found', reason: 'NotFound', code: 404,
      details: { name: 'x', kind: 'pod' },
    });
    expect(metricsNotFound('pods', 'default/x')).toMatchObject({
      message: 'pods.metrics.k8s.io "default/x" not found', code: 404, details: { name: 'default/x', group: 'metrics.k8s.io', kind: 'pods' },
    });
  });

  it('metaTime truncates to the second', () => {
    expect(metaTime(Date.parse('2026-01-02T03:04:05.999Z'))).toBe('2026-01-02T03:04:05Z');
  });
});
