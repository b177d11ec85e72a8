/**
 * CPU time of a process tree from /proc: utime+stime of a process and of every live descendant, plus
 * the cutime+cstime each of them has collected from children it reaped (socat's forked relays), in
 * seconds. /proc/PID/stat sums all of a process's threads, so threads are counted once.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

let clockTicks: number | undefined;

/** Clock ticks per second of /proc's times (`getconf CLK_TCK`, 100 on Linux). */
export function clockTicksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** The fields of /proc/PID/stat this module reads. */
export interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime + cutime + cstime, in clock ticks. */
  ticks: number;
}

/** Parse one /proc/PID/stat line (the command name may hold spaces and parentheses). */
export function parseProcStat(line: string): ProcStat {
  const open = line.indexOf('(');
  const close = line.lastIndexOf(')');
  if (open < 0 || close < open) throw new Error(`not a /proc/PID/stat line: ${line.slice(0, 80)}`);
  const f = line.slice(close + 2).trim().split(/\s+/); // f[0] is field 3 (state)
  const n = (i: number): number => Number(f[i - 3]);
  return { pid: Number(line.slice(0, open).trim()), ppid: n(4), ticks: n(14) + n(15) + n(16) + n(17) };
}

function readStat(pid: number): ProcStat | undefined {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined; // gone
  }
}

/** A process and its live descendants at one moment. */
export interface TreeSample {
  /** Total CPU seconds (see the module comment). */
  seconds: number;
  /** The pids counted, root first. */
  pids: number[];
}

/** Sample the CPU time of `root` and its live descendants. */
export function sampleTreeCpu(root: number): TreeSample {
  const stats = new Map<number, ProcStat>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = readStat(Number(name));
    if (s) stats.set(s.pid, s);
  }
  // The root is read again after the scan: a child reaped while /proc was scanned (its stat read
  // before it went, or not at all) then has its time in the root's cutime instead, and a child that
  // is gone now is not counted on its own (below), so its time is counted exactly once.
  const rootStat = readStat(root) ?? stats.get(root);
  if (!rootStat) throw new Error(`process ${root} is gone`);
  const children = new Map<number, number[]>();
  for (const s of stats.values()) {
    const list = children.get(s.ppid);
    if (list) list.push(s.pid);
    else children.set(s.ppid, [s.pid]);
  }
  const pids: number[] = [];
  let ticks = 0;
  const todo = [root];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    const s = pid === root ? rootStat : stats.get(pid);
    if (!s || (pid !== root && !readStat(pid))) continue;
    pids.push(pid);
    ticks += s.ticks;
    todo.push(...(children.get(pid) ?? []));
  }
  return { seconds: ticks / clockTicksPerSecond(), pids };
}

/**
 * Wait (up to `timeoutMs`) until no descendant of `root` is alive that was not in `before`, so
 * that a per-connection child (socat's fork) has exited and been reaped into its parent's cutime.
 */
export async function settleTree(root: number, before: TreeSample, timeoutMs = 3_000): Promise<TreeSample> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = sampleTreeCpu(root);
    if (now.pids.every((p) => before.pids.includes(p)) || Date.now() > deadline) return now;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** utime+stime ticks of each thread of `pid` now, by thread id (`main` = the event-loop thread). */
export type ThreadSample = Map<string, { main: boolean; ticks: number }>;

/** Sample every thread of `pid` (threads that end while being read are skipped). */
export function sampleThreads(pid: number): ThreadSample {
  const out: ThreadSample = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const line = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = line.slice(line.lastIndexOf(')') + 2).split(' '); // f[0] is field 3 (state)
      // Every thread of node is named "node": tell the main (event-loop) thread from the rest (V8's
      // GC and compiler workers, libuv's pool) by id.
      out.set(tid, { main: tid === String(pid), ticks: Number(f[11]) + Number(f[12]) }); // fields 14, 15: utime, stime
    } catch {
      // the thread ended
    }
  }
  return out;
}

/**
 * CPU seconds of the main thread and of the other threads between two samples (threads that started
 * in between count from 0; one that ended in between is lost, as /proc no longer lists it).
 */
export function threadSecondsBetween(before: ThreadSample, after: ThreadSample): { main: number; other: number } {
  const hz = clockTicksPerSecond();
  const out = { main: 0, other: 0 };
  for (const [tid, a] of after) {
    const d = (a.ticks - (before.get(tid)?.ticks ?? 0)) / hz;
    if (a.main) out.main += d;
    else out.other += d;
  }
  return out;
}
