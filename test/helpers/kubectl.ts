/**
 * Finding and running the real, versioned kubectl binaries that serve as acceptance clients.
 *
 * `kubectl` on PATH is a gcloud wrapper; the real binaries `kubectl.1.27` … `kubectl.1.33` sit next to
 * the file it resolves to (`readlink -f "$(command -v kubectl)"`, here /usr/lib/google-cloud-sdk/bin).
 * Every run gets a scrubbed environment: no KUBECONFIG, no proxies, no KUBECTL_* toggles from the
 * parent; only what the call passes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { HashingSink, type Digest } from './hash.js';

/** The kubectl minor versions the project supports. */
export type KubectlVersion = '1.27' | '1.28' | '1.29' | '1.30' | '1.31' | '1.32' | '1.33';

/** Environment variable that lets a developer skip (never CI) the kubectl end-to-end tests. */
export const SKIP_ENV = 'SKIP_KUBECTL_E2E';

/** Optional override: a folder holding `kubectl.<version>` binaries, searched first. */
export const KUBECTL_DIR_ENV = 'KUBECTL_BIN_DIR';

function isExecutableFile(p: string): boolean {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The folders searched for `kubectl.<version>`, in order, with the reason each is there. */
export function kubectlSearchDirs(): { dir: string; why: string }[] {
  const dirs: { dir: string; why: string }[] = [];
  const override = process.env[KUBECTL_DIR_ENV];
  if (override) dirs.push({ dir: override, why: `$${KUBECTL_DIR_ENV}` });
  const pathDirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  // `command -v kubectl`: the first executable kubectl on PATH, then follow symlinks (readlink -f).
  for (const d of pathDirs) {
    const candidate = join(d, 'kubectl');
    if (isExecutableFile(candidate)) {
      const real = realpathSync(candidate);
      dirs.push({ dir: dirname(real), why: `folder of readlink -f ${candidate} (${real})` });
      break;
    }
  }
  for (const d of pathDirs) dirs.push({ dir: d, why: 'PATH entry' });
  const seen = new Set<string>();
  return dirs.filter(({ dir }) => (seen.has(dir) ? false : (seen.add(dir), true)));
}

/** Absolute path of `kubectl.<version>`; throws an error listing every place it looked. */
export function findKubectl(version: KubectlVersion): string {
  const name = `kubectl.${version}`;
  const looked: string[] = [];
  for (const { dir, why } of kubectlSearchDirs()) {
    const p = join(dir, name);
    if (isExecutableFile(p)) return p;
    looked.push(`  ${p}  (${why})`);
  }
  throw new Error(
    `${name} not found. The kubectl acceptance tests need the real versioned kubectl binaries ` +
      `(the gcloud SDK component "kubectl" installs kubectl.1.27 … kubectl.1.33 next to its wrapper). Looked at:\n` +
      (looked.length ? looked.join('\n') : '  (no kubectl on PATH and PATH is empty)') +
      `\nInstall them, or point $${KUBECTL_DIR_ENV} at their folder. ` +
      `To skip these tests locally (never in CI), set ${SKIP_ENV}=1.`,
  );
}

/**
 * Why kubectl end-to-end tests should be skipped, or undefined when they must run.
 * Only an explicit SKIP_KUBECTL_E2E=1 skips; a missing kubectl is a test failure, not a skip.
 */
export function kubectlE2eSkipReason(): string | undefined {
  return process.env[SKIP_ENV] === '1'
    ? `${SKIP_ENV}=1 is set: kubectl end-to-end tests explicitly disabled for this run (CI never sets it)`
    : undefined;
}

/** Parent variables that must never reach kubectl (lowercase comparison). */
const SCRUBBED = /^(kubeconfig|http_proxy|https_proxy|no_proxy|all_proxy|ftp_proxy|kubectl_.*|kube_.*|tmux|tmux_pane)$/i;
/** Parent variables kubectl may see. */
const KEPT = ['PATH', 'HOME', 'TMPDIR', 'LANG', 'LC_ALL', 'USER', 'LOGNAME', 'SHELL'];

/**
 * The environment for a kubectl process: a small allow-list from the parent, then KUBECONFIG, then `extra`
 * (e.g. `{ KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false' }`). Proxy variables are never passed.
 */
export function kubectlEnv(kubeconfig: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const k of KEPT) if (process.env[k] !== undefined && !SCRUBBED.test(k)) env[k] = process.env[k];
  env.KUBECONFIG = kubeconfig;
  for (const [k, v] of Object.entries(extra)) {
    if (/_proxy$/i.test(k)) throw new Error(`kubectlEnv: refusing to pass proxy variable ${k}`);
    env[k] = v;
  }
  return env;
}

