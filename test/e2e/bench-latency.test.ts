/**
 * The latency benchmarks in quick mode (200 round trips per session, 10 concurrent sessions, 50
 * handshakes): every row must have finite, positive percentiles in order. It checks the harness
 * works, not the targets.
 */
import { describe, expect, it } from 'vitest';
import { LATENCY_BATCHED, LATENCY_DIRECT, LATENCY_PATHS, LATENCY_QUICK, latencyTextTable, runLatencyBenchmarks } from '../../bench/latency.js';

describe('bench --latency --quick', () => {
  it('produces ordered, positive percentiles for every path and measurement', async () => {
    const started = Date.now();
    const rows = await runLatencyBenchmarks({ quick: true });
    console.log(latencyTextTable(rows));
    console.log(`latency quick mode took ${Date.now() - started} ms`);
    // Per path: one session, then handshakes; then the concurrent rows (measured interleaved).
    const expected = [
      ...LATENCY_PATHS.flatMap((p) => [`${p.name} echo 1`, `${p.name} handshake 1`, `${p.name} first-echo 1`]),
      ...LATENCY_PATHS.map((p) => `${p.name} echo ${LATENCY_QUICK.concurrency}`),
    ];
    expect(rows.map((r) => `${r.path} ${r.measurement} ${r.sessions}`)).toEqual(expected);
    for (const r of rows) {
      const label = `${r.path} ${r.measurement} x${r.sessions}`;
      const { p50, p99, p999 } = r.latency;
      for (const v of [p50, p99, p999]) expect(Number.isFinite(v) && v > 0, `${label}: ${v}`).toBe(true);
      expect(p50, label).toBeLessThanOrEqual(p99);
      expect(p99, label).toBeLessThanOrEqual(p999);
      const samples = r.measurement === 'echo' ? LATENCY_QUICK.roundTrips * r.sessions : LATENCY_QUICK.handshakes;
      expect(r.samples, label).toBe(samples);
      if (r.path === LATENCY_DIRECT.name) expect(r.added, label).toBeUndefined();
      else expect(Number.isFinite(r.added?.p99 ?? NaN), `${label}: added`).toBe(true);
      // The relay's CPU per round trip is measured on the concurrent rows of the relays only.
      if (r.sessions > 1 && r.path !== LATENCY_DIRECT.name) expect(r.relayCpuUsPerRoundTrip, label).toBeGreaterThan(0);
      else expect(r.relayCpuUsPerRoundTrip, label).toBeUndefined();
    }
  }, 120_000);

  it('interleaves rounds of the concurrent row, the old-batching proxies beside the new, with per-round p99s and their median', async () => {
    const paths = [LATENCY_DIRECT, LATENCY_PATHS[1]!, ...LATENCY_BATCHED];
    const rows = await runLatencyBenchmarks({ quick: true, paths, rounds: 2, roundTrips: 30, handshakes: 3 });
    const concurrent = rows.filter((r) => r.sessions === LATENCY_QUICK.concurrency);
    expect(concurrent.map((r) => r.path)).toEqual(paths.map((p) => p.name));
    for (const r of concurrent) {
      expect(r.rounds, r.path).toBe(2);
      expect(r.samples, r.path).toBe(2 * 30 * LATENCY_QUICK.concurrency);
      expect(r.p99ByRound, r.path).toHaveLength(2);
      // The lower middle of two rounds is the smaller one.
      expect(r.latency.p99, r.path).toBe(Math.min(...r.p99ByRound!));
    }
  }, 120_000);
});
