/**
 * The slow-reader memory benchmark (bench/slow-reader.ts) at test size: 32 MiB of exec stdout (--quick:
 * 64 MiB), the client stopping for 1 s (--quick: 2 s) after ~1 MiB: every path must deliver exactly
 * every byte after the stall, and report a finite RSS growth. The stall is the thing tested, and 1 s
 * is long enough: the windows and buffers on the way (SPDY's window, the proxy's high-water marks,
 * the loopback sockets) hold a few MiB, which the pod's `dd` fills in well under a second at the
 * tens of MB/s these paths move, and the 31 MiB left are far more than that, so the pod's writes
 * block during the stall and the resumed stream carries most of the bytes. It checks the harness
 * works, not the 16 MiB target.
 */
import { describe, expect, it } from 'vitest';
import { SLOW_READER_PATHS, SLOW_READER_QUICK, runSlowReaderBenchmarks, slowReaderTextTable } from '../../bench/slow-reader.js';

const MiB = 1024 * 1024;
/** Test size (readFirst and the sampling period are the quick preset's). */
const OPTS = { ...SLOW_READER_QUICK, bytes: 32 * MiB, stallMs: 1_000 };

describe('bench --slow-reader --quick', () => {
  it('resumes every stalled stream intact and reports a finite RSS growth per path', async () => {
    const started = Date.now();
    const rows = await runSlowReaderBenchmarks({ quick: true, opts: OPTS });
    console.log(slowReaderTextTable(rows));
    console.log(`slow-reader at test size took ${Date.now() - started} ms`);
    expect(rows.map((r) => r.path)).toEqual(SLOW_READER_PATHS.map((p) => p.name));
    for (const r of rows) {
      expect(r.bytes, r.path).toBe(OPTS.bytes);
      expect(r.stallMs, r.path).toBe(OPTS.stallMs);
      expect(r.received, r.path).toBe(OPTS.bytes);
      expect(r.bytesOk, r.path).toBe(true);
      expect(r.readBeforeStall, r.path).toBeGreaterThanOrEqual(OPTS.readFirst);
      expect(r.readBeforeStall, r.path).toBeLessThan(OPTS.bytes);
      expect(Number.isFinite(r.growth), `${r.path}: growth ${r.growth}`).toBe(true);
      expect(r.baselineRss, r.path).toBeGreaterThan(0);
      expect(r.peakRss, r.path).toBeGreaterThan(0);
      expect(r.samples, r.path).toBeGreaterThanOrEqual(OPTS.stallMs / OPTS.sampleMs / 2);
    }
  }, 90_000);
});
