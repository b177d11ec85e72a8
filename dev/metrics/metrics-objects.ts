/**
 * The objects of `metrics.k8s.io/v1beta1` as metrics-server serves them (k8s.io/metrics
 * `pkg/apis/metrics/v1beta1/types.go`, metrics-server `pkg/storage`): `PodMetrics` and
 * `NodeMetrics` with metadata (name, namespace, creationTimestamp = the time of the answer, as
 * metrics-server sets it, and the object's labels), `timestamp`, `window` and the usage, and their
 * lists (items without kind/apiVersion, as Go encodes them). Also the NotFound Statuses
 * metrics-server answers. Pure.
 */
import { errorStatus, type V1Status } from '../../src/status.js';
import { formatGoDuration } from './go-duration.js';
import type { PodUsage, Usage } from './metrics-store.js';
import { formatCpuNanocores, formatMemoryBytes } from './quantity.js';

/** The API group and version served. */
export const METRICS_GROUP = 'metrics.k8s.io';
export const METRICS_VERSION = 'v1beta1';
export const METRICS_GROUP_VERSION = `${METRICS_GROUP}/${METRICS_VERSION}`;

/** The object a metrics object describes (from the cluster's pod or node list). */
export interface ObjectRef {
  name: string;
  namespace?: string;
  labels: Record<string, string>;
}

/** `metav1.Time` in JSON: RFC 3339 to the second, UTC. */
export function metaTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function metadata(ref: ObjectRef, nowMs: number): Record<string, unknown> {
  const meta: Record<string, unknown> = { name: ref.name };
  if (ref.namespace !== undefined) meta.namespace = ref.namespace;
  meta.creationTimestamp = metaTime(nowMs);
  if (Object.keys(ref.labels).length > 0) meta.labels = ref.labels;
  return meta;
}

const typeMeta = (kind: string): Record<string, string> => ({ kind, apiVersion: METRICS_GROUP_VERSION });

/** A `PodMetrics`; `withKind` false for list items. */
export function podMetricsObject(pod: ObjectRef, usage: PodUsage, nowMs: number, withKind = true): Record<string, unknown> {
  return {
    ...(withKind ? typeMeta('PodMetrics') : {}),
    metadata: metadata(pod, nowMs),
    timestamp: metaTime(usage.timestampMs),
    window: formatGoDuration(usage.windowMs),
    containers: usage.containers.map((c) => ({
      name: c.name,
      usage: { cpu: formatCpuNanocores(c.cpuNanocores), memory: formatMemoryBytes(c.memoryBytes) },
    })),
  };
}

/** A `NodeMetrics`; `withKind` false for list items. */
export function nodeMetricsObject(node: ObjectRef, usage: Usage, nowMs: number, withKind = true): Record<string, unknown> {
  return {
    ...(withKind ? typeMeta('NodeMetrics') : {}),
    metadata: metadata({ name: node.name, labels: node.labels }, nowMs),
    timestamp: metaTime(usage.timestampMs),
    window: formatGoDuration(usage.windowMs),
    usage: { cpu: formatCpuNanocores(usage.cpuNanocores), memory: formatMemoryBytes(usage.memoryBytes) },
  };
}

/** A `PodMetricsList` or `NodeMetricsList` of list items. */
export function metricsList(kind: 'PodMetricsList' | 'NodeMetricsList', items: Record<string, unknown>[]): Record<string, unknown> {
  return { ...typeMeta(kind), metadata: {}, items };
}

/**
 * The object itself does not exist: the cluster lister's NotFound, which metrics-server returns
 * as is (`pod "x" not found`: listers name the resource in the singular, with no group).
 */
export function objectNotFound(resource: 'pod' | 'node', name: string): V1Status {
  return errorStatus(404, `${resource} "${name}" not found`, 'NotFound', { name, kind: resource });
}

/** The object exists but no metrics are known for it yet: `pods.metrics.k8s.io "ns/x" not found`. */
export function metricsNotFound(resource: 'pods' | 'nodes', name: string): V1Status {
  return errorStatus(404, `${resource}.${METRICS_GROUP} "${name}" not found`, 'NotFound', { name, group: METRICS_GROUP, kind: resource });
}
