/**
 * One local process of a pod (an exec'd command or a container's main process), behind the same
 * small interface whether it runs on pipes (child_process) or on a pseudo-terminal (node-pty).
 */
import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { loadPty, ptyMissingStatus } from './pty.js';
import type { TerminalSize } from '../../src/terminal-size.js';
import { FanOut } from './fan-out.js';
import { exitCodeOf, killGroup, podEnv, resolveExecutable, type LaunchTarget } from './process-launch.js';
import { spawnViaHelper } from './process-spawner.js';

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

/** How {@link spawnLocal} starts a process without a terminal. */
export interface SpawnOptions {
  /**
   * Fork from the dev cluster itself (true) instead of from the spawn helper (process-spawner.ts,
   * the default). Forking a big process is slow and makes it page-fault afterwards; only container
   * main processes use this, since they start with their pod and their pid is wanted at once.
   */
  direct?: boolean;
}

/**
 * Start `command` in the pod's working directory. Throws synchronously when the executable cannot
 * be found; `exited` rejects if the OS refuses to start it. Without a tty the process is started by
 * the spawn helper unless `options.direct`: `pid` is then undefined for the moment it takes to start.
 */
export function spawnLocal(
  command: string[],
  target: LaunchTarget,
  tty: boolean,
  size = DEFAULT_TERMINAL_SIZE,
  options: SpawnOptions = {},
): LocalProcess {
  if (command.length === 0) throw new Error('no command given');
  const env = podEnv(target, tty);
  const file = resolveExecutable(command[0]!, env);
  if (tty) return spawnPty(file, command, target, env, size);
  return options.direct ? spawnPipes(file, command, target, env) : spawnHelped(file, command, target, env);
}

/**
 * A process's stdin pipe: the writes of one event-loop turn (several DATA pieces of each socket
 * read) are corked and go to the pipe as one writev when the turn's I/O is done; writers are told to
 * wait above {@link STDIN_QUEUE_BYTES}; and until the pipe exists (a helper-started process) writes
 * are held here, under the same limit.
 */
class StdinPipe {
  #pipe: Writable | undefined;
  #attached = false;
  #held: Buffer[] = [];
  #heldBytes = 0;
  #ended = false;
  #corked = false;
  #waiters: (() => void)[] = [];
  #drainArmed = false;

  /** The pipe exists (undefined: the process is already gone, so input is dropped). */
  attach(pipe: Writable | undefined): void {
    this.#attached = true;
    this.#pipe = pipe;
    const held = this.#held;
    this.#held = [];
    this.#heldBytes = 0;
    if (pipe) {
      pipe.on('error', () => {
        // EPIPE when the process exits without reading its stdin: nothing to report
      });
      if (held.length > 0) {
        pipe.cork();
        for (const chunk of held) pipe.write(chunk);
        pipe.uncork();
      }
      if (this.#ended) pipe.end();
    }
    this.#wake();
  }

  /** The process is gone: nobody will read what waits. */
  close(): void {
    this.#attach0();
    this.#ended = true;
    this.#wake(true);
  }

  write(chunk: Buffer): boolean {
    if (this.#ended) return true;
    const pipe = this.#pipe;
    if (!this.#attached) {
      this.#held.push(chunk);
      this.#heldBytes += chunk.length;
      return this.#heldBytes < STDIN_QUEUE_BYTES;
    }
    if (!pipe || pipe.destroyed) return true;
    if (!this.#corked) {
      this.#corked = true;
      pipe.cork();
      setImmediate(() => {
        this.#corked = false;
        pipe.uncork();
      });
    }
    pipe.write(chunk);
    return pipe.writableLength < STDIN_QUEUE_BYTES;
  }

  onDrain(cb: () => void): void {
    this.#waiters.push(cb);
    this.#wake();
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#attached) this.#pipe?.end(); // flushes corked writes first
  }

  #attach0(): void {
    if (!this.#attached) this.attach(undefined);
  }

  /** Call the waiters if there is room (or `force`); otherwise once the pipe drained. */
  #wake(force = false): void {
    if (this.#waiters.length === 0) return;
    const pipe = this.#pipe;
    const room = !this.#attached
      ? this.#heldBytes < STDIN_QUEUE_BYTES
      : !pipe || pipe.destroyed || pipe.writableLength < STDIN_QUEUE_BYTES;
    if (!room && !force) {
      if (pipe && !this.#drainArmed) {
        // Above STDIN_QUEUE_BYTES a write has returned false, so 'drain' follows once it is flushed.
        this.#drainArmed = true;
        const once = (): void => {
          this.#drainArmed = false;
          pipe.off('drain', once);
          pipe.off('close', once);
          this.#wake(true);
        };
        pipe.on('drain', once);
        pipe.on('close', once);
      }
      return;
    }
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const cb of waiters) cb();
  }
}

/** Pieces of a pipe-based process both start paths share. */
interface PipedParts {
  readonly pid: number | undefined;
  stdin: StdinPipe;
  stdout: FanOut;
  stderr: FanOut;
  exited: Promise<number>;
  kill(signal: NodeJS.Signals): void;
}

function pipedProcess(parts: PipedParts): LocalProcess {
  let done = false;
  const exited = parts.exited.finally(() => {
    done = true;
    parts.stdin.close();
  });
  return {
    get pid() {
      return parts.pid;
    },
    tty: false,
    stdout: parts.stdout,
    stderr: parts.stderr,
    get done() {
      return done;
    },
    exited,
    writeStdin: (chunk) => parts.stdin.write(chunk),
    onStdinDrain: (cb) => parts.stdin.onDrain(cb),
    endStdin: () => parts.stdin.end(),
    resize() {
      // no terminal
    },
    kill(signal) {
      if (!done) parts.kill(signal);
    },
  };
}

/** Fork + exec from this process (container main processes only, see {@link SpawnOptions}). */
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
  const stdin = new StdinPipe();
  stdin.attach(child.stdin);
  const exited = new Promise<number>((resolve, reject) => {
    let spawned = false;
    child.once('spawn', () => (spawned = true));
    child.once('error', (err) => {
      if (!spawned) reject(err);
    });
    child.once('close', (code, signal) => {
      if (spawned) resolve(exitCodeOf(code, signal));
    });
  });
  return pipedProcess({ pid: child.pid, stdin, stdout, stderr, exited, kill: (signal) => killGroup(child.pid, signal) });
}

