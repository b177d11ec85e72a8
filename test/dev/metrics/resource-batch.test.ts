import { describe, expect, it } from 'vitest';
import { decodeResourceBatch, mergeBatches } from '../../../dev/metrics/resource-batch.js';
import { parsePrometheusText } from '../../../dev/metrics/prometheus-text.js';

const TEXT = `# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 1.25 1700000000123
container_cpu_usage_seconds_total{container="side",namespace="default",pod="web"} 0.5
container_cpu_usage_seconds_total{container="lonely",namespace="default",pod="half"} 0.5 1700000000123
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 4096000 1700000000123
container_memory_working_set_bytes{container="side",namespace="default",pod="web"} 1024 1700000000123
container_start_time_seconds{container="app",namespace="default",pod="web"} 1699999000.5
node_cpu_usage_seconds_total 80.5 1700000000100
node_memory_working_set_bytes 1026990080 1700000000100
resource_scrape_error 0
`;

describe('decodeResourceBatch', () => {
  it('makes node and container points, with the scrape time for lines without a timestamp', () => {
    const batch = decodeResourceBatch(parsePrometheusText(TEXT), 'dev-node', 1700000000999);
    expect(batch.nodes.get('dev-node')).toEqual({ timestampMs: 1700000000100, cpuSeconds: 80.5, memoryBytes: 1026990080, startTimeMs: 0 });
    expect([...batch.pods.keys()]).toEqual(['default/web']); // "half" has no memory line
    const web = batch.pods.get('default/web')!;
    expect([...web.keys()]).toEqual(['app', 'side']);
    expect(web.get('app')).toEqual({ timestampMs: 1700000000123, cpuSeconds: 1.25, memoryBytes: 4096000, startTimeMs: 1699999000500 });
    expect(web.get('side')!.timestampMs).toBe(1700000000999);
  });
  it('has no node point without both node lines', () => {
    const text = 'node_cpu_usage_seconds_total 1 1\n';
    expect(decodeResourceBatch(parsePrometheusText(text), 'n', 5).nodes.size).toBe(0);
  });
  it('merges the batches of several nodes', () => {
    const a = decodeResourceBatch(parsePrometheusText(TEXT), 'a', 1);
    const b = decodeResourceBatch(parsePrometheusText(TEXT.replaceAll('pod="web"', 'pod="other"')), 'b', 1);
    const m = mergeBatches([a, b]);
    expect([...m.nodes.keys()]).toEqual(['a', 'b']);
    expect([...m.pods.keys()]).toEqual(['default/web', 'default/other']);
  });
});
