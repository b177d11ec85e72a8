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
 * itself with the flag, in place (`process.execve`: same process id, descriptors and environment)
 * where Node has it (≥ 22.15). On older Node the flag goes on the command line (the image, the npm
 * scripts and the bench give it); without it everything works, at the old CPU cost.
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
}

/** The process to become: `execve(file, args)`. */
export interface HeapFloorRelaunch {
  file: string;
  /** Full argv, `args[0]` the executable: node, its flags with the floor, the script, its arguments. */
  args: string[];
  floorMb: number;
}

/** The floor in MiB from `KSP_HEAP_FLOOR_MB`, or the default; throws on anything but a whole number. */
export function heapFloorMb(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env[HEAP_FLOOR_ENV];
  if (raw === undefined || raw === '') return DEFAULT_HEAP_FLOOR_MB;
  if (!/^\d+$/.test(raw.trim())) throw new Error(`${HEAP_FLOOR_ENV} must be a whole number of MiB (0 turns the heap floor off), got "${raw}"`);
  return Number(raw.trim());
}

/**
 * Whether and how to re-execute with the heap floor: undefined when the command does not relay
 * (`dev-cluster`, `--help`, …), when node's flags already size the heap, when the floor is 0, or when
 * this Node cannot replace its process image.
 */
export function heapFloorRelaunch(input: HeapFloorInput): HeapFloorRelaunch | undefined {
  const [, script, command, ...rest] = input.argv;
  if (script === undefined || command === undefined || !HEAP_FLOOR_COMMANDS.has(command)) return undefined;
  if (rest.includes('--help') || rest.includes('-h')) return undefined;
  if (sizesHeap(input.execArgv)) return undefined;
  const floorMb = heapFloorMb(input.env);
  if (floorMb === 0 || !input.canExecve) return undefined;
  return { file: input.execPath, args: [input.execPath, ...input.execArgv, `${HEAP_FLOOR_FLAG}=${floorMb}`, script, command, ...rest], floorMb };
}
