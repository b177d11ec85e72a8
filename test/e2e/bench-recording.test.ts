/**
 * The session-recording bench rows (bench/recording-cpu.ts) in quick mode (20 MB, one round): every
 * row of both paths, tty and not, recorded and not, measures a finite CPU per GB (the spliced passthrough may take less than a clock tick for 20 MB) and
 * receives every byte. It checks the harness works, not the targets (those are `npm run bench`'s).
 */
import { describe, expect, it } from 'vitest';
import { RECORDING_CPU_QUICK, recordingCpuTextTable, runRecordingCpu } from '../../bench/recording-cpu.js';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';

describe.skipIf(kubectlE2eSkipReason() !== undefined)('bench --recording --quick', () => {
  it('measures every row', async () => {
    const rows = await runRecordingCpu({ ...RECORDING_CPU_QUICK });
    console.log(recordingCpuTextTable(rows));
    expect(rows).toHaveLength(14);
    for (const path of ['passthrough', 'translation'] as const)
      for (const tty of [false, true]) expect(rows.filter((r) => r.path === path && r.tty === tty && r.recorded).length, `${path} tty=${tty}`).toBe(2);
    for (const r of rows) {
      const label = `${r.path} tty=${r.tty} ${r.variant}`;
      expect(r.bytes[0]!, label).toBeGreaterThanOrEqual(RECORDING_CPU_QUICK.bytes);
      expect(Number.isFinite(r.cpuPerGB ?? NaN) && r.cpuPerGB! >= 0, `${label}: ${r.cpuPerGB}`).toBe(true);
      expect(Number.isFinite(r.ratioToTranslated ?? NaN), label).toBe(true);
    }
  }, 300_000);
});
