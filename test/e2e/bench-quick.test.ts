/**
 * The benchmark harness in quick mode (50 MB, one run per row, 200 requests): every row of every path
 * must produce a positive, finite rate. It checks the harness works, not the targets. The nginx
 * passthrough rows run when nginx is installed (the test never installs it) and are skipped with a
 * printed note otherwise.
 */
import { describe, expect, it } from 'vitest';
import { NGINX_PASSTHROUGH, PATHS, QUICK, runBenchmarks } from '../../bench/harness.js';
import { findNginx } from '../../bench/nginx.js';
import { textTable } from '../../bench/report.js';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';

describe.skipIf(kubectlE2eSkipReason() !== undefined)('bench --quick', () => {
  it('produces a positive rate for every path and measurement', async () => {
    const nginx = findNginx() !== undefined;
    const rows = await runBenchmarks({ ...QUICK, install: false });
    console.log(textTable(rows));
    const expected = PATHS.filter((p) => nginx || p !== NGINX_PASSTHROUGH).flatMap((p) => p.measurements.map((m) => `${p.name} ${m}`));
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
