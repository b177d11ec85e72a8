/**
 * The kubelet's `/metrics/resource` answer: Prometheus text exposition format 0.0.4 with the
 * kubelet's metric names, HELP texts (with component-base's stability prefix), label names and
 * per-sample millisecond timestamps (pkg/kubelet/metrics/collectors/resource_metrics.go). Families
 * are sorted by name and labels by label name, as the Go registry writes them. Pure.
 */
import type { ResourceUsageSnapshot } from './resource-metrics.js';

/** The Content-Type of the text format, as the kubelet sends it. */
export const PROMETHEUS_TEXT_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

interface Family {
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  samples: { labels: [string, string][]; value: number; timestampMs?: number }[];
}

/** A label value escaped as the text format wants (`\\`, `\"`, `\n`). */
function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** A sample value: integers as such, others in JavaScript's shortest round-trip form. */
function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
  return String(v);
}

/** Render `snapshot` as the kubelet's `/metrics/resource` body. */
export function renderResourceMetrics(snapshot: ResourceUsageSnapshot, scrapeError = false): string {
  const ts = snapshot.timestampMs;
  const containerLabels = (c: { container: string; namespace: string; pod: string }): [string, string][] => [
    ['container', c.container],
    ['namespace', c.namespace],
    ['pod', c.pod],
  ];
  const podLabels = (p: { namespace: string; pod: string }): [string, string][] => [
    ['namespace', p.namespace],
    ['pod', p.pod],
  ];
  const families: Family[] = [
    {
      name: 'container_cpu_usage_seconds_total',
      help: '[STABLE] Cumulative cpu time consumed by the container in core-seconds',
      type: 'counter',
      samples: snapshot.containers.map((c) => ({ labels: containerLabels(c), value: c.cpuSeconds, timestampMs: ts })),
    },
    {
      name: 'container_memory_working_set_bytes',
      help: '[STABLE] Current working set of the container in bytes',
      type: 'gauge',
      samples: snapshot.containers.map((c) => ({ labels: containerLabels(c), value: c.memoryBytes, timestampMs: ts })),
    },
    {
      name: 'container_start_time_seconds',
      help: '[STABLE] Start time of the container since unix epoch in seconds',
      type: 'gauge',
      samples: snapshot.containers.map((c) => ({ labels: containerLabels(c), value: c.startTimeSeconds })),
    },
    {
      name: 'node_cpu_usage_seconds_total',
      help: '[STABLE] Cumulative cpu time consumed by the node in core-seconds',
      type: 'counter',
      samples: snapshot.node ? [{ labels: [], value: snapshot.node.cpuSeconds, timestampMs: ts }] : [],
    },
    {
      name: 'node_memory_working_set_bytes',
      help: '[STABLE] Current working set of the node in bytes',
      type: 'gauge',
      samples: snapshot.node ? [{ labels: [], value: snapshot.node.memoryBytes, timestampMs: ts }] : [],
    },
    {
      name: 'pod_cpu_usage_seconds_total',
      help: '[STABLE] Cumulative cpu time consumed by the pod in core-seconds',
      type: 'counter',
      samples: snapshot.pods.map((p) => ({ labels: podLabels(p), value: p.cpuSeconds, timestampMs: ts })),
    },
    {
      name: 'pod_memory_working_set_bytes',
      help: '[STABLE] Current working set of the pod in bytes',
      type: 'gauge',
      samples: snapshot.pods.map((p) => ({ labels: podLabels(p), value: p.memoryBytes, timestampMs: ts })),
    },
    {
      name: 'resource_scrape_error',
      help: '[STABLE] 1 if there was an error while getting container metrics, 0 otherwise',
      type: 'gauge',
      samples: [{ labels: [], value: scrapeError ? 1 : 0 }],
    },
  ];
  const lines: string[] = [];
  for (const f of families) {
    lines.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const labels = s.labels.length ? `{${s.labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(',')}}` : '';
      lines.push(`${f.name}${labels} ${formatValue(s.value)}${s.timestampMs !== undefined ? ` ${Math.round(s.timestampMs)}` : ''}`);
    }
  }
  return lines.join('\n') + '\n';
}
