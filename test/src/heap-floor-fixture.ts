/**
 * The built CLI (`bin/kube-stream-proxy.js`, needs `npm run build`) as a child process of a heap floor
 * test, and the /proc readings those tests make: a process's command line and its children, and
 * "the process that relays" — the started process itself where the CLI re-executes in place
 * (`process.execve`, Node ≥ 22.15), its one child on Node 20 (src/heap-floor-child.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');
export const CLI = join(ROOT, 'bin/kube-stream-proxy.js');

/** Whether this Node re-executes in place (else the CLI starts one child process with the floor). */
export const canExecve = typeof (process as { execve?: unknown }).execve === 'function';

/** `serve` in front of nothing (nothing is ever dialled), on a free loopback port. */
export const SERVE_ARGS = ['serve', '--listen', '127.0.0.1:0', '--upstream', 'http://127.0.0.1:1'];

/** A started CLI process. */
export interface CliProcess {
  child: ChildProcess;
  /** Everything it (and its child) printed, stdout and stderr. */
  output(): string;
  /** Its end: exit code, or the signal it died of. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The first match of `re` in the output; rejects when it exits first or after `timeoutMs`. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** If it still runs: SIGTERM, SIGKILL after 10 s; waits for the exit. */
  stop(): Promise<void>;
}

/** Start `node NODE_ARGS bin/kube-stream-proxy.js ARGS` with `env` added to the test's environment. */
export function startCli(args: readonly string[], o: { env?: Record<string, string>; nodeArgs?: string[]; detached?: boolean; cwd?: string } = {}): CliProcess {
  const child = spawn(process.execPath, [...(o.nodeArgs ?? []), CLI, ...args], {
    env: { ...process.env, ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(o.detached ? { detached: true } : {}),
    ...(o.cwd ? { cwd: o.cwd } : {}),
  });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (c: Buffer): void => {
    out += c.toString('utf8');
    listeners.forEach((l) => l());
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  let ended = false;
  void exited.then(() => (ended = true));
  return {
    child,
    output: () => out,
    exited,
    waitFor: (re, timeoutMs = 30_000) =>
      new Promise((resolveMatch, reject) => {
        const timer = setTimeout(() => done(new Error(`no ${re} within ${timeoutMs} ms:\n${out}`)), timeoutMs);
        const check = (): void => {
          const m = re.exec(out);
          if (m) done(undefined, m);
        };
        function done(err?: Error, m?: RegExpExecArray): void {
          clearTimeout(timer);
          listeners.delete(check);
          if (err) reject(err);
          else resolveMatch(m!);
        }
        listeners.add(check);
        void exited.then(({ code, signal }) => done(new Error(`exited (code ${code}, signal ${signal}) before ${re}:\n${out}`)));
        check();
      }),
    stop: async () => {
      if (!ended) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

/** A process's command line from /proc (its argv). */
export function cmdline(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a.length > 0);
}

/** The live children of `pid` (/proc/PID/task/TID/children of each thread). */
export function childPids(pid: number): number[] {
  const pids: number[] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      pids.push(...readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number));
    } catch {
      // the thread ended
    }
  }
  return pids;
}

/** Whether `pid` is still there (and not a zombie). */
export function isRunning(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Poll `condition` every 20 ms until it holds; throws `what` after `timeoutMs`. */
export async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The process that relays for `p`, once it is up (call after its ready line): `p` itself where the
 * CLI re-executes in place, or given no floor or its own flag; else its one child.
 */
export function relayingPid(p: CliProcess, floorFromCli: boolean): number {
  const children = childPids(p.child.pid!);
  if (canExecve || !floorFromCli) {
    if (children.length !== 0) throw new Error(`expected no child of ${p.child.pid}, found ${children.join(', ')}`);
    return p.child.pid!;
  }
  if (children.length !== 1) throw new Error(`expected one child of ${p.child.pid}, found [${children.join(', ')}]`);
  return children[0]!;
}

/** The `heap floor` start log line (JSON) from the output. */
export async function heapFloorLine(p: CliProcess): Promise<{ heapFloorMb: number; via: string; pid?: number }> {
  const m = await p.waitFor(/^\{.*"msg":"heap floor".*\}$/m);
  return JSON.parse(m[0]) as { heapFloorMb: number; via: string; pid?: number };
}

/** The value of `kube_stream_proxy_heap_floor_bytes` on `url`/metrics. */
export async function heapFloorMetric(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = /^kube_stream_proxy_heap_floor_bytes (\S+)$/m.exec(text);
  if (!m) throw new Error(`no kube_stream_proxy_heap_floor_bytes in /metrics:\n${text.slice(0, 500)}`);
  return Number(m[1]);
}
