/**
 * The latency benchmarks in quick mode (200 round trips per session, 10 concurrent sessions, 50
 * handshakes): every row must have finite, positive percentiles in order. It checks the harness
 * works, not the targets.
 */
import { describe, expect, it } from 'vitest';
import { LATENCY_DIRECT, LATENCY_PATHS, LATENCY_QUICK, latencyTextTable, runLatencyBenchmarks } from '../../bench/latency.js';

describe('bench --latency --quick', () => {
  it('produces ordered, positive percentiles for every path and measurement', async () => {
    const started = Date.now();
    const rows = await runLatencyBenchmarks({ quick: true });
    console.log(latencyTextTable(rows));
    console.log(`latency quick mode took ${Date.now() - started} ms`);
    const expected = LATENCY_PATHS.flatMap((p) => [`${p.name} echo 1`, `${p.name} echo ${LATENCY_QUICK.concurrency}`, `${p.name} handshake 1`, `${p.name} first-echo 1`]);
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
    }
  }, 60_000);
});
