/**
 * The points dev-metrics keeps and the usage it answers with, as metrics-server's storage does
 * (pkg/storage): CPU usage is the rate of the cumulative CPU counter between two points of the same
 * series (nanocores = Δcore-nanoseconds / Δseconds), memory is the newest working set.
 *
 * Unlike metrics-server, which keeps exactly the last two scrapes (window = its scrape interval,
 * 15 s by default), dev-metrics samples more often and keeps every point no older than
 * `maxWindowMs` before the newest: the window grows from one sample interval after start-up to
 * `maxWindowMs`, so the first answer comes one interval after start and later answers are averaged
 * over up to `maxWindowMs`. A series whose start time changed or whose counter went down (a
 * restart) starts again from its newest point; series absent from the newest batch are dropped.
 */
import { podKey, type MetricsPoint, type ResourceBatch } from './resource-batch.js';

/** Usage over a window. */
export interface Usage {
  /** The newest point's time, ms since the epoch. */
  timestampMs: number;
  /** Between the two points used, ms. */
  windowMs: number;
  /** CPU in nanocores (whole). */
  cpuNanocores: number;
  /** Working set in bytes at the newest point. */
  memoryBytes: number;
}

/** A pod's usage: one entry per container, sharing the earliest container's time and window. */
export interface PodUsage {
  timestampMs: number;
  windowMs: number;
  containers: { name: string; cpuNanocores: number; memoryBytes: number }[];
}

/** One series' kept points, oldest first. */
class Series {
  points: MetricsPoint[] = [];

  add(p: MetricsPoint, maxWindowMs: number): void {
    const last = this.points[this.points.length - 1];
    if (last && p.timestampMs <= last.timestampMs) return; // not newer: nothing to learn
    if (last && (p.startTimeMs !== last.startTimeMs || p.cpuSeconds < last.cpuSeconds)) this.points = [];
    this.points.push(p);
    while (this.points.length > 2 && p.timestampMs - this.points[0]!.timestampMs > maxWindowMs) this.points.shift();
  }

  usage(): Usage | undefined {
    if (this.points.length < 2) return undefined;
    const prev = this.points[0]!;
    const last = this.points[this.points.length - 1]!;
    const windowMs = last.timestampMs - prev.timestampMs;
    // As metrics-server: whole core-nanoseconds per point, then the rate.
    const deltaNs = Math.trunc(last.cpuSeconds * 1e9) - Math.trunc(prev.cpuSeconds * 1e9);
    return {
      timestampMs: last.timestampMs,
      windowMs,
      cpuNanocores: Math.max(0, Math.trunc(deltaNs / (windowMs / 1000))),
      memoryBytes: last.memoryBytes,
    };
  }
}

/** Windowed storage of node and container points. */
export class MetricsStore {
  #nodes = new Map<string, Series>();
  #pods = new Map<string, Map<string, Series>>();

  /** @param maxWindowMs the longest window answered with (the oldest point kept, bar the last two). */
  constructor(readonly maxWindowMs: number) {}

  /** Take in a scrape; series it does not contain are forgotten. */
  store(batch: ResourceBatch): void {
    const nodes = new Map<string, Series>();
    for (const [name, p] of batch.nodes) {
      const s = this.#nodes.get(name) ?? new Series();
      s.add(p, this.maxWindowMs);
      nodes.set(name, s);
    }
    const pods = new Map<string, Map<string, Series>>();
    for (const [key, containers] of batch.pods) {
      const before = this.#pods.get(key);
      const series = new Map<string, Series>();
      for (const [name, p] of containers) {
        const s = before?.get(name) ?? new Series();
        s.add(p, this.maxWindowMs);
        series.set(name, s);
      }
      pods.set(key, series);
    }
    this.#nodes = nodes;
    this.#pods = pods;
  }

  /** The node's usage, or undefined while fewer than two points are known. */
  nodeUsage(name: string): Usage | undefined {
    return this.#nodes.get(name)?.usage();
  }

  /** The pod's usage (containers in the scrape's order), or undefined unless every container has one (as metrics-server). */
  podUsage(namespace: string, name: string): PodUsage | undefined {
    const series = this.#pods.get(podKey(namespace, name));
    if (!series || series.size === 0) return undefined;
    const containers: PodUsage['containers'] = [];
    let earliest: Usage | undefined;
    for (const [container, s] of series) {
      const u = s.usage();
      if (!u) return undefined;
      containers.push({ name: container, cpuNanocores: u.cpuNanocores, memoryBytes: u.memoryBytes });
      if (!earliest || u.timestampMs < earliest.timestampMs) earliest = u;
    }
    return { timestampMs: earliest!.timestampMs, windowMs: earliest!.windowMs, containers };
  }
}
