/**
 * A container's main process: started with the pod, restarted when it exits (restartCount++), and
 * shared by every attacher. Its output is broadcast to the attachers of the moment (and kept in a
 * small log ring for pods/log); attachers' stdin goes to its stdin.
 */
import { EventEmitter } from 'node:events';
import type { Writable } from 'node:stream';
import type { TerminalSize } from '../../src/terminal-size.js';
import { spawnLocal, type LocalProcess } from './local-process.js';
import { KILL_GRACE_MS, type LaunchTarget } from './process-launch.js';
import { holdSpawnHelper } from './process-spawner.js';

/** The parts of a container spec the dev cluster uses. */
export interface ContainerSpec {
  name: string;
  image: string;
  stdin: boolean;
  stdinOnce: boolean;
  tty: boolean;
  /** Main process argv (command + args); default `/bin/sh`. */
  command?: string[];
  args?: string[];
}

/** Where an attacher wants the main process's output. */
export interface AttachSink {
  stdout?: Writable;
  /** Ignored for a tty container (a terminal has one output). */
  stderr?: Writable;
}

/** One attacher's hold on the main process it attached to. */
export interface MainAttachment {
  /** That process's exit code (0..255): the attach session ends with it. A restart does not carry it over. */
  readonly exited: Promise<number>;
  /** Stop copying output to the sink (idempotent). */
  detach(): void;
}

/** Where a `logs -f` follower wants the output. */
export interface LogFollower {
  /** One chunk of output (stdout and stderr interleaved). */
  write(chunk: Buffer): void;
  /** The process exited (or the container stopped): no more output for this follower. */
  end(): void;
}

/** How the previous process ended (core/v1 ContainerStateTerminated, for the pod's `lastState`). */
export interface ContainerTermination {
  exitCode: number;
  reason: 'Completed' | 'Error';
  startedAt: string;
  finishedAt: string;
}

/** Bytes of recent output kept for pods/log. */
const LOG_RING_BYTES = 256 * 1024;
/** A process that lived less than this is restarted after {@link CRASH_BACKOFF_MS}, not at once. */
const CRASH_WINDOW_MS = 1000;
const CRASH_BACKOFF_MS = 1000;

/**
 * The main process of one container. Emits `exit` (exitCode) each time the process ends and
 * `restart` when a new one was started.
 */
export class ContainerProcess extends EventEmitter {
  restartCount = 0;
  startedAt = new Date().toISOString();
  /** How the previous process ended (undefined before the first exit). */
  lastTermination: ContainerTermination | undefined;
  #proc: LocalProcess | undefined;
  #sinks = new Set<AttachSink>();
  #log: Buffer[] = [];
  #logBytes = 0;
  #stopped = false;
  #restartTimer: NodeJS.Timeout | undefined;
  #stdinEnded = false;
  #lastSize: TerminalSize | undefined;
  /** `logs -f` followers of the running process: each gets its output until it exits. */
  #followers = new Set<LogFollower>();
  /** Attachers waiting for the next process (one arrived between an exit and the restart). */
  #startWaiters = new Set<{ resolve(proc: LocalProcess): void; reject(err: Error): void }>();
  /** Keeps the exec spawn helper (process-spawner.ts) up while this pod's container is. */
  #releaseSpawnHelper: (() => void) | undefined;

  constructor(
    readonly spec: ContainerSpec,
    private readonly target: LaunchTarget,
  ) {
    super();
  }

  /** True when the main process runs on a terminal (spec.tty). */
  get tty(): boolean {
    return this.spec.tty;
  }

  /** The current process id, if running. */
  get pid(): number | undefined {
    return this.#proc && !this.#proc.done ? this.#proc.pid : undefined;
  }

