/**
 * One local process of a pod (an exec'd command or a container's main process), behind the same
 * small interface whether it runs on pipes (child_process) or on a pseudo-terminal (node-pty).
 */
import { spawn } from 'node:child_process';
import * as pty from 'node-pty';
import type { TerminalSize } from '../terminal-size.js';
import { FanOut } from './fan-out.js';
import { exitCodeOf, killGroup, podEnv, resolveExecutable, type LaunchTarget } from './process-launch.js';

/** The default terminal size when the client sent none (as runc/containerd use). */
export const DEFAULT_TERMINAL_SIZE: TerminalSize = { width: 80, height: 24 };

/**
 * How many bytes may wait in a process's stdin pipe queue before writers are told to wait (more
 * than the pipe's own 16 KiB highWaterMark, so the writes of one event-loop turn can be batched).
 */
export const STDIN_QUEUE_BYTES = 256 * 1024;

/** A running local process. Output is broadcast through {@link FanOut}s with backpressure. */
export interface LocalProcess {
  readonly pid: number | undefined;
  /** True when it runs on a pty (then everything arrives on `stdout`). */
  readonly tty: boolean;
  /** Copies the process's stdout (or the pty output) to the added targets. */
  readonly stdout: FanOut;
  /** Copies the process's stderr (never used with a tty). */
  readonly stderr: FanOut;
  /** Write to the process's stdin; false means wait for {@link onStdinDrain}. Ignored after end. */
  writeStdin(chunk: Buffer): boolean;
  /** Call `cb` once when stdin can take more data. */
  onStdinDrain(cb: () => void): void;
  /** Close the process's stdin (EOF); with a tty, send ^D as a terminal would. */
  endStdin(): void;
  /** Apply a terminal size (no-op without a tty or with a zero dimension). */
  resize(size: TerminalSize): void;
  /** Signal the whole process group. */
  kill(signal: NodeJS.Signals): void;
  /** Resolves with the exit code (0..255) once it exited and all output was handed to the targets. */
  readonly exited: Promise<number>;
  /** True once `exited` settled. */
  readonly done: boolean;
}

/**
 * Start `command` in the pod's working directory. Throws synchronously when the executable cannot
 * be found; `exited` rejects if the OS refuses to start it.
 */
export function spawnLocal(command: string[], target: LaunchTarget, tty: boolean, size = DEFAULT_TERMINAL_SIZE): LocalProcess {
  if (command.length === 0) throw new Error('no command given');
  const env = podEnv(target, tty);
  const file = resolveExecutable(command[0]!, env);
  return tty ? spawnPty(file, command, target, env, size) : spawnPipes(file, command, target, env);
}

function spawnPipes(file: string, command: string[], target: LaunchTarget, env: Record<string, string>): LocalProcess {
  const child = spawn(file, command.slice(1), {
    cwd: target.workDir,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true, // own process group, so kill() reaches its children too
    argv0: command[0],
  });
  const stdout = new FanOut(() => child.stdout.pause(), () => child.stdout.resume());
  const stderr = new FanOut(() => child.stderr.pause(), () => child.stderr.resume());
  child.stdout.on('data', (c: Buffer) => stdout.write(c));
  child.stderr.on('data', (c: Buffer) => stderr.write(c));
  child.stdin.on('error', () => {
    // EPIPE when the process exits without reading its stdin: nothing to report
  });
  let stdinEnded = false;
  let done = false;
  // Stdin writes of one event-loop turn (several DATA pieces of each socket read) are corked and
  // go to the pipe as one writev when the turn's I/O is done, instead of one syscall per piece.
  let stdinCorked = false;
  const uncorkStdin = (): void => {
    stdinCorked = false;
    child.stdin.uncork();
  };
  const exited = new Promise<number>((resolve, reject) => {
    let spawned = false;
    child.once('spawn', () => (spawned = true));
    child.once('error', (err) => {
      if (!spawned) reject(err);
    });
    child.once('close', (code, signal) => {
      if (spawned) resolve(exitCodeOf(code, signal));
    });
  }).finally(() => (done = true));
  return {
    pid: child.pid,
    tty: false,
    stdout,
    stderr,
    get done() {
      return done;
    },
    exited,
    writeStdin(chunk) {
      if (stdinEnded || child.stdin.destroyed) return true;
      if (!stdinCorked) {
        stdinCorked = true;
        child.stdin.cork();
        setImmediate(uncorkStdin);
      }
      child.stdin.write(chunk);
      return child.stdin.writableLength < STDIN_QUEUE_BYTES;
    },
    onStdinDrain(cb) {
      // Above STDIN_QUEUE_BYTES a write has returned false, so 'drain' follows once it is flushed.
      if (child.stdin.destroyed || child.stdin.writableLength < STDIN_QUEUE_BYTES) cb();
      else {
        const once = (): void => {
          child.stdin.off('drain', once);
          child.stdin.off('close', once);
          cb();
        };
        child.stdin.on('drain', once);
        child.stdin.on('close', once);
      }
    },
    endStdin() {
      if (stdinEnded) return;
      stdinEnded = true;
      child.stdin.end(); // flushes corked writes first
    },
    resize() {
      // no terminal
    },
    kill(signal) {
      if (!done) killGroup(child.pid, signal);
    },
  };
}

function spawnPty(
  file: string,
  command: string[],
  target: LaunchTarget,
  env: Record<string, string>,
  size: TerminalSize,
): LocalProcess {
  const term = pty.spawn(file, command.slice(1), {
    name: env.TERM ?? 'xterm',
    cols: size.width || DEFAULT_TERMINAL_SIZE.width,
    rows: size.height || DEFAULT_TERMINAL_SIZE.height,
    cwd: target.workDir,
    env,
    encoding: null,
  });
  const stdout = new FanOut(() => term.pause(), () => term.resume());
  const stderr = new FanOut(() => undefined, () => undefined);
  (term.onData as unknown as (cb: (d: Buffer | string) => void) => void)((d) => {
    stdout.write(typeof d === 'string' ? Buffer.from(d) : d);
  });
  let done = false;
  let stdinEnded = false;
  const exited = new Promise<number>((resolve) => {
    // node-pty emits exit only after the pty's output was fully read.
    term.onExit(({ exitCode, signal }) => resolve(exitCodeOf(signal ? null : exitCode, signal ?? null)));
  }).finally(() => (done = true));
  return {
    pid: term.pid,
    tty: true,
    stdout,
    stderr,
    get done() {
      return done;
    },
    exited,
    writeStdin(chunk) {
      if (!done && !stdinEnded) term.write(chunk);
      return true;
    },
    onStdinDrain(cb) {
      cb();
    },
    endStdin() {
      if (stdinEnded || done) return;
      term.write('\x04'); // a terminal has no EOF of its own: ^D at the line discipline
      stdinEnded = true;
    },
    resize(s) {
      if (done || s.width < 1 || s.height < 1) return;
      try {
        term.resize(s.width, s.height);
      } catch {
        // the pty is already closed
      }
    },
    kill(signal) {
      if (!done) killGroup(term.pid, signal);
    },
  };
}
