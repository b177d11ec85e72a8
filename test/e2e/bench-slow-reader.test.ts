/**
 * The slow-reader memory benchmark in quick mode (64 MiB of exec stdout, a 2 s stall after ~1 MiB):
 * every path must deliver exactly every byte after the stall, and report a finite RSS growth. It checks
 * the harness works, not the 16 MiB target.
 */
import { describe, expect, it } from 'vitest';
import { SLOW_READER_PATHS, SLOW_READER_QUICK, runSlowReaderBenchmarks, slowReaderTextTable } from '../../bench/slow-reader.js';

describe('bench --slow-reader --quick', () => {
  it('resumes every stalled stream intact and reports a finite RSS growth per path', async () => {
    const started = Date.now();
    const rows = await runSlowReaderBenchmarks({ quick: true });
    console.log(slowReaderTextTable(rows));
    console.log(`slow-reader quick mode took ${Date.now() - started} ms`);
    expect(rows.map((r) => r.path)).toEqual(SLOW_READER_PATHS.map((p) => p.name));
    for (const r of rows) {
      expect(r.bytes, r.path).toBe(SLOW_READER_QUICK.bytes);
      expect(r.received, r.path).toBe(SLOW_READER_QUICK.bytes);
      expect(r.bytesOk, r.path).toBe(true);
      expect(r.readBeforeStall, r.path).toBeGreaterThanOrEqual(SLOW_READER_QUICK.readFirst);
      expect(r.readBeforeStall, r.path).toBeLessThan(SLOW_READER_QUICK.bytes);
      expect(Number.isFinite(r.growth), `${r.path}: growth ${r.growth}`).toBe(true);
      expect(r.baselineRss, r.path).toBeGreaterThan(0);
      expect(r.peakRss, r.path).toBeGreaterThan(0);
      expect(r.samples, r.path).toBeGreaterThanOrEqual(SLOW_READER_QUICK.stallMs / SLOW_READER_QUICK.sampleMs / 2);
    }
  }, 90_000);
});
