/**
 * The servers a benchmark path needs, each started as its own `node` process (as they run in real
 * life), so the benchmark's own bookkeeping never shares an event loop with the code being measured.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HEAP_FLOOR_COMMANDS, HEAP_FLOOR_FLAG, heapFloorMb, sizesHeap } from '../src/heap-floor.js';

/** A server process and the URL it printed. */
export interface ServerProcess {
  url: string;
  /** The stdout line that announced it (holds every address it printed). */
  readyLine?: string;
  /** The server's process id (for /proc measurements). */
  pid: number;
  close(): Promise<void>;
}

/**
 * How to start a server process. File descriptors: Node raises its soft RLIMIT_NOFILE to the hard
 * limit at start-up, so each server gets the hard limit it inherits (raising that needs
 * CAP_SYS_RESOURCE, which the bench does not assume).
 */
export interface ServerOptions {
  /** Arguments for `node` itself, before the script (e.g. `--cpu-prof`, `--cpu-prof-dir=…`). */
  nodeArgs?: string[];
  /** A command that runs `node` (e.g. `valgrind --tool=callgrind …`); the process id is then the wrapper's. */
  wrapper?: string[];
  /** Extra environment for the process. */
  env?: Record<string, string>;
  /**
   * Start a relaying command as a user does: no heap flag from the bench, the CLI gives itself the
   * floor (execve, or its one child process on Node 20; src/heap-floor.ts). The process id is then
   * the first process's; its tree's CPU (bench/proc-cpu.ts) includes the child's.
   */
  cliHeapFloor?: boolean;
  /** Another build's `bin/kube-stream-proxy.js` (a base tree for a same-run before/after, `--cpu --base`). */
  cli?: string;
}

/**
 * How long a server may take to print its ready line. A Node server starts in well under a second
 * on a quiet machine; the bench's quick modes run inside `npm test`, where a 2-core machine at load
 * 10–15 once took over 30 s to start the dev cluster, so the bound is generous:
 * it only turns a server that never comes up into an error.
 */
export const SERVER_START_TIMEOUT_MS = 60_000;

/** bin/kube-stream-proxy.js, found from dist/bench/ (compiled) or bench/ (source). */
function cliPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  if (dir.endsWith(join('dist', 'bench'))) dir = dirname(dirname(dir));
  else dir = dirname(dir);
  return join(dir, 'bin', 'kube-stream-proxy.js');
}

/**
 * Run `kube-stream-proxy <args>` and resolve with the first `http(s)://…` URL printed on a line
 * matching `ready` (e.g. "dev cluster listening on http://127.0.0.1:NNNN").
 */
export function startCli(args: string[], ready: RegExp, timeoutMs = SERVER_START_TIMEOUT_MS, options: ServerOptions = {}): Promise<ServerProcess> {
  return startNodeScript(options.cli ?? cliPath(), args, ready, timeoutMs, withHeapFloor(args[0], options));
}

/**
 * The relaying commands with the heap floor on node's command line (src/heap-floor.ts), as the npm
 * scripts give it, so the bench measures the same process on every Node: on Node ≥ 22.15 the CLI
 * would re-execute itself with it anyway (and under a valgrind wrapper the re-executed process would
 * leave valgrind). `KSP_HEAP_FLOOR_MB=0` in `options.env` (the "no heap floor" rows), a heap flag of
 * the caller's own in `nodeArgs` or `cliHeapFloor` (the "heap floor from the CLI" row) leaves the
 * command line alone.
 */
export function withHeapFloor(command: string | undefined, options: ServerOptions): ServerOptions {
  if (command === undefined || !HEAP_FLOOR_COMMANDS.has(command) || options.cliHeapFloor) return options;
  const floorMb = heapFloorMb({ ...process.env, ...options.env });
  if (floorMb === 0 || sizesHeap(options.nodeArgs ?? [])) return options;
  return { ...options, nodeArgs: [...(options.nodeArgs ?? []), `${HEAP_FLOOR_FLAG}=${floorMb}`] };
}

