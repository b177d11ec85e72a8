/**
 * The heap floor on a Node without `process.execve` (Node 20; src/heap-floor.ts): the CLI's first
 * process starts the command again as ONE child process with the flag and acts for it, so the pair
 * looks like one process from outside (docs/decisions.md, "The heap floor").
 *
 * The parent ({@link runHeapFloorParent}) loads nothing of the proxy (this module and
 * src/heap-floor.ts only):
 * - stdio is inherited (the child writes to the same descriptors);
 * - SIGTERM, SIGINT and SIGHUP are passed on to the child;
 * - the child is the leader of a process group (and session) of its own, so a signal a terminal or
 *   a `kill -- -PGID` sends to the parent's group reaches the child once, through the parent, not
 *   twice (the second would be the CLI's "again, exiting without waiting");
 * - the child's exit code becomes the parent's; a child killed by a signal kills the parent with the
 *   same signal, or, for the signals Node does not die of and those that dump core (no core file of
 *   the wrong process), the parent exits 128 + the signal's number, as a shell reports it.
 *
 * The child ({@link watchHeapFloorParent}) holds one end of a pipe (descriptor 3) whose other end
 * only the parent has: when the parent dies without passing anything on (SIGKILL), the child reads
 * end-of-file and kills itself with SIGKILL too, so the two live and die as one.
 */
import { spawn } from 'node:child_process';
import { Socket } from 'node:net';
import { constants } from 'node:os';
import type { HeapFloorRelaunch } from './heap-floor.js';

/** The signals the parent passes on: what orchestrators, terminals and `kill` send to stop a server. */
export const FORWARDED_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

/** The child's descriptor of the pipe to its parent. */
export const PARENT_PIPE_FD = 3;

/**
 * Signals a child died of that the parent does not re-raise but turns into exit status 128 + N:
 * Node does not die of SIGUSR1 (its inspector) or SIGPIPE (ignored), and the ones whose default
 * action dumps core would leave a core file of the parent, which has nothing to show.
 */
const EXIT_INSTEAD = new Set<string>(['SIGUSR1', 'SIGPIPE', 'SIGQUIT', 'SIGILL', 'SIGTRAP', 'SIGABRT', 'SIGBUS', 'SIGFPE', 'SIGSEGV', 'SIGXCPU', 'SIGXFSZ', 'SIGSYS']);

/** How long the parent waits to die of a re-raised signal before it exits 128 + N instead. */
const RERAISE_FALLBACK_MS = 1_000;

/** Start `plan` as the one child and run for it until it ends; the process then ends as it did. */
export function runHeapFloorParent(plan: HeapFloorRelaunch): void {
  const child = spawn(plan.file, plan.args.slice(1), {
    argv0: plan.args[0],
    env: plan.env,
    // 0-2 inherited; 3: the pipe that tells the child when its parent is gone.
    stdio: ['inherit', 'inherit', 'inherit', 'pipe'],
    detached: true,
  });
  const forward = (signal: NodeJS.Signals): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  for (const signal of FORWARDED_SIGNALS) process.on(signal, forward);
  child.stdio[PARENT_PIPE_FD]?.on('error', () => {});
  child.on('error', (err) => {
    process.stderr.write(`kube-stream-proxy: ${child.pid === undefined ? 'could not start the process with the heap floor' : 'the process with the heap floor'}: ${err.message}\n`);
    if (child.pid === undefined) process.exit(1);
  });
  child.once('exit', (code, signal) => {
    if (code !== null) process.exit(code);
    exitAsKilledBy(signal ?? 'SIGKILL');
  });
}

/** End this process as one killed by `signal`: re-raise it, or exit 128 + its number. */
function exitAsKilledBy(signal: NodeJS.Signals): void {
  const status = 128 + (constants.signals[signal] ?? 0);
  if (EXIT_INSTEAD.has(signal)) process.exit(status);
  process.removeAllListeners(signal);
  process.kill(process.pid, signal);
  // The signal may be delivered to another thread a moment later; if it did not end the process, exit.
  setTimeout(() => process.exit(status), RERAISE_FALLBACK_MS);
}

/**
 * In the child: watch the pipe from the parent (descriptor 3); end-of-file (the parent is gone, having
 * passed on no signal) kills this process with SIGKILL, as the parent was. Does not keep the event
 * loop alive.
 */
export function watchHeapFloorParent(): void {
  const pipe = new Socket({ fd: PARENT_PIPE_FD, readable: true, writable: false });
  pipe.on('error', () => {});
  pipe.once('close', () => process.kill(process.pid, 'SIGKILL'));
  pipe.resume();
  pipe.unref();
}
