/**
 * The heap floor: the relaying commands run with V8's `--initial-old-space-size` (issue 15;
 * docs/benchmarks.md "The heap floor"; docs/decisions.md).
 *
 * Why: every socket read gives Node a new 64 KiB ArrayBuffer, memory outside V8's heap that V8
 * counts against the old generation's allocation limit until the next full GC. A young-generation GC
 * frees these buffers only once ~32 MiB of them are pending. V8 sets the limit after each full GC from
 * the live heap: for the proxy's ~35 MiB (fastify, client-node, prom-client) it lands at about 1.5–1.7×
 * that. The slack above the live heap is then smaller than the buffers one relayed stream keeps
 * pending, so a full mark-compact of the whole heap ran every ~35 MB relayed. That was the "dear
 * mode" of earlier profiles: 2–3 CPU-s per GB of concurrent marking on V8's worker threads, in a
 * process that carries the proxy's modules even when it only `pipe()`s (bench/profile/floor.ts). A
 * small process (the bare relay) never pays it, because its limit keeps V8's large initial value.
 *
 * A floor set when the process starts (`--initial-old-space-size=N` sets V8's minimum old-generation
 * limit, so no full GC runs below N MiB for that reason) removes it; the limit above the floor still
 * grows with the heap. It cannot be set later (`v8.setFlagsFromString` is too late: the heap is
 * configured at start) nor through NODE_OPTIONS (Node refuses the flag there), so the CLI re-executes
 * itself with the flag: in place (`process.execve`: same process id, descriptors and environment)
 * where Node has it (≥ 22.15); elsewhere (Node 20) as one child process with the flag, which the
 * first process waits for, passing on signals and the exit status (src/heap-floor-child.ts). The
 * process that relays says in its start log line and in `/metrics` which floor it has and how it got
 * it ({@link currentHeapFloor}).
 */

/** V8's flag for the old generation's initial (and minimum) allocation limit, in MiB. */
export const HEAP_FLOOR_FLAG = '--initial-old-space-size';

/**
 * The floor the CLI gives itself: 128 MiB. Measured (bench/profile/floor.ts, quiet machine): 64 MiB
 * left the full GCs in place, 128 and 256 MiB removed them; the smaller of the two costs less memory
 * before a process's first full GC (the floor is a limit, not an allocation: RSS grows only with
 * what is allocated).
 */
export const DEFAULT_HEAP_FLOOR_MB = 128;

/** Environment variable that sets the floor in MiB; `0` turns the re-execution off. */
export const HEAP_FLOOR_ENV = 'KSP_HEAP_FLOOR_MB';

/** The commands that relay streams for their whole life: the proxy and the agent. */
export const HEAP_FLOOR_COMMANDS: ReadonlySet<string> = new Set(['serve', 'agent', 'demo']);

/** The flags, already on a command line, that configure the old generation's initial size. */
const HEAP_SIZE_FLAGS = ['--initial-old-space-size', '--initial_old_space_size', '--initial-heap-size', '--initial_heap_size'];

/** True when node's flags `flags` already set the old generation's initial size (the floor or their own). */
export function sizesHeap(flags: readonly string[]): boolean {
  return flags.some((a) => HEAP_SIZE_FLAGS.some((f) => a === f || a.startsWith(`${f}=`)));
}

/** What the decision reads from the process. */
export interface HeapFloorInput {
  /** `process.argv`: node, the script, the command and its flags. */
  argv: readonly string[];
  /** `process.execArgv`: node's own flags. */
  execArgv: readonly string[];
  /** `process.execPath`. */
  execPath: string;
  env: Readonly<Record<string, string | undefined>>;
  /** Whether `process.execve` exists (Node ≥ 22.15, ≥ 23.11). */
  canExecve: boolean;
  /** `process.pid`: the relaunched process checks it against {@link HEAP_FLOOR_VIA_ENV}. */
  pid: number;
}

/** How the floor is given: by replacing this process (`execve`) or by one child process with the flag. */
export type HeapFloorRelaunchHow = 'execve' | 'child-process';

/** The process to become (`execve(file, args, env)`) or to start as the one child (`spawn(file, args[1…], {env})`). */
export interface HeapFloorRelaunch {
  how: HeapFloorRelaunchHow;
  file: string;
  /** Full argv, `args[0]` the executable: node, its flags with the floor, the script, its arguments. */
  args: string[];
  /** The environment, with {@link HEAP_FLOOR_VIA_ENV} telling the new process how it was started. */
  env: Record<string, string | undefined>;
  floorMb: number;
}

/**
 * Environment variable the CLI sets for the process it relaunches: `execve:PID` (PID: the process's
 * own id, unchanged by execve) or `child-process:PID` (PID: the parent's). The relaunched process
 * removes it from its environment at start, so nothing it starts inherits it.
 */
export const HEAP_FLOOR_VIA_ENV = 'KSP_HEAP_FLOOR_VIA';

/** The floor in MiB from `KSP_HEAP_FLOOR_MB`, or the default; throws on anything but a whole number. */
export function heapFloorMb(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env[HEAP_FLOOR_ENV];
  if (raw === undefined || raw === '') return DEFAULT_HEAP_FLOOR_MB;
  if (!/^\d+$/.test(raw.trim())) throw new Error(`${HEAP_FLOOR_ENV} must be a whole number of MiB (0 turns the heap floor off), got "${raw}"`);
  return Number(raw.trim());
}

