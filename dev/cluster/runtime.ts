/**
 * The dev cluster's container runtime for remote commands: what a CRI runtime does behind the
 * kubelet's exec and attach. The protocol layers (WebSocket here, SPDY in `spdy-*.ts`) turn
 * client streams into {@link RemoteCommandStreams} and the outcome into a Status.
 */
import type { EventEmitter } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import type { TerminalSize } from '../../src/terminal-size.js';
import { startBuiltinCommand } from './builtin-commands.js';
import type { ContainerProcess } from './container-process.js';
import { DEFAULT_TERMINAL_SIZE, spawnLocal, type LocalProcess } from './local-process.js';
import type { Pod } from './pod.js';
import { KILL_GRACE_MS } from './process-launch.js';

/** The streams of one exec or attach session, as the protocol layer offers them. */
export interface RemoteCommandStreams {
  /** Client bytes; 'end' means the client half-closed stdin. */
  stdin?: Readable;
  /** Never ended by the runtime. */
  stdout?: Writable;
  /** Never ended by the runtime (absent when tty). */
  stderr?: Writable;
  tty: boolean;
  /** Emits 'resize' (size: TerminalSize). */
  resize?: EventEmitter;
}

/** Which process to run or attach to. */
export interface RemoteCommandRequest {
  pod: Pod;
  container: string;
  /** argv (exec); ignored by attach. */
  command: string[];
}

/** How long a tty exec waits for the client's first resize before starting at 80x24. */
export const FIRST_RESIZE_WAIT_MS = 250;

/**
 * Runs `command` in the pod; resolves once the process exited AND all its output was written into
 * stdout/stderr (backpressure is honoured: the process is paused while a stream is full). exitCode
 * is 0..255. Rejects with an Error if the process cannot start (e.g. executable not found); the
 * protocol layer turns that into an InternalError Status. `signal` aborts: the process group gets
 * SIGTERM, then SIGKILL after a grace period, and the promise settles once it is gone.
 */
export async function runExec(
  req: RemoteCommandRequest,
  streams: RemoteCommandStreams,
  signal: AbortSignal,
): Promise<{ exitCode: number }> {
  const { pod } = req;
  if (signal.aborted) throw abortError(signal);
  if (pod.deleted) throw new Error(`pod "${pod.name}" is being deleted`);
  if (!pod.container(req.container)) throw new Error(`container "${req.container}" not found in pod "${pod.name}"`);
  const size = streams.tty ? await firstResize(streams.resize, signal) : DEFAULT_TERMINAL_SIZE;
  if (signal.aborted) throw abortError(signal);

  // Dev-cluster-only built-ins (builtin-commands.ts) run without a process.
  let proc: LocalProcess;
  try {
    proc =
      startBuiltinCommand(req.command, streams.tty) ??
      spawnLocal(req.command, { podName: pod.name, workDir: pod.workDir }, streams.tty, size);
  } catch (err) {
    pod.emit('exec-failed', req.container, req.command, (err as Error).message);
    throw err;
  }
  const session = new AbortController();
  pod.sessions.add(session);
  const exec = { container: req.container, process: proc };
  pod.execs.add(exec);
  const both = AbortSignal.any([signal, session.signal]);

  if (streams.stdout) proc.stdout.add(streams.stdout);
  if (streams.stderr && !proc.tty) proc.stderr.add(streams.stderr);
  const onResize = (s: TerminalSize): void => proc.resize(s);
  streams.resize?.on('resize', onResize);
  const unpipeStdin = streams.stdin
    ? pipeStdin(streams.stdin, {
        write: (c) => proc.writeStdin(c),
        onDrain: (cb) => proc.onStdinDrain(cb),
        end: () => proc.endStdin(),
      })
    : (proc.endStdin(), () => undefined);
  const stopKill = killOnAbort(proc, both);
  try {
    return { exitCode: await proc.exited };
  } finally {
    stopKill();
    unpipeStdin();
    streams.resize?.off('resize', onResize);
    if (streams.stdout) proc.stdout.remove(streams.stdout);
    if (streams.stderr) proc.stderr.remove(streams.stderr);
    pod.sessions.delete(session);
    pod.execs.delete(exec);
  }
}

/**
 * Attach to the container's main process: its stdout/stderr from now on are copied to this attacher
 * (broadcast to all attachers), attacher stdin is written to the main process's stdin (an attacher's
 * stdin 'end' does NOT close the main stdin unless the container has stdinOnce). Resolves
 * { exitCode } when the main process exits (it is then restarted, restartCount++), or with
 * exitCode 0 when `signal` aborts (the main process keeps running). Arriving while the main process
 * is being restarted, it attaches to the restarted one; it rejects (the protocol layer answers with
 * an error Status) when there is none to attach to, never waiting on a process that is gone.
 */