/** The compiled bench script `name` (e.g. "bare-relay" → dist/bench/bare-relay.js). */
export function benchScriptPath(name: string): string {
  return join(dirname(cliPath()), '..', 'dist', 'bench', `${name}.js`);
}

/**
 * Run `node <script> <args>` and resolve with the first `http(s)://…` URL printed on a line
 * matching `ready`.
 */
export function startNodeScript(script: string, args: string[], ready: RegExp, timeoutMs = SERVER_START_TIMEOUT_MS, options: ServerOptions = {}): Promise<ServerProcess> {
  if (options.wrapper) timeoutMs = Math.max(timeoutMs, 600_000); // valgrind starts node ~50× slower
  const argv = [process.execPath, ...(options.nodeArgs ?? []), script, ...args];
  const [cmd, ...rest] = [...(options.wrapper ?? []), ...argv];
  const child = spawn(cmd!, rest, { stdio: ['ignore', 'pipe', 'pipe'], ...(options.env ? { env: { ...process.env, ...options.env } } : {}) });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`no "${ready.source}" line within ${timeoutMs} ms`)), timeoutMs);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${script} ${args.join(' ')}: ${err.message}\n${output}`));
    };
    const onData = (c: Buffer): void => {
      output += c.toString();
      for (const line of output.split('\n')) {
        const m = ready.test(line) ? /(https?:\/\/[^\s,]+)/.exec(line) : null;
        if (m) {
          clearTimeout(timer);
          child.stdout!.off('data', onData);
          child.stdout!.resume();
          child.stderr!.resume();
          return resolve({ url: m[1]!, readyLine: line, pid: child.pid!, close: () => stop(child) });
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    child.once('error', fail);
    child.once('exit', (code, signal) => fail(new Error(`exited early: code=${code} signal=${signal}`)));
  });
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
  });
}

const translateAtProxyByCli = new Map<string, string[]>();

/**
 * `serve` arguments that keep WebSocket v5 exec/attach and the port-forward tunnel translated by the
 * proxy itself (its StreamTranslatorProxy and tunnel, the SPDY leg upstream) for the rows that
 * measure them. The dev cluster plays a 1.36 kube-apiserver and kubelet that take v5 and the tunnel
 * (issue 32), so the default `--upstream-streaming auto` would pass them through instead:
 * `--upstream-streaming spdy` is the proxy's behaviour before 1.36. A build that does not know the
 * flag (a `--base` tree from before it) translates anyway and gets none. `cli`: another build's
 * `bin/kube-stream-proxy.js` (default: this tree's).
 */
export function translateAtProxy(cli: string = cliPath()): string[] {
  let args = translateAtProxyByCli.get(cli);
  if (!args) {
    const help = spawnSync(process.execPath, [cli, 'serve', '--help'], { encoding: 'utf8', timeout: 60_000 });
    if (help.status !== 0) throw new Error(`${cli} serve --help: exit ${help.status}: ${help.stderr}`);
    args = /--upstream-streaming\b/.test(`${help.stdout}${help.stderr}`) ? ['--upstream-streaming', 'spdy'] : [];
    translateAtProxyByCli.set(cli, args);
  }
  return args;
}

/** The dev cluster on a free loopback port. */
export function startDevClusterProcess(options: ServerOptions = {}): Promise<ServerProcess> {
  return startCli(['dev-cluster', '--listen', '127.0.0.1:0'], /^dev cluster listening on /, SERVER_START_TIMEOUT_MS, options);
}

/** The proxy on a free loopback port in front of `upstream`. */
export function startProxyProcess(upstream: string, extraArgs: string[] = [], options: ServerOptions = {}): Promise<ServerProcess> {
  return startCli(['serve', '--listen', '127.0.0.1:0', '--upstream', upstream, ...extraArgs], /^kube-stream-proxy listening on /, SERVER_START_TIMEOUT_MS, options);
}