/** True for `serve`, `agent` and `demo` (not their `--help`): the commands that get the floor. */
function relaysStreams(argv: readonly string[]): boolean {
  const [, script, command, ...rest] = argv;
  if (script === undefined || command === undefined || !HEAP_FLOOR_COMMANDS.has(command)) return false;
  return !rest.includes('--help') && !rest.includes('-h');
}

/**
 * Whether and how to relaunch with the heap floor: undefined when the command does not relay
 * (`dev-cluster`, `--help`, …), when node's flags already size the heap (so the relaunched process
 * never relaunches again), or when the floor is 0. Otherwise `execve` where this Node can replace its
 * process image, else one child process.
 */
export function heapFloorRelaunch(input: HeapFloorInput): HeapFloorRelaunch | undefined {
  if (!relaysStreams(input.argv)) return undefined;
  if (sizesHeap(input.execArgv)) return undefined;
  const floorMb = heapFloorMb(input.env);
  if (floorMb === 0) return undefined;
  const [, ...scriptAndArgs] = input.argv;
  const how: HeapFloorRelaunchHow = input.canExecve ? 'execve' : 'child-process';
  return {
    how,
    file: input.execPath,
    args: [input.execPath, ...input.execArgv, `${HEAP_FLOOR_FLAG}=${floorMb}`, ...scriptAndArgs],
    env: { ...input.env, [HEAP_FLOOR_VIA_ENV]: `${how}:${input.pid}` },
    floorMb,
  };
}

/**
 * How the running process got its floor (the `via` of its start log line):
 * - `execve`, `child-process`: the CLI relaunched it with the floor;
 * - `command-line`: node's flags sized the heap when it was started (the npm scripts, the bench, a user);
 * - `env`: off, `KSP_HEAP_FLOOR_MB=0`;
 * - `not-relaying`: off, a command that does not relay streams (`dev-cluster`, `--help`);
 * - `not-relaunched`: off, the CLI's entry (bin/kube-stream-proxy.js) did not run (`main()` called directly).
 */
export type HeapFloorVia = 'execve' | 'child-process' | 'command-line' | 'env' | 'not-relaying' | 'not-relaunched';

/** The floor the running process has: its MiB (0 when off) and how it got there. */
export interface HeapFloorStatus {
  floorMb: number;
  via: HeapFloorVia;
}

/** What {@link heapFloorStatus} reads from the process. */
export interface HeapFloorStatusInput {
  /** `process.argv`; undefined when the command is not known (the CLI's entry did not run). */
  argv?: readonly string[];
  execArgv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  pid: number;
  ppid: number;
}

/** The MiB that node's flags give the heap's initial size (the last such flag, as V8 reads them), or undefined. */
export function heapSizeFlagMb(flags: readonly string[]): number | undefined {
  let mb: number | undefined;
  flags.forEach((a, i) => {
    for (const f of HEAP_SIZE_FLAGS) {
      if (a.startsWith(`${f}=`)) mb = Number(a.slice(f.length + 1));
      else if (a === f) mb = Number(flags[i + 1]);
    }
  });
  return mb === undefined ? undefined : Number.isFinite(mb) && mb >= 0 ? mb : 0;
}

/** The floor of a process started as `input` describes. */
export function heapFloorStatus(input: HeapFloorStatusInput): HeapFloorStatus {
  const flagMb = heapSizeFlagMb(input.execArgv);
  if (flagMb !== undefined) {
    const [how, pid] = (input.env[HEAP_FLOOR_VIA_ENV] ?? '').split(':');
    const ours = (how === 'execve' && Number(pid) === input.pid) || (how === 'child-process' && Number(pid) === input.ppid);
    return { floorMb: flagMb, via: ours ? (how as HeapFloorRelaunchHow) : 'command-line' };
  }
  if (input.argv !== undefined && !relaysStreams(input.argv)) return { floorMb: 0, via: 'not-relaying' };
  let floorMb: number | undefined;
  try {
    floorMb = heapFloorMb(input.env);
  } catch {
    // A bad value stops the CLI's entry before anything starts; without it the floor is just off.
  }
  return { floorMb: 0, via: floorMb === 0 ? 'env' : 'not-relaunched' };
}

let current: HeapFloorStatus | undefined;

/**
 * The running process's floor: what the CLI's entry recorded ({@link recordHeapFloor}), else what
 * node's flags and the environment say. Read by the start log lines and the
 * `kube_stream_proxy_heap_floor_bytes` gauge.
 */
export function currentHeapFloor(): HeapFloorStatus {
  current ??= heapFloorStatus({ execArgv: process.execArgv, env: process.env, pid: process.pid, ppid: process.ppid });
  return current;
}

/** Record the running process's floor (the CLI's entry, at start). */
export function recordHeapFloor(status: HeapFloorStatus): void {
  current = status;
}

/** The fields of the start log line `heap floor` of `serve`, `agent` and `demo`: `{heapFloorMb, via}`. */
export function heapFloorLogFields(): { heapFloorMb: number; via: HeapFloorVia } {
  const { floorMb, via } = currentHeapFloor();
  return { heapFloorMb: floorMb, via };
}
