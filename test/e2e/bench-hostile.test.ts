/**
 * The hostile-load benchmarks in quick mode (bench/flood.ts: 2 sessions × 3 s of 8-byte frames and of
 * 32 KiB messages; bench/protocol-errors.ts: 20 sessions sending a frame announcing 2^63 bytes):
 * the echo comes back byte-exact, every session ends with Success and close 1000, every protocol
 * error gets its close 1009, and the figures are finite. It checks the harness works, not the
 * targets (those are `npm run bench -- --flood` / `--protocol-errors` figures). Needs dist/.
 */
import { describe, expect, it } from 'vitest';
import { FLOOD_QUICK, floodTextTable, runFloodBenchmarks } from '../../bench/flood.js';
import { PROTOCOL_ERRORS_QUICK, protocolErrorTextTable, runProtocolErrorBenchmark } from '../../bench/protocol-errors.js';

describe('bench --flood --quick, --protocol-errors --quick', () => {
  it('floods tiny frames and bulk messages with the echo byte-exact, and reports finite figures', async () => {
    const rows = await runFloodBenchmarks({ quick: true });
    console.log(floodTextTable(rows));
    expect(rows.map((r) => r.mode)).toEqual(['tiny', 'bulk']);
    for (const r of rows) {
      expect(r.failures, r.mode).toEqual([]);
      expect(r.echoOk, r.mode).toBe(true);
      expect(r.sessions).toBe(FLOOD_QUICK.sessions);
      expect(r.bytes, r.mode).toBeGreaterThan(0);
      expect(Number.isFinite(r.cpuSeconds) && Number.isFinite(r.peakRss - r.baselineRss), r.mode).toBe(true);
      expect(r.getMs.length, r.mode).toBeGreaterThan(0);
    }
  }, 120_000);

  it('answers every frame announcing 2^63 bytes with close 1009 and reports the descriptors', async () => {
    const [row] = await runProtocolErrorBenchmark({ quick: true, opts: { watchMs: 5_000 } });
    console.log(protocolErrorTextTable([row!]));
    expect(row!.closeCodes).toEqual({ '1009': PROTOCOL_ERRORS_QUICK.sessions });
    expect(row!.proxyFdsOpen).toBeGreaterThan(row!.proxyFdsBaseline);
  }, 120_000);
});