/** Options of {@link runKubectl} and {@link startKubectl}. */
export interface KubectlRunOptions {
  /** kubeconfig file; passed both as KUBECONFIG and as --kubeconfig. */
  kubeconfig: string;
  /** Extra environment, e.g. the WebSocket toggles. */
  env?: Record<string, string>;
  /** stdin content; 'ignore' (default) connects /dev/null. */
  stdin?: Buffer | Readable | 'ignore';
  /** Kill kubectl (SIGKILL) after this long and reject with a {@link KubectlTimeoutError}. */
  timeoutMs: number;
  /** Don't keep stdout; return only its sha256 and length (for 100 MB+ outputs). */
  hashStdout?: boolean;
  /** Working directory (kubectl cp resolves local relative paths against it). */
  cwd?: string;
}

/** Outcome of one kubectl run. */
export interface KubectlResult {
  /** The command line, for assertion messages. */
  command: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Full stdout (empty when hashStdout was set). */
  stdout: Buffer;
  /** sha256 + length of stdout (always filled). */
  stdoutDigest: Digest;
  stderr: string;
  /** Wall time from spawn to exit. */
  durationMs: number;
}

/** kubectl did not exit in time; carries what it had printed so far. */
export class KubectlTimeoutError extends Error {
  override readonly name = 'KubectlTimeoutError';
  constructor(
    readonly command: string,
    readonly timeoutMs: number,
    readonly stdoutBytes: number,
    readonly stderr: string,
  ) {
    super(
      `kubectl timed out after ${timeoutMs} ms and was killed: ${command}\n` +
        `  stdout so far: ${stdoutBytes} bytes\n  stderr so far: ${stderr.slice(-2000) || '(empty)'}`,
    );
  }
}