export async function runAttach(
  req: RemoteCommandRequest,
  streams: RemoteCommandStreams,
  signal: AbortSignal,
): Promise<{ exitCode: number }> {
  const { pod } = req;
  if (signal.aborted) throw abortError(signal);
  const main: ContainerProcess | undefined = pod.mains.get(req.container);
  const spec = pod.container(req.container);
  if (!main || !spec) throw new Error(`container "${req.container}" not found in pod "${pod.name}"`);
  if (pod.deleted) throw new Error(`pod "${pod.name}" is being deleted`);

  // Between an exit and the restart this waits for the restarted process (or rejects: stopped,
  // could not start); stdin is not read until then, so what the client sent goes to that process.
  const attachment = await main.attach({ stdout: streams.stdout, stderr: streams.stderr }, signal);
  const onResize = (s: TerminalSize): void => main.resize(s);
  streams.resize?.on('resize', onResize);
  const unpipeStdin = streams.stdin
    ? pipeStdin(streams.stdin, {
        write: (c) => main.writeStdin(c),
        onDrain: (cb) => main.onStdinDrain(cb),
        end: () => {
          if (spec.stdinOnce) main.endStdin();
        },
      })
    : () => undefined;
  try {
    return await new Promise<{ exitCode: number }>((resolve) => {
      const onAbort = (): void => done(0);
      const done = (exitCode: number): void => {
        signal.removeEventListener('abort', onAbort);
        resolve({ exitCode });
      };
      void attachment.exited.then(done);
      signal.addEventListener('abort', onAbort, { once: true });
      if (pod.deleted || signal.aborted) done(0);
    });
  } finally {
    unpipeStdin();
    streams.resize?.off('resize', onResize);
    attachment.detach();
  }
}

/** Where stdin bytes go. */
interface StdinTarget {
  write(chunk: Buffer): boolean;
  onDrain(cb: () => void): void;
  end(): void;
}

/** Copy `stdin` into `target` with backpressure; returns the function that stops copying. */
function pipeStdin(stdin: Readable, target: StdinTarget): () => void {
  let active = true;
  const onData = (chunk: Buffer | string): void => {
    if (!active) return;
    if (!target.write(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)) {
      stdin.pause();
      target.onDrain(() => {
        if (active) stdin.resume();
      });
    }
  };
  const onEnd = (): void => {
    if (active) target.end();
  };
  stdin.on('data', onData);
  stdin.once('end', onEnd);
  stdin.once('error', onEnd);
  if (stdin.readableEnded) onEnd();
  return () => {
    active = false;
    stdin.off('data', onData);
    stdin.off('end', onEnd);
    stdin.off('error', onEnd);
    stdin.resume(); // discard what still arrives, so the sender is never blocked by us
  };
}

/** SIGTERM the process when `signal` fires, SIGKILL after the grace period; returns the disarm. */
function killOnAbort(proc: LocalProcess, signal: AbortSignal): () => void {
  let timer: NodeJS.Timeout | undefined;
  const onAbort = (): void => {
    proc.kill('SIGTERM');
    timer = setTimeout(() => proc.kill('SIGKILL'), KILL_GRACE_MS);
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return () => {
    signal.removeEventListener('abort', onAbort);
    clearTimeout(timer);
  };
}

/** Wait for the first resize (bounded by {@link FIRST_RESIZE_WAIT_MS}) so a tty starts at the client's size. */
function firstResize(resize: EventEmitter | undefined, signal: AbortSignal): Promise<TerminalSize> {
  if (!resize) return Promise.resolve(DEFAULT_TERMINAL_SIZE);
  return new Promise((resolve) => {
    const finish = (size: TerminalSize): void => {
      clearTimeout(timer);
      resize.off('resize', onResize);
      signal.removeEventListener('abort', onAbort);
      resolve(size);
    };
    const onResize = (s: TerminalSize): void => {
      if (s.width >= 1 && s.height >= 1) finish(s);
    };
    const onAbort = (): void => finish(DEFAULT_TERMINAL_SIZE);
    const timer = setTimeout(() => finish(DEFAULT_TERMINAL_SIZE), FIRST_RESIZE_WAIT_MS);
    resize.on('resize', onResize);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}
