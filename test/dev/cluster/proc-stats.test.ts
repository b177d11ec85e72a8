import { describe, expect, it } from 'vitest';
import {
  parseMachineCpu,
  parseMachineMemory,
  parseProcessStat,
  parseStatusRss,
  readAllProcessStats,
  readProcessRss,
} from '../../../dev/cluster/proc-stats.js';

// A real /proc/<pid>/stat line whose comm holds spaces and parentheses.
const STAT = '4242 (my (odd) cmd) S 4200 4242 4242 34817 4242 4194304 120 0 0 0 75 25 3 2 20 0 1 0 987654 8560640 400 18446744073709551615 1 1 0 0 0 0 0 0 65536 0 0 0 17 1 0 0 0 0 0';

describe('parseProcessStat', () => {
  it('counts fields from the last parenthesis', () => {
    expect(parseProcessStat(STAT)).toEqual({
      pid: 4242,
      ppid: 4200,
      pgrp: 4242,
      state: 'S',
      ownTicks: 100,
      childTicks: 5,
      startTicks: 987654,
    });
  });
  it.each([
    ['empty', ''],
    ['no parentheses', '1 bash S 0 1'],
    ['truncated', '1 (bash) S 0 1 1'],
    ['non-numeric field', STAT.replace(' 75 ', ' x ')],
  ])('rejects %s', (_name, text) => {
    expect(parseProcessStat(text)).toBeUndefined();
  });
});

describe('parseStatusRss', () => {
  it('reads VmRSS in bytes', () => {
    expect(parseStatusRss('Name:\tsh\nVmPeak:\t    2000 kB\nVmRSS:\t    1560 kB\nRssAnon:\t 100 kB\n')).toBe(1560 * 1024);
  });
  it('is 0 for a zombie (no VmRSS line)', () => {
    expect(parseStatusRss('Name:\tsh\nState:\tZ (zombie)\n')).toBe(0);
  });
});

describe('machine figures', () => {
  it('adds the busy columns of the cpu line (not idle, not iowait)', () => {
    const text = 'cpu  100 5 50 9000 30 7 3 2 11 0\ncpu0 50 2 25 4500 15 3 1 1 5 0\nintr 1\n';
    expect(parseMachineCpu(text)).toEqual({ busyTicks: 100 + 5 + 50 + 7 + 3 + 2 });
  });
  it('rejects a /proc/stat without the cpu line', () => {
    expect(parseMachineCpu('intr 1\n')).toBeUndefined();
  });
  it('uses MemTotal - MemAvailable', () => {
    expect(parseMachineMemory('MemTotal:  8000 kB\nMemFree:  1000 kB\nMemAvailable:  3000 kB\n')).toBe(5000 * 1024);
    expect(parseMachineMemory('MemTotal:  8000 kB\n')).toBeUndefined();
  });
});

describe('readers on this machine', () => {
  it('find this process with its parent and a resident size', async () => {
    const stats = await readAllProcessStats();
    const me = stats.get(process.pid);
    expect(me?.ppid).toBe(process.ppid);
    expect(me!.ownTicks).toBeGreaterThan(0);
    expect(await readProcessRss(process.pid)).toBeGreaterThan(1024 * 1024);
  });
  it('answer 0 / nothing for a missing process or /proc', async () => {
    expect(await readProcessRss(2 ** 30)).toBe(0);
    expect((await readAllProcessStats('/nonexistent')).size).toBe(0);
  });
});
