/**
 * Summarise a V8 `.cpuprofile` (from `node --cpu-prof`, e.g. `npm run bench -- --cpu-prof DIR`):
 * the functions with the most self time, and self time per source file.
 *
 *   node dist/bench/cpuprofile-top.js FILE.cpuprofile [--top N] [--with-startup]
 *
 * Self time of a sample is its time delta (the profile's `timeDeltas`), attributed to the node it hit;
 * nodes are merged by function name, file and line. `(idle)` is time the thread waited in epoll.
 * By default the process's start-up (module loading, up to the first stretch of ≥ 100 ms idle, when
 * the server waits for its first client) is left out, so the figures are the transfer's.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
/** The parts of a V8 CPU profile this script reads. */
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTime {
  /** `name (file:line)`. */
  label: string;
  /** Source file (basename of the URL, or the pseudo-frame's name). */
  file: string;
  /** Self time, µs. */
  us: number;
}

function fileOf(cf: CallFrame): string {
  if (!cf.url) return cf.functionName.startsWith('(') ? cf.functionName : '(native)';
  return cf.url.startsWith('node:') ? cf.url : basename(cf.url.replace(/^file:\/\//, ''));
}

/** Index of the first sample after start-up: the end of the first ≥ `gapUs` stretch of idle samples (0 if none). */
export function startupEnd(p: CpuProfile, gapUs = 100_000): number {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  let idleRun = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const idle = byId.get(p.samples[i]!)?.callFrame.functionName === '(idle)';
    idleRun = idle ? idleRun + Math.max(0, p.timeDeltas[i] ?? 0) : 0;
    if (idleRun >= gapUs) {
      // Skip the rest of this idle stretch too.
      let j = i + 1;
      while (j < p.samples.length && byId.get(p.samples[j]!)?.callFrame.functionName === '(idle)') j++;
      return j;
    }
  }
  return 0;
}

/**
 * Self time per function (merged by name, file and line), largest first; and the total and idle time
 * of the samples from index `from` on, µs.
 */
export function selfTimes(p: CpuProfile, from = 0): { functions: SelfTime[]; files: SelfTime[]; totalUs: number; idleUs: number } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const fns = new Map<string, SelfTime>();
  const files = new Map<string, SelfTime>();
  let totalUs = 0;
  let idleUs = 0;
  for (let i = from; i < p.samples.length; i++) {
    const node = byId.get(p.samples[i]!);
    // V8 records each sample's delta from the previous one; the delta belongs to this sample's node.
    const us = Math.max(0, p.timeDeltas[i] ?? 0);
    if (!node) continue;
    totalUs += us;
    const cf = node.callFrame;
    if (cf.functionName === '(idle)') idleUs += us;
    const file = fileOf(cf);
    const label = `${cf.functionName || '(anonymous)'}${cf.url ? ` (${file}:${cf.lineNumber + 1})` : ''}`;
    const f = fns.get(label) ?? { label, file, us: 0 };
    f.us += us;
    fns.set(label, f);
    const g = files.get(file) ?? { label: file, file, us: 0 };
    g.us += us;
    files.set(file, g);
  }
  const desc = (a: SelfTime, b: SelfTime): number => b.us - a.us;
  return { functions: [...fns.values()].sort(desc), files: [...files.values()].sort(desc), totalUs, idleUs };
}

/** The text report: busy time, top functions and top files (percentages of busy = total − idle). */
export function profileReport(p: CpuProfile, top = 20, withStartup = false): string {
  const from = withStartup ? 0 : startupEnd(p);
  const skippedUs = p.timeDeltas.slice(0, from).reduce((a, b) => a + Math.max(0, b), 0);
  const { functions, files, totalUs, idleUs } = selfTimes(p, from);
  const busy = totalUs - idleUs;
  const row = (s: SelfTime): string => `${(s.us / 1000).toFixed(0).padStart(7)} ms  ${((100 * s.us) / busy).toFixed(1).padStart(5)} %  ${s.label}`;
  const notIdle = (s: SelfTime): boolean => s.label !== '(idle)';
  return [
    `profile: ${(totalUs / 1e6).toFixed(2)} s sampled, ${(idleUs / 1e6).toFixed(2)} s idle, ${(busy / 1e6).toFixed(2)} s busy (percentages of busy)` +
      (withStartup ? '' : `; ${(skippedUs / 1e6).toFixed(2)} s of start-up left out`),
    '',
    `top ${top} functions by self time:`,
    ...functions.filter(notIdle).slice(0, top).map(row),
    '',
    `top ${Math.min(top, 12)} files by self time:`,
    ...files.filter(notIdle).slice(0, Math.min(top, 12)).map(row),
  ].join('\n');
}

function main(): void {
  const { values, positionals } = parseArgs({
    options: { top: { type: 'string', default: '20' }, 'with-startup': { type: 'boolean', default: false } },
    allowPositionals: true,
  });
  if (positionals.length === 0) throw new Error('usage: node dist/bench/cpuprofile-top.js FILE.cpuprofile [--top N]');
  for (const file of positionals) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    console.log(`== ${file}\n${profileReport(profile, Number(values.top), values['with-startup'])}\n`);
  }
}

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) main();