  /** Start the process (first start or restart). */
  start(): void {
    if (this.#stopped) return;
    this.#releaseSpawnHelper ??= holdSpawnHelper();
    const argv = [...(this.spec.command?.length ? this.spec.command : ['/bin/sh']), ...(this.spec.args ?? [])];
    const began = Date.now();
    this.#stdinEnded = false;
    let proc: LocalProcess;
    try {
      proc = spawnLocal(argv, this.target, this.spec.tty, this.#lastSize, { direct: true });
    } catch (err) {
      this.#proc = undefined;
      this.#failWaiters(`container "${this.spec.name}" could not start: ${(err as Error).message}`);
      this.#scheduleRestart(127, began);
      return;
    }
    this.#proc = proc;
    this.startedAt = new Date().toISOString();
    const waiters = [...this.#startWaiters];
    this.#startWaiters.clear();
    for (const w of waiters) w.resolve(proc);
    proc.stdout.add(this.#logWriter);
    proc.stderr.add(this.#logWriter);
    if (!this.spec.stdin) proc.endStdin();
    proc.exited.then(
      (code) => this.#scheduleRestart(code, began),
      () => this.#scheduleRestart(126, began),
    );
  }

  /** True while a main process runs (false between its exit and the restart, and once stopped). */
  get running(): boolean {
    return !this.#stopped && this.#proc !== undefined && !this.#proc.done;
  }

  /**
   * Attach `sink` to the running main process: its output from now on is copied there, and the
   * attachment's `exited` settles when THAT process exits. Arriving between an exit and the restart
   * (the crash back-off), it waits for the restarted process, as a kubelet attaches to the restarted
   * container. Rejects (never waits on a process that is gone) when the container was stopped, when
   * the restart could not start a process, or when `signal` aborts.
   */
  async attach(sink: AttachSink, signal: AbortSignal): Promise<MainAttachment> {
    const proc = this.running ? this.#proc! : await this.#nextProcess(signal);
    this.#sinks.add(sink);
    this.#connect(proc, sink);
    let attached = true;
    return {
      exited: proc.exited.catch(() => 126),
      detach: () => {
        if (!attached) return;
        attached = false;
        this.#sinks.delete(sink);
        this.#disconnect(proc, sink);
      },
    };
  }

  /** The next process this container starts; rejects as {@link attach} says. */
  #nextProcess(signal: AbortSignal): Promise<LocalProcess> {
    if (this.#stopped) return Promise.reject(this.#notRunning());
    if (signal.aborted) return Promise.reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    return new Promise<LocalProcess>((resolve, reject) => {
      const onAbort = (): void => {
        this.#startWaiters.delete(waiter);
        reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      const waiter = {
        resolve: (proc: LocalProcess) => {
          signal.removeEventListener('abort', onAbort);
          resolve(proc);
        },
        reject: (err: Error) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      this.#startWaiters.add(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  #notRunning(): Error {
    return new Error(`container "${this.spec.name}" is not running`);
  }

  #failWaiters(message: string): void {
    const waiters = [...this.#startWaiters];
    this.#startWaiters.clear();
    for (const w of waiters) w.reject(new Error(message));
  }

  /** Write attacher input; false means wait for {@link onStdinDrain}. Dropped without `stdin: true`. */
  writeStdin(chunk: Buffer): boolean {
    if (!this.spec.stdin || !this.#proc || this.#proc.done) return true;
    return this.#proc.writeStdin(chunk);
  }

  /** Call `cb` once the current process's stdin can take more data. */
  onStdinDrain(cb: () => void): void {
    if (!this.#proc || this.#proc.done) cb();
    else this.#proc.onStdinDrain(cb);
  }

  /** Close the main stdin (an attacher's EOF with stdinOnce). */
  endStdin(): void {
    if (this.#stdinEnded) return;
    this.#stdinEnded = true;
    this.#proc?.endStdin();
  }

  /** Resize the container's terminal. */
  resize(size: TerminalSize): void {
    if (size.width < 1 || size.height < 1) return;
    this.#lastSize = size;
    this.#proc?.resize(size);
  }

  /** Recent output (stdout and stderr interleaved), for pods/log. */
  logs(): Buffer {
    return Buffer.concat(this.#log);
  }

  /**
   * `kubectl logs -f`: the running process's output from now on (take {@link logs} first, in the
   * same turn, so nothing is missed or repeated), until that process exits (then `end`, as the
   * kubelet ends a follow when its container terminates; at once when none runs). Returns the
   * function that stops following.
   */
  follow(follower: LogFollower): () => void {
    if (!this.running) {
      follower.end();
      return () => undefined;
    }
    this.#followers.add(follower);
    return () => {
      this.#followers.delete(follower);
    };
  }

  #endFollowers(): void {
    const followers = [...this.#followers];
    this.#followers.clear();
    for (const f of followers) f.end();
  }

  /** Kill the process for good (SIGTERM, SIGKILL after a grace period); resolves once it is gone. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#restartTimer);
    this.#failWaiters(this.#notRunning().message);
    this.#endFollowers();
    this.#releaseSpawnHelper?.();
    const proc = this.#proc;
    if (!proc || proc.done) return;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), KILL_GRACE_MS);
    await proc.exited.catch(() => undefined);
    clearTimeout(timer);
  }

  readonly #logWriter = {
    write: (chunk: Buffer): boolean => {
      this.#log.push(chunk);
      this.#logBytes += chunk.length;
      for (const f of this.#followers) f.write(chunk);
      while (this.#logBytes > LOG_RING_BYTES && this.#log.length > 1) this.#logBytes -= this.#log.shift()!.length;
      return true;
    },
    destroyed: false,
    writableEnded: false,
  } as unknown as Writable;

  #connect(proc: LocalProcess, sink: AttachSink): void {
    if (sink.stdout) proc.stdout.add(sink.stdout);
    const err = proc.tty ? undefined : (sink.stderr ?? undefined);
    if (err) proc.stderr.add(err);
  }

  #disconnect(proc: LocalProcess, sink: AttachSink): void {
    if (sink.stdout) proc.stdout.remove(sink.stdout);
    if (sink.stderr) proc.stderr.remove(sink.stderr);
  }

  #scheduleRestart(exitCode: number, began: number): void {
    this.lastTermination = {
      exitCode,
      reason: exitCode === 0 ? 'Completed' : 'Error',
      startedAt: new Date(began).toISOString(),
      finishedAt: new Date().toISOString(),
    };
    this.#endFollowers();
    this.emit('exit', exitCode);
    if (this.#stopped) return;
    const delay = Date.now() - began < CRASH_WINDOW_MS ? CRASH_BACKOFF_MS : 0;
    this.#restartTimer = setTimeout(() => {
      if (this.#stopped) return;
      this.restartCount++;
      this.start();
      this.emit('restart');
    }, delay);
  }
}