/**
 * Started by the spawn helper (process-spawner.ts): the same pipes, handed over once the process
 * runs. Input written before that is held (with backpressure), a kill before that is delivered then.
 */
function spawnHelped(file: string, command: string[], target: LaunchTarget, env: Record<string, string>): LocalProcess {
  const child = spawnViaHelper({ file, args: command.slice(1), argv0: command[0]!, cwd: target.workDir, env });
  let out: Socket | undefined;
  let err: Socket | undefined;
  const stdout = new FanOut(() => out?.pause(), () => out?.resume());
  const stderr = new FanOut(() => err?.pause(), () => err?.resume());
  const stdin = new StdinPipe();
  let pid: number | undefined;
  let pendingSignal: NodeJS.Signals | undefined;
  const ended = (s: Socket): Promise<void> => new Promise((r) => (s.destroyed ? r() : s.once('close', () => r())));
  const exited = child.started.then(async (pipes) => {
    pid = pipes.pid;
    out = pipes.stdout;
    err = pipes.stderr;
    out.on('data', (c: Buffer) => stdout.write(c));
    err.on('data', (c: Buffer) => stderr.write(c));
    out.on('error', () => undefined);
    err.on('error', () => undefined);
    stdin.attach(pipes.stdin);
    if (pendingSignal) killGroup(pipes.pid, pendingSignal);
    // As a ChildProcess's 'close': exited, and all output read.
    const [{ code, signal }] = await Promise.all([child.exit, ended(out), ended(err)]);
    pipes.stdin?.destroy();
    return exitCodeOf(code, signal);
  });
  const parts: PipedParts = {
    get pid() {
      return pid;
    },
    stdin,
    stdout,
    stderr,
    exited,
    kill(signal) {
      if (pid === undefined) pendingSignal = signal;
      else killGroup(pid, signal);
    },
  };
  return pipedProcess(parts);
}

function spawnPty(
  file: string,
  command: string[],
  target: LaunchTarget,
  env: Record<string, string>,
  size: TerminalSize,
): LocalProcess {
  // The process's own copy of the terminal on fd 3, closed only by the kernel when it has exited.
  // Without it, a program that closes stdin, stdout and stderr before exiting (GNU cat does, in
  // close_stdout) lets the master read EIO while it still runs; node-pty then closes the master,
  // and the hang-up kills the program with SIGHUP (exit 129 instead of 0, about one run in six
  // under load). A container runtime's shim holds the master until the process is gone, as here.
  const pty = loadPty();
  if (!pty) throw new Error(ptyMissingStatus().message);
  const term = pty.spawn('/bin/sh', ['-c', 'exec 3<&0; exec "$@"', 'sh', file, ...command.slice(1)], {
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
