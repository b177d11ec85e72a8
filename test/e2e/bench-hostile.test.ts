/**
 * The hostile-load benchmarks in quick mode (bench/flood.ts: 2 sessions flooding 8-byte frames, then
 * 32 KiB messages, for a 1 s window instead of --quick's 3 s; bench/protocol-errors.ts: 20 sessions
 * sending a frame announcing 2^63 bytes): the echo comes back byte-exact, every session ends with
 * Success and close 1000, plain GETs are answered during the flood, every protocol error gets its
 * close 1009, and the figures are finite. A 1 s flood is still millions of tiny frames and many MB
 * of messages, every one of them echoed and checked, and at least one GET goes through the proxy
 * while it runs (the probe loop starts with one). It checks the harness works, not the targets
 * (those are `npm run bench -- --flood` / `--protocol-errors` figures: 4 sessions, 30 s; 200
 * sessions). Needs dist/.
 */
import { describe, expect, it } from 'vitest';
import { FLOOD_QUICK, floodTextTable, runFloodBenchmarks } from '../../bench/flood.js';
import { PROTOCOL_ERRORS_QUICK, protocolErrorTextTable, runProtocolErrorBenchmark } from '../../bench/protocol-errors.js';

/**
 * The flood window (the flood is what is tested): 1 s already sends, echoes and checks millions of
 * tiny frames and many MB of messages beside the GET probes; longer windows only steady the figures.
 */
const FLOOD_WINDOW_MS = 1_000;

describe('bench --flood --quick, --protocol-errors --quick', () => {
  it('floods tiny frames and bulk messages with the echo byte-exact, and reports finite figures', async () => {
    const rows = await runFloodBenchmarks({ quick: true, opts: { windowMs: FLOOD_WINDOW_MS } });
    console.log(floodTextTable(rows));
    expect(rows.map((r) => r.mode)).toEqual(['tiny', 'bulk']);
    for (const r of rows) {
      expect(r.failures, r.mode).toEqual([]);
      expect(r.echoOk, r.mode).toBe(true);
      expect(r.sessions).toBe(FLOOD_QUICK.sessions);
      expect(r.windowMs, r.mode).toBe(FLOOD_WINDOW_MS);
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
