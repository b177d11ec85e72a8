/**
 * The latency benchmarks (bench/latency.ts, what `npm run bench -- --latency --quick` runs) at test
 * size, one run shared by both tests: every path of the default set (direct, the passthrough, the
 * translation) and the old-batching proxies (`KSP_WRITE_FIRST=0`) beside them; 100 round trips per
 * session, 10 concurrent sessions, 10 handshakes, the concurrent row in 2 interleaved rounds.
 * Every row must have finite, positive percentiles in order and exactly its number of samples; the
 * concurrent rows carry each round's p99 and their median, and the relays' CPU per round trip (1,000
 * round trips a round through a relay take several clock ticks of its CPU). It checks the harness
 * works, not the targets (`--quick`: 200 round trips, 50 handshakes, 1 round; the full run 2,000,
 * 100 sessions, 200 handshakes, 3 rounds).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { LATENCY_BATCHED, LATENCY_DIRECT, LATENCY_PATHS, LATENCY_QUICK, latencyTextTable, runLatencyBenchmarks, type LatencyRow } from '../../bench/latency.js';

/** Test size (the rest, 10 concurrent sessions and 10 warm-up round trips, is the quick preset's). */
const SIZE = { roundTrips: 100, handshakes: 10, rounds: 2 };
const PATHS = [...LATENCY_PATHS, ...LATENCY_BATCHED];

describe('bench --latency --quick', () => {
  let rows: LatencyRow[];
  beforeAll(async () => {
    const started = Date.now();
    rows = await runLatencyBenchmarks({ quick: true, paths: PATHS, ...SIZE });
    console.log(latencyTextTable(rows));
    console.log(`latency at test size took ${Date.now() - started} ms`);
  }, 120_000);

  it('produces ordered, positive percentiles for every path and measurement', () => {
    // Per path: one session, then handshakes; then the concurrent rows (measured interleaved).
    const expected = [
      ...PATHS.flatMap((p) => [`${p.name} echo 1`, `${p.name} handshake 1`, `${p.name} first-echo 1`]),
      ...PATHS.map((p) => `${p.name} echo ${LATENCY_QUICK.concurrency}`),
    ];
    expect(rows.map((r) => `${r.path} ${r.measurement} ${r.sessions}`)).toEqual(expected);
    for (const r of rows) {
      const label = `${r.path} ${r.measurement} x${r.sessions}`;
      const { p50, p99, p999 } = r.latency;
      for (const v of [p50, p99, p999]) expect(Number.isFinite(v) && v > 0, `${label}: ${v}`).toBe(true);
      expect(p50, label).toBeLessThanOrEqual(p99);
      expect(p99, label).toBeLessThanOrEqual(p999);
      const samples = r.measurement !== 'echo' ? SIZE.handshakes : r.sessions === 1 ? SIZE.roundTrips : SIZE.rounds * SIZE.roundTrips * r.sessions;
      expect(r.samples, label).toBe(samples);
      if (r.path === LATENCY_DIRECT.name) expect(r.added, label).toBeUndefined();
      else expect(Number.isFinite(r.added?.p99 ?? NaN), `${label}: added`).toBe(true);
      // The relay's CPU per round trip is measured on the concurrent rows of the relays only.
      if (r.sessions > 1 && r.path !== LATENCY_DIRECT.name) expect(r.relayCpuUsPerRoundTrip, label).toBeGreaterThan(0);
      else expect(r.relayCpuUsPerRoundTrip, label).toBeUndefined();
    }
  });

  it('interleaves rounds of the concurrent row, the old-batching proxies beside the new, with per-round p99s and their median', () => {
    const concurrent = rows.filter((r) => r.sessions === LATENCY_QUICK.concurrency);
    expect(concurrent.map((r) => r.path)).toEqual(PATHS.map((p) => p.name));
    for (const r of concurrent) {
      expect(r.rounds, r.path).toBe(SIZE.rounds);
      expect(r.samples, r.path).toBe(SIZE.rounds * SIZE.roundTrips * LATENCY_QUICK.concurrency);
      expect(r.p99ByRound, r.path).toHaveLength(SIZE.rounds);
      // The lower middle of two rounds is the smaller one.
      expect(r.latency.p99, r.path).toBe(Math.min(...r.p99ByRound!));
    }
  });
});
