import { describe, expect, it } from 'vitest';
import { MetricsStore } from '../../../dev/metrics/metrics-store.js';
import type { MetricsPoint, ResourceBatch } from '../../../dev/metrics/resource-batch.js';

const pt = (timestampMs: number, cpuSeconds: number, memoryBytes = 1024, startTimeMs = 1): MetricsPoint => ({ timestampMs, cpuSeconds, memoryBytes, startTimeMs });
const batch = (containers: Record<string, MetricsPoint>, node?: MetricsPoint): ResourceBatch => ({
  nodes: new Map(node ? [['n', node]] : []),
  pods: new Map([['default/web', new Map(Object.entries(containers))]]),
});

describe('MetricsStore', () => {
  it('answers only from the second point on, with the rate over the window', () => {
    const s = new MetricsStore(15_000);
    s.store(batch({ app: pt(10_000, 1) }, pt(10_000, 100)));
    expect(s.podUsage('default', 'web')).toBeUndefined();
    expect(s.nodeUsage('n')).toBeUndefined();
    s.store(batch({ app: pt(12_000, 1.5, 4096) }, pt(12_000, 103)));
    expect(s.podUsage('default', 'web')).toEqual({
      timestampMs: 12_000,
      windowMs: 2_000,
      containers: [{ name: 'app', cpuNanocores: 250_000_000, memoryBytes: 4096 }],
    });
    expect(s.nodeUsage('n')).toEqual({ timestampMs: 12_000, windowMs: 2_000, cpuNanocores: 1_500_000_000, memoryBytes: 1024 });
  });

  it('widens the window up to the resolution, then slides it', () => {
    const s = new MetricsStore(5_000);
    for (let t = 0; t <= 10_000; t += 1_000) s.store(batch({ app: pt(t, t / 1000) }));
    const u = s.podUsage('default', 'web')!;
    expect(u.windowMs).toBe(5_000);
    expect(u.containers[0]!.cpuNanocores).toBe(1_000_000_000);
  });

  it('keeps two points when scrapes are further apart than the resolution', () => {
    const s = new MetricsStore(1_000);
    s.store(batch({ app: pt(0, 0) }));
    s.store(batch({ app: pt(10_000, 5) }));
    expect(s.podUsage('default', 'web')!.windowMs).toBe(10_000);
  });

  it('starts a series again after a restart or a counter that went down', () => {
    const s = new MetricsStore(15_000);
    s.store(batch({ app: pt(0, 5) }));
    s.store(batch({ app: pt(1_000, 6) }));
    s.store(batch({ app: pt(2_000, 0.1, 1024, 2) })); // new start time
    expect(s.podUsage('default', 'web')).toBeUndefined();
    s.store(batch({ app: pt(3_000, 0.2, 1024, 2) }));
    expect(s.podUsage('default', 'web')!.windowMs).toBe(1_000);
    s.store(batch({ app: pt(4_000, 0.1, 1024, 2) })); // went down
    expect(s.podUsage('default', 'web')).toBeUndefined();
  });

  it('ignores a point that is not newer, and forgets series missing from a batch', () => {
    const s = new MetricsStore(15_000);
    s.store(batch({ app: pt(0, 0) }));
    s.store(batch({ app: pt(0, 9) }));
    s.store(batch({ app: pt(1_000, 1) }));
    expect(s.podUsage('default', 'web')!.containers[0]!.cpuNanocores).toBe(1_000_000_000);
    s.store({ nodes: new Map(), pods: new Map() });
    expect(s.podUsage('default', 'web')).toBeUndefined();
  });

  it('needs every container of a pod, and reports the earliest one\'s time', () => {
    const s = new MetricsStore(15_000);
    s.store(batch({ app: pt(0, 0), side: pt(0, 0) }));
    s.store(batch({ app: pt(2_000, 1), side: pt(1_500, 1) }));
    expect(s.podUsage('default', 'web')).toMatchObject({ timestampMs: 1_500, windowMs: 1_500 });
    s.store(batch({ app: pt(3_000, 2), side: pt(1_500, 1), extra: pt(3_000, 0) }));
    expect(s.podUsage('default', 'web')).toBeUndefined(); // "extra" has one point
  });
});
