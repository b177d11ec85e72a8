/**
 * GC entries by kind (perf_hooks), for the profiling aids (bench/profile/count-preload.ts,
 * bench/profile/heavy-bare-relay.ts): `observeGcByKind(record)` calls `record(kind, ms)` for each GC,
 * kind one of major, minor, incremental, weakcb (or the number V8 gave).
 */
import { PerformanceObserver, constants } from 'node:perf_hooks';

const KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

/** Observe every GC of this process: `record(kind, duration ms)`. */
export function observeGcByKind(record: (kind: string, ms: number) => void): void {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as unknown as { detail?: { kind?: number } }).detail?.kind ?? -1;
      record(KINDS[kind] ?? String(kind), e.duration);
    }
  }).observe({ entryTypes: ['gc'] });
}
