/**
 * The benchmark report rendering (no cluster needed): table columns, MB/s arithmetic and the
 * machine / date / command-line header of docs/benchmarks.md.
 */
import { describe, expect, it } from 'vitest';
import { markdownReport, textTable } from '../../bench/report.js';
import { machineInfo } from '../../bench/machine.js';
import type { BenchRow } from '../../bench/harness.js';

const row: BenchRow = {
  client: 'kubectl 1.28',
  path: 'dev cluster (direct, SPDY)',
  direction: 'stdout',
  bytes: 500_000_000,
  wallMs: [2000, 2500, 1000],
  bestMBps: 500,
  medianMBps: 200,
  ratioToBaseline: 0.5,
};

describe('bench report', () => {
  it('renders a text table with one line per row', () => {
    const lines = textTable([row, { ...row, direction: 'stdin' }]).split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[2]).toMatch(/^kubectl 1\.28\s+dev cluster \(direct, SPDY\)\s+stdout\s+500\s+3\s+500\.0\s+200\.0\s+0\.50\s+2000, 2500, 1000$/);
  });

  it('writes machine, date and command line into the Markdown page', () => {
    const m = machineInfo();
    expect(m.nproc).toBeGreaterThan(0);
    expect(m.cpuModel.length).toBeGreaterThan(0);
    const md = markdownReport([row], m, 'node dist/bench/run.js --write', new Date('2026-01-02T03:04:05Z'));
    expect(md).toContain('`node dist/bench/run.js --write`');
    expect(md).toContain('2026-01-02T03:04:05.000Z');
    expect(md).toContain(`${m.nproc} CPUs (nproc), ${m.cpuModel}, Node ${process.version}`);
    expect(md).toContain('| kubectl 1.28 | dev cluster (direct, SPDY) | stdout | 500 | 3 | 500.0 | 200.0 | 0.50 | 2000, 2500, 1000 |');
  });
});
