/**
 * The benchmark harness in quick mode (50 MB, one run per row): every row must produce a positive,
 * finite throughput. Needs kubectl 1.28 → dev cluster over SPDY.
 */
import { describe, expect, it } from 'vitest';
import { QUICK, runBenchmarks } from '../../bench/harness.js';
import { textTable } from '../../bench/report.js';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';

describe.skipIf(kubectlE2eSkipReason() !== undefined)('bench --quick', () => {
  it('produces a positive MB/s for every row', async () => {
    const rows = await runBenchmarks({ ...QUICK });
    console.log(textTable(rows));
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      const label = `${r.client} → ${r.path} ${r.direction}`;
      expect(r.wallMs, label).toHaveLength(QUICK.runs);
      expect(Number.isFinite(r.bestMBps) && r.bestMBps > 0, `${label}: best ${r.bestMBps}`).toBe(true);
      expect(Number.isFinite(r.medianMBps) && r.medianMBps > 0, `${label}: median ${r.medianMBps}`).toBe(true);
    }
    expect(new Set(rows.map((r) => r.direction))).toEqual(new Set(['stdout', 'stdin']));
  });
});
