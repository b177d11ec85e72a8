/**
 * The benchmark report rendering (no cluster needed): table columns, rate arithmetic and the
 * machine / date / command-line header of docs/benchmarks.md.
 */
import { describe, expect, it } from 'vitest';
import { markdownReport, textTable } from '../../bench/report.js';
import { machineInfo } from '../../bench/machine.js';
import type { BenchRow } from '../../bench/harness.js';

const row: BenchRow = {
  client: 'kubectl 1.33',
  path: 'direct (dev cluster, SPDY)',
  measurement: 'stdout',
  unit: 'MB/s',
  amount: 500_000_000,
  wallMs: [2000, 2500, 1000],
  best: 500,
  median: 200,
  ratioToBaseline: 1,
};

describe('bench report', () => {
  it('renders a text table with one line per row', () => {
    const lines = textTable([row, { ...row, measurement: 'pf-requests', unit: 'req/s', amount: 2000 }]).split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[2]).toMatch(/^kubectl 1\.33\s+direct \(dev cluster, SPDY\)\s+stdout\s+500 MB\s+3\s+500\.0\s+200\.0\s+MB\/s\s+1\.00\s+2000, 2500, 1000$/);
    expect(lines[3]).toMatch(/pf-requests\s+2000 req\s+3\s+500\.0\s+200\.0\s+req\/s/);
  });

  it('writes machine, date and command line into the Markdown page', () => {
    const m = machineInfo();
    expect(m.nproc).toBeGreaterThan(0);
    expect(m.cpuModel.length).toBeGreaterThan(0);
    const md = markdownReport([row], m, 'node dist/bench/run.js --write', new Date('2026-01-02T03:04:05Z'));
    expect(md).toContain('`node dist/bench/run.js --write`');
    expect(md).toContain('2026-01-02T03:04:05.000Z');
    expect(md).toContain(`${m.nproc} CPUs (nproc), ${m.cpuModel}, Node ${process.version}`);
    expect(md).toContain('| kubectl 1.33 | direct (dev cluster, SPDY) | stdout | 500 MB | 3 | 500.0 | 200.0 | MB/s | 1.00 | 2000, 2500, 1000 |');
  });
});
