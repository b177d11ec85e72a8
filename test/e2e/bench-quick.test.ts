/**
 * The benchmark harness in quick mode (50 MB, one run per row, 200 requests): every row of every path
 * must produce a positive, finite rate. It checks the harness works, not the targets.
 */
import { describe, expect, it } from 'vitest';
import { PATHS, QUICK, runBenchmarks } from '../../bench/harness.js';
import { textTable } from '../../bench/report.js';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';

describe.skipIf(kubectlE2eSkipReason() !== undefined)('bench --quick', () => {
  it('produces a positive rate for every path and measurement', async () => {
    const rows = await runBenchmarks({ ...QUICK });
    console.log(textTable(rows));
    const expected = PATHS.flatMap((p) => p.measurements.map((m) => `${p.name} ${m}`));
    expect(rows.map((r) => `${r.path} ${r.measurement}`)).toEqual(expected);
    for (const r of rows) {
      const label = `${r.path} ${r.measurement}`;
      expect(r.wallMs, label).toHaveLength(QUICK.runs);
      expect(Number.isFinite(r.best) && r.best > 0, `${label}: best ${r.best}`).toBe(true);
      expect(Number.isFinite(r.median) && r.median > 0, `${label}: median ${r.median}`).toBe(true);
      expect(Number.isFinite(r.ratioToBaseline ?? NaN), `${label}: ratio`).toBe(true);
    }
  }, 180_000);
});
