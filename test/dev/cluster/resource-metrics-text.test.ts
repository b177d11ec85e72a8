import { describe, expect, it } from 'vitest';
import { renderResourceMetrics } from '../../../dev/cluster/resource-metrics-text.js';
import { parsePrometheusText } from '../../../dev/metrics/prometheus-text.js';

const SNAPSHOT = {
  timestampMs: 1700000000123,
  node: { cpuSeconds: 80.57, memoryBytes: 1026990080 },
  containers: [
    { namespace: 'default', pod: 'web', container: 'app', startTimeSeconds: 1699999000.5, cpuSeconds: 1.25, memoryBytes: 4096000 },
    { namespace: 'default', pod: 'web', container: 'side"car', startTimeSeconds: 1699999001, cpuSeconds: 0.5, memoryBytes: 1024 },
  ],
  pods: [{ namespace: 'default', pod: 'web', cpuSeconds: 1.75, memoryBytes: 4097024 }],
};

// The kubelet's names, HELP texts and label order (pkg/kubelet/metrics/collectors/resource_metrics.go).
const GOLDEN = `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 1.25 1700000000123
container_cpu_usage_seconds_total{container="side\\"car",namespace="default",pod="web"} 0.5 1700000000123
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 4096000 1700000000123
container_memory_working_set_bytes{container="side\\"car",namespace="default",pod="web"} 1024 1700000000123
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1699999000.5
container_start_time_seconds{container="side\\"car",namespace="default",pod="web"} 1699999001
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 80.57 1700000000123
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1026990080 1700000000123
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 1.75 1700000000123
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 4097024 1700000000123
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`;

describe('renderResourceMetrics', () => {
  it('writes the kubelet /metrics/resource text (golden)', () => {
    expect(renderResourceMetrics(SNAPSHOT)).toBe(GOLDEN);
  });

  it('parses back to the same figures, label escaping included', () => {
    const parsed = parsePrometheusText(renderResourceMetrics(SNAPSHOT));
    expect(parsed.types.get('container_cpu_usage_seconds_total')).toBe('counter');
    expect(parsed.types.get('pod_memory_working_set_bytes')).toBe('gauge');
    const cpu = parsed.samples.filter((s) => s.name === 'container_cpu_usage_seconds_total');
    expect(cpu.map((s) => [s.labels, s.value, s.timestampMs])).toEqual([
      [{ container: 'app', namespace: 'default', pod: 'web' }, 1.25, 1700000000123],
      [{ container: 'side"car', namespace: 'default', pod: 'web' }, 0.5, 1700000000123],
    ]);
  });

  it('leaves the node families empty when /proc gave no machine figures', () => {
    const parsed = parsePrometheusText(renderResourceMetrics({ ...SNAPSHOT, node: undefined }, true));
    expect(parsed.samples.filter((s) => s.name.startsWith('node_'))).toEqual([]);
    expect(parsed.types.has('node_cpu_usage_seconds_total')).toBe(true);
    expect(parsed.samples.find((s) => s.name === 'resource_scrape_error')?.value).toBe(1);
  });
});
