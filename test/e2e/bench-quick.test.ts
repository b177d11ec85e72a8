/**
 * The benchmark harness (runBenchmarks, what `npm run bench -- --quick` runs) at test size: 4 MB per
 * transfer, one run per row, 50 keep-alive requests: every row of every path must produce a
 * positive, finite rate. 4 MB is still four of the pod's 1 MB `dd` writes, each relayed in many
 * frames and socket reads, and the port-forward rows run their download and request loops end to
 * end; the rates themselves are `npm run bench` figures (500 MB, 3 runs; --quick 50 MB). It checks
 * the harness works, not the targets. The nginx passthrough rows run when nginx is
 * installed (the test never installs it) and are skipped with a printed note otherwise.
 */
import { describe, expect, it } from 'vitest';
import { NGINX_PASSTHROUGH, PATHS, runBenchmarks } from '../../bench/harness.js';
import { findNginx } from '../../bench/nginx.js';
import { textTable } from '../../bench/report.js';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';

/** Test size (the harness needs whole megabytes: the pod writes 1 MB blocks). */
const SIZE = { bytes: 4_000_000, runs: 1, requests: 50 };

describe.skipIf(kubectlE2eSkipReason() !== undefined)('bench --quick', () => {
  it('produces a positive rate for every path and measurement', async () => {
    const nginx = findNginx() !== undefined;
    const rows = await runBenchmarks({ ...SIZE, install: false });
    console.log(textTable(rows));
    const expected = PATHS.filter((p) => nginx || p !== NGINX_PASSTHROUGH).flatMap((p) => p.measurements.map((m) => `${p.name} ${m}`));
    expect(rows.map((r) => `${r.path} ${r.measurement}`)).toEqual(expected);
    for (const r of rows) {
      const label = `${r.path} ${r.measurement}`;
      expect(r.amount, label).toBe(r.measurement === 'pf-requests' ? SIZE.requests : SIZE.bytes);
      expect(r.wallMs, label).toHaveLength(SIZE.runs);
      expect(Number.isFinite(r.best) && r.best > 0, `${label}: best ${r.best}`).toBe(true);
      expect(Number.isFinite(r.median) && r.median > 0, `${label}: median ${r.median}`).toBe(true);
      expect(Number.isFinite(r.ratioToBaseline ?? NaN), `${label}: ratio`).toBe(true);
    }
  }, 180_000);
});
