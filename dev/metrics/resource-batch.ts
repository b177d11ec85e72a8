/**
 * Turning one kubelet `/metrics/resource` scrape into metrics points, as metrics-server's
 * `decodeBatch` (pkg/scraper/client/resource/decode.go) does: cumulative CPU seconds and working
 * set per container and for the node, each with its sample timestamp (the scrape time when a line
 * has none) and the container's start time. A container missing its CPU or its memory line is left
 * out; a node missing either has no point. Pure.
 */
import type { PrometheusExposition } from './prometheus-text.js';

/** One measurement of a container or a node. */
export interface MetricsPoint {
  /** When it was measured, ms since the epoch. */
  timestampMs: number;
  /** Cumulative CPU time in core-seconds since {@link startTimeMs}. */
  cpuSeconds: number;
  /** Working set in bytes. */
  memoryBytes: number;
  /** Container start, ms since the epoch (0 when unknown; nodes have none). */
  startTimeMs: number;
}

/** The points of one scrape. */
export interface ResourceBatch {
  /** By node name. */
  nodes: Map<string, MetricsPoint>;
  /** By `namespace/pod`, then by container name. */
  pods: Map<string, Map<string, MetricsPoint>>;
}

/** `namespace/name`, the key of a pod in a batch. */
export function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

interface Partial {
  cpu?: { value: number; ts: number };
  memory?: { value: number; ts: number };
  startTimeMs: number;
}

/** Decode the exposition of node `nodeName`'s kubelet, scraped at `scrapeTimeMs`. */
export function decodeResourceBatch(exposition: PrometheusExposition, nodeName: string, scrapeTimeMs: number): ResourceBatch {
  const node: Partial = { startTimeMs: 0 };
  const containers = new Map<string, Map<string, Partial>>();
  const containerOf = (labels: Record<string, string>): Partial | undefined => {
    const { namespace, pod, container } = labels;
    if (!namespace || !pod || !container) return undefined;
    const key = podKey(namespace, pod);
    let byName = containers.get(key);
    if (!byName) containers.set(key, (byName = new Map()));
    let c = byName.get(container);
    if (!c) byName.set(container, (c = { startTimeMs: 0 }));
    return c;
  };
  for (const s of exposition.samples) {
    const ts = s.timestampMs ?? scrapeTimeMs;
    if (!Number.isFinite(s.value) || s.value < 0) continue;
    switch (s.name) {
      case 'node_cpu_usage_seconds_total':
        node.cpu = { value: s.value, ts };
        break;
      case 'node_memory_working_set_bytes':
        node.memory = { value: s.value, ts };
        break;
      case 'container_cpu_usage_seconds_total': {
        const c = containerOf(s.labels);
        if (c) c.cpu = { value: s.value, ts };
        break;
      }
      case 'container_memory_working_set_bytes': {
        const c = containerOf(s.labels);
        if (c) c.memory = { value: s.value, ts };
        break;
      }
      case 'container_start_time_seconds': {
        const c = containerOf(s.labels);
        if (c) c.startTimeMs = Math.round(s.value * 1000);
        break;
      }
    }
  }
  const point = (p: Partial): MetricsPoint | undefined =>
    p.cpu && p.memory
      ? { timestampMs: p.cpu.ts, cpuSeconds: p.cpu.value, memoryBytes: Math.trunc(p.memory.value), startTimeMs: p.startTimeMs }
      : undefined;
  const batch: ResourceBatch = { nodes: new Map(), pods: new Map() };
  const nodePoint = point(node);
  if (nodePoint) batch.nodes.set(nodeName, nodePoint);
  for (const [key, byName] of containers) {
    const points = new Map<string, MetricsPoint>();
    for (const [name, p] of byName) {
      const mp = point(p);
      if (mp) points.set(name, mp);
    }
    if (points.size > 0) batch.pods.set(key, points);
  }
  return batch;
}

/** Several nodes' batches as one (a pod is on one node; a later batch wins on a clash). */
export function mergeBatches(batches: readonly ResourceBatch[]): ResourceBatch {
  const out: ResourceBatch = { nodes: new Map(), pods: new Map() };
  for (const b of batches) {
    for (const [k, v] of b.nodes) out.nodes.set(k, v);
    for (const [k, v] of b.pods) out.pods.set(k, v);
  }
  return out;
}
