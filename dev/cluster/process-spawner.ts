/**
 * Starting exec'd processes from a small helper process instead of from the dev cluster itself.
 *
 * Why: Node starts a child with fork() + exec (libuv on Linux). fork() copies the parent's page
 * tables and write-protects every private page of the parent, so after each spawn the dev cluster
 * takes a copy-on-write fault on the first write to every page it touches again (heap, GC, socket
 * buffers). The cost grows with the parent's RSS and with the spawn rate: a dev cluster serving
 * hundreds of sessions spent most of its time in page faults (see docs/reliability.md, "Load and
 * soak"), and a 1 GiB one stalled for seconds per burst of forks. The helper is a bare `node -e`
 * process of ~40 MiB that does nothing else, so forking it is cheap and its faults slow nobody.
 *
 * The helper spawns the command with ordinary stdio pipes and hands the parent's ends of the three
 * pipes to the dev cluster over its IPC channel (SCM_RIGHTS, Node's `send(message, socket)`), then
 * closes its copies: the bytes flow between the dev cluster and the process exactly as before,
 * without passing through the helper. The helper reports the exit code and signal.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';

/**
 * The helper, CommonJS for `node -e`. Per request it spawns the command (own process group) and
 * sends `stdin` (with the pid), `stdout`, `stderr` (each with its socket; Node delivers them in
 * order, each after the previous one was acknowledged), then `exit`. It must never read the
 * output itself, or bytes written before the socket was handed over would be lost: reading is
 * stopped right after spawn (before any I/O can happen) and kept off (`_read` is what Node calls
 * to restart it, e.g. on child exit).
 */
const HELPER_SOURCE = String.raw`'use strict';
const { spawn } = require('node:child_process');
const send = (m, h) => { if (process.connected) process.send(m, h, undefined, () => undefined); };
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  let child;
  try {
    child = spawn(m.file, m.args, { cwd: m.cwd, env: m.env, argv0: m.argv0, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  } catch (err) {
    send({ id: m.id, kind: 'error', message: String((err && err.message) || err) });
    return;
  }
  if (child.pid === undefined) {
    child.once('error', (err) => send({ id: m.id, kind: 'error', message: err.message }));
    return;
  }
  child.on('error', () => undefined);
  child.stdin.on('error', () => undefined);
  for (const s of [child.stdout, child.stderr]) {
    s._read = () => undefined;
    if (s._handle) { s._handle.reading = false; s._handle.readStop(); }
  }
  send({ id: m.id, kind: 'stdin', pid: child.pid }, child.stdin.destroyed ? undefined : child.stdin);
  send({ id: m.id, kind: 'stdout' }, child.stdout);
  send({ id: m.id, kind: 'stderr' }, child.stderr);
  child.once('exit', (code, signal) => send({ id: m.id, kind: 'exit', code, signal }));
});
`;

/** What to start. */
export interface SpawnRequest {
  /** Resolved executable path. */
  file: string;
  args: string[];
  argv0: string;
  cwd: string;
  env: Record<string, string>;
}

/** The running process: its pid and the dev cluster's ends of its stdio pipes. */
export interface SpawnedPipes {
  pid: number;
  /** Undefined when the process already exited before its stdin was handed over. */
  stdin: Socket | undefined;
  stdout: Socket;
  stderr: Socket;
}

/** A process started by the helper. */
export interface HelperChild {
  /** Resolves once the process runs; rejects when it could not be started. */
  readonly started: Promise<SpawnedPipes>;
  /** Resolves with the exit code or signal; rejects if the helper died first (the exit is then unknown). */
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

interface HelperMessage {
  id: number;
  kind: 'stdin' | 'stdout' | 'stderr' | 'exit' | 'error';
  pid?: number;
  code?: number | null;
  signal?: NodeJS.Signals | null;
  message?: string;
}

interface Pending {
  pid?: number;
  stdin?: Socket;
  stdout?: Socket;
  resolveStarted(p: SpawnedPipes): void;
  rejectStarted(err: Error): void;
  resolveExit(e: { code: number | null; signal: NodeJS.Signals | null }): void;
  rejectExit(err: Error): void;
}

/**
 * How long an unheld helper (see {@link holdSpawnHelper}) stays after its last process exited: long
 * enough for back-to-back sessions to share one helper.
 */
export const HELPER_LINGER_MS = 250;

/** Holders of the helper ({@link holdSpawnHelper}): while there are any, it is kept running. */
let holders = 0;

/**
 * One helper per dev cluster process, kept while held ({@link holdSpawnHelper}: a dev cluster holds
 * it while any pod is up) or while its processes run, then stopped after {@link HELPER_LINGER_MS}.
 */
class SpawnHelper {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #dead = false;
  #linger: NodeJS.Timeout | undefined;