function shellQuote(a: string): string {
  return /^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`;
}

/** `kubectl.1.28 exec demo -- echo hi` style rendering for messages. */
export function describeCommand(bin: string, args: readonly string[], env: Record<string, string> = {}): string {
  const vars = Object.entries(env).map(([k, v]) => `${k}=${shellQuote(v)} `).join('');
  return vars + [bin, ...args].map(shellQuote).join(' ');
}

/** Short summary of a result for `expect(..., summary(r))`. */
export function summary(r: KubectlResult): string {
  return `${r.command}\n  exit: code=${r.code} signal=${r.signal} after ${r.durationMs.toFixed(0)} ms\n  stdout: ${r.stdoutDigest.byteLength} bytes${
    r.stdout.length && r.stdout.length < 500 ? ` ${JSON.stringify(r.stdout.toString())}` : ''
  }\n  stderr: ${r.stderr.slice(-2000) || '(empty)'}`;
}

function spawnKubectl(bin: string, args: readonly string[], o: Omit<KubectlRunOptions, 'timeoutMs' | 'hashStdout'>): ChildProcess {
  const stdinMode = o.stdin === undefined || o.stdin === 'ignore' ? 'ignore' : 'pipe';
  const child = spawn(bin, ['--kubeconfig', o.kubeconfig, ...args], {
    env: kubectlEnv(o.kubeconfig, o.env),
    stdio: [stdinMode, 'pipe', 'pipe'],
    cwd: o.cwd,
    shell: false,
  });
  if (child.stdin) {
    // kubectl may exit (or fail) before reading all input; that shows up in its exit code, not as EPIPE here.
    child.stdin.on('error', () => {});
    if (Buffer.isBuffer(o.stdin)) child.stdin.end(o.stdin);
    else if (o.stdin instanceof Readable) o.stdin.pipe(child.stdin);
  }
  return child;
}

/** Run kubectl to completion without a shell and collect its output. */
export function runKubectl(bin: string, args: readonly string[], o: KubectlRunOptions): Promise<KubectlResult> {
  const command = describeCommand(bin, args, o.env);
  const started = performance.now();
  const child = spawnKubectl(bin, args, o);
  const sink = new HashingSink();
  const chunks: Buffer[] = [];
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => {
    sink.write(c);
    if (!o.hashStdout) chunks.push(c);
  });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (c: string) => {
    stderr += c;
  });
  return new Promise((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, o.timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`could not start ${command}: ${err.message}`));
    });
    // 'close' (not 'exit') so stdout/stderr are fully drained.
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const durationMs = performance.now() - started;
      if (timedOut) {
        reject(new KubectlTimeoutError(command, o.timeoutMs, sink.byteLength, stderr));
        return;
      }
      sink.end(() => {
        resolve({ command, code, signal, stdout: Buffer.concat(chunks), stdoutDigest: sink.digest(), stderr, durationMs });
      });
    });
  });
}

/** A long-running kubectl (port-forward, attach…) with helpers to wait on its output and stop it. */
export interface RunningKubectl {
  child: ChildProcess;
  command: string;
  /** Everything printed so far. */
  output(): { stdout: string; stderr: string };
  /** Resolve with the first match of `re` on stdout+stderr; reject on exit or timeout. */
  waitForOutput(re: RegExp, timeoutMs: number): Promise<RegExpExecArray>;
  /** Send `signal` (default SIGINT) and wait for exit; SIGKILL after `timeoutMs`. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; killed: boolean }>;
}

/** Start kubectl in the background (stdout/stderr collected as text). Always stop() it. */
export function startKubectl(bin: string, args: readonly string[], o: Omit<KubectlRunOptions, 'timeoutMs' | 'hashStdout'>): RunningKubectl {
  const command = describeCommand(bin, args, o.env);
  const child = spawnKubectl(bin, args, o);
  let stdout = '';
  let stderr = '';
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const listeners = new Set<() => void>();
  const notify = (): void => listeners.forEach((l) => l());
  child.stdout!.setEncoding('utf8').on('data', (c: string) => ((stdout += c), notify()));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => ((stderr += c), notify()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('close', (code, signal) => {
      exited = { code, signal };
      notify();
      resolve(exited);
    });
    child.once('error', (err) => {
      stderr += `\n[spawn error] ${err.message}`;
      exited = { code: null, signal: null };
      notify();
      resolve(exited);
    });
  });
  return {
    child,
    command,
    output: () => ({ stdout, stderr }),
    waitForOutput(re, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const m = re.exec(stdout + '\n' + stderr);
          if (m) return done(() => resolve(m));
          if (exited)
            return done(() =>
              reject(new Error(`${command} exited (code=${exited!.code} signal=${exited!.signal}) before printing ${re}\n  stdout: ${stdout}\n  stderr: ${stderr}`)),
            );
        };
        const timer = setTimeout(
          () => done(() => reject(new Error(`${command}: no ${re} after ${timeoutMs} ms\n  stdout: ${stdout}\n  stderr: ${stderr}`))),
          timeoutMs,
        );
        const done = (f: () => void): void => {
          clearTimeout(timer);
          listeners.delete(check);
          f();
        };
        listeners.add(check);
        check();
      });
    },
    async stop(signal = 'SIGINT', timeoutMs = 10_000) {
      if (!exited) child.kill(signal);
      let killed = false;
      const timer = setTimeout(() => {
        killed = true;
        child.kill('SIGKILL');
      }, timeoutMs);
      const r = await exit;
      clearTimeout(timer);
      return { ...r, killed };
    },
  };
}

/** Toggles that make kubectl 1.29+ use SPDY for exec/attach/cp and port-forward. */
export const FORCE_SPDY_ENV: Readonly<Record<string, string>> = Object.freeze({
  KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false',
  KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false',
});
