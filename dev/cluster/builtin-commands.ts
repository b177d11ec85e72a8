/**
 * Dev-cluster-only built-in commands: an exec whose argv is exactly one of these reserved names runs
 * inside the dev cluster's own event loop instead of starting a local process. A real kubelet has
 * nothing like this; it exists so benchmarks can hold thousands of exec sessions open without
 * thousands of processes (see `npm run bench -- --idle`).
 *
 * - `kube-stream-proxy:idle` holds the session open without a process. It behaves like `cat`: stdin is
 *   echoed to stdout (with backpressure: stdin waits while stdout is full), and it exits 0 on stdin
 *   EOF (at once when the exec has no stdin it would wait forever: use it with stdin). It writes nothing to
 *   stderr and ignores resizes. When the session is aborted it "dies" of the signal (exit 128 + n).
 */
import { constants as osConstants } from 'node:os';
import { FanOut } from './fan-out.js';
import type { LocalProcess } from './local-process.js';

/** argv[0] of the idle built-in (the whole argv must be exactly this one word). */
export const IDLE_COMMAND = 'kube-stream-proxy:idle';

/** The reserved argv prefix of every built-in: a name no executable on PATH carries. */
const BUILTIN_PREFIX = 'kube-stream-proxy:';

/**
 * The built-in for `command`, started, or undefined when `command` is not a built-in (the runtime
 * then starts a real process). Throws for a reserved name that is not a known built-in or that was
 * given arguments, as a missing executable would.
 */
export function startBuiltinCommand(command: readonly string[], tty: boolean): LocalProcess | undefined {
  const name = command[0];
  if (name === undefined || !name.startsWith(BUILTIN_PREFIX)) return undefined;
  if (name !== IDLE_COMMAND) throw new Error(`exec: "${name}": no such dev cluster built-in (known: ${IDLE_COMMAND})`);
  if (command.length !== 1) throw new Error(`exec: "${name}" takes no arguments`);
  return idleProcess(tty);
}

/** `cat` without a process: stdin → stdout, exit 0 on stdin EOF. */
function idleProcess(tty: boolean): LocalProcess {
  let outputPaused = false;
  let drainWaiters: Array<() => void> = [];
  const stdout = new FanOut(
    () => (outputPaused = true),
    () => {
      outputPaused = false;
      const waiters = drainWaiters;
      drainWaiters = [];
      for (const cb of waiters) cb();
    },
  );
  const stderr = new FanOut(() => undefined, () => undefined);
  let done = false;
  let stdinEnded = false;
  let exit!: (code: number) => void;
  const exited = new Promise<number>((resolve) => (exit = resolve)).finally(() => (done = true));
  let finished = false;
  const finish = (code: number): void => {
    if (finished) return;
    finished = true;
    stdinEnded = true;
    const waiters = drainWaiters;
    drainWaiters = [];
    for (const cb of waiters) cb();
    exit(code);
  };
  return {
    pid: undefined,
    tty,
    stdout,
    stderr,
    get done() {
      return done;
    },
    exited,
    writeStdin(chunk) {
      if (stdinEnded) return true;
      stdout.write(chunk);
      return !outputPaused;
    },
    onStdinDrain(cb) {
      if (!outputPaused || finished) cb();
      else drainWaiters.push(cb);
    },
    endStdin() {
      // Everything written so far was handed to the targets synchronously, so exiting now loses nothing.
      finish(0);
    },
    resize() {
      // no terminal
    },
    kill(signal) {
      finish((128 + (osConstants.signals[signal] ?? 0)) & 0xff);
    },
  };
}