  constructor(private readonly onDead: () => void) {
    this.#child = spawn(process.execPath, ['-e', HELPER_SOURCE], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      serialization: 'json',
    });
    this.#child.on('message', (m: HelperMessage, handle: unknown) => this.#onMessage(m, handle as Socket | undefined));
    this.#child.once('exit', () => this.#die(new Error('the dev cluster spawn helper exited')));
    this.#child.once('error', (err) => this.#die(err));
    // Only outstanding processes keep the dev cluster's event loop alive (as child processes do).
    this.#child.unref();
  }

  spawn(req: SpawnRequest): HelperChild {
    const id = this.#nextId++;
    let p!: Pending;
    const started = new Promise<SpawnedPipes>((resolveStarted, rejectStarted) => {
      p = { resolveStarted, rejectStarted } as Pending;
    });
    const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit, rejectExit) => {
      p.resolveExit = resolveExit;
      p.rejectExit = rejectExit;
    });
    started.catch(() => undefined);
    exit.catch(() => undefined);
    if (this.#dead) {
      const err = new Error('the dev cluster spawn helper is not running');
      p.rejectStarted(err);
      p.rejectExit(err);
      return { started, exit };
    }
    this.#pending.set(id, p);
    this.#refresh();
    this.#child.send({ id, ...req });
    return { started, exit };
  }

  #onMessage(m: HelperMessage, handle: Socket | undefined): void {
    const p = this.#pending.get(m.id);
    if (!p) {
      handle?.destroy();
      return;
    }
    switch (m.kind) {
      case 'stdin':
        p.pid = m.pid;
        p.stdin = handle;
        return;
      case 'stdout':
        p.stdout = handle;
        return;
      case 'stderr':
        if (p.pid === undefined || !p.stdout || !handle) {
          // Cannot happen with a working helper; fail the session rather than hang it.
          this.#settle(m.id, new Error('the spawn helper handed over incomplete stdio'));
          p.stdin?.destroy();
          p.stdout?.destroy();
          handle?.destroy();
          return;
        }
        p.resolveStarted({ pid: p.pid, stdin: p.stdin, stdout: p.stdout, stderr: handle });
        return;
      case 'exit':
        this.#pending.delete(m.id);
        p.resolveExit({ code: m.code ?? null, signal: m.signal ?? null });
        this.#refresh();
        return;
      case 'error':
        this.#settle(m.id, new Error(m.message ?? 'spawn failed'));
        return;
    }
  }

  #settle(id: number, err: Error): void {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    p.rejectStarted(err);
    p.rejectExit(err);
    this.#refresh();
  }

  #die(err: Error): void {
    if (this.#dead) return;
    this.#dead = true;
    clearTimeout(this.#linger);
    for (const [id, p] of [...this.#pending]) {
      this.#pending.delete(id);
      p.rejectStarted(err);
      p.rejectExit(err);
    }
    this.onDead();
  }

  /**
   * Keep the IPC channel referenced exactly while processes are outstanding (as child processes
   * keep the event loop alive); once none is and nobody holds the helper, stop it after
   * {@link HELPER_LINGER_MS}.
   */
  refresh(): void {
    this.#refresh();
  }

  #refresh(): void {
    if (this.#dead) return;
    const channel = this.#child.channel as { ref?: () => void; unref?: () => void } | null | undefined;
    clearTimeout(this.#linger);
    this.#linger = undefined;
    if (this.#pending.size > 0) {
      channel?.ref?.();
      return;
    }
    channel?.unref?.();
    if (holders > 0) return;
    this.#linger = setTimeout(() => {
      if (this.#pending.size > 0 || this.#dead || holders > 0) return;
      this.#dead = true;
      this.onDead();
      // The helper exits on 'disconnect'; its processes are all gone already.
      if (this.#child.connected) this.#child.disconnect();
    }, HELPER_LINGER_MS).unref();
  }
}

let helper: SpawnHelper | undefined;

function runningHelper(): SpawnHelper {
  if (!helper) {
    const h: SpawnHelper = new SpawnHelper(() => {
      if (helper === h) helper = undefined;
    });
    helper = h;
  }
  return helper;
}

/** Start `req` through the shared spawn helper (started if none is running). */
export function spawnViaHelper(req: SpawnRequest): HelperChild {
  return runningHelper().spawn(req);
}

/**
 * Start the helper now (while this process is still small, so forking it is cheap) and keep it
 * until the returned release is called: a dev cluster's pods hold it while they are up, so the
 * helper (and its IPC socket) is there for the cluster's whole life rather than coming and going
 * with each burst of sessions. Idempotent release.
 */
export function holdSpawnHelper(): () => void {
  holders++;
  const h = runningHelper();
  h.refresh();
  let released = false;
  return () => {
    if (released) return;
    released = true;
    holders--;
    helper?.refresh();
  };
}
