/**
 * The session-recording bench rows (bench/recording-cpu.ts) at test size (5 MB of text per transfer,
 * after the bench's own 5 MB warm-up per row; one round): every row of both paths, tty and not,
 * recorded and not, measures a finite CPU per GB (the spliced passthrough may take less than a
 * clock tick) and receives every byte. 5 MB is five of the pod's 1 MB writes through every
 * recorder and copy loop, and the unrecorded translated rows (the ratio's base, ~5 CPU-s/GB: some
 * 25 ms for 5 MB) still take several clock ticks, so every ratio is a finite number. It checks the
 * harness works, not the targets (those are `npm run bench`'s, 300 MB; --quick 20 MB).
 */
import { describe, expect, it } from 'vitest';
import { recordingCpuTextTable, runRecordingCpu } from '../../bench/recording-cpu.js';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';

/** Test size (whole megabytes: the pod writes 1 MB blocks). */
const SIZE = { bytes: 5_000_000, rounds: 1 };

describe.skipIf(kubectlE2eSkipReason() !== undefined)('bench --recording --quick', () => {
  it('measures every row', async () => {
    const rows = await runRecordingCpu({ ...SIZE });
    console.log(recordingCpuTextTable(rows));
    expect(rows).toHaveLength(14);
    for (const path of ['passthrough', 'translation'] as const)
      for (const tty of [false, true]) expect(rows.filter((r) => r.path === path && r.tty === tty && r.recorded).length, `${path} tty=${tty}`).toBe(2);
    for (const r of rows) {
      const label = `${r.path} tty=${r.tty} ${r.variant}`;
      expect(r.bytes, label).toHaveLength(SIZE.rounds);
      expect(r.bytes[0]!, label).toBeGreaterThanOrEqual(SIZE.bytes);
      expect(Number.isFinite(r.cpuPerGB ?? NaN) && r.cpuPerGB! >= 0, `${label}: ${r.cpuPerGB}`).toBe(true);
      expect(Number.isFinite(r.ratioToTranslated ?? NaN), label).toBe(true);
    }
  }, 300_000);
});
