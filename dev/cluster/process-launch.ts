/**
 * How the dev cluster starts local processes for a pod: environment, executable lookup, exit codes
 * and killing a whole process group.
 */
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { constants as osConstants } from 'node:os';

/** The PATH every pod process gets (the host's, so the usual tools are found). */
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Where and as what a pod's processes run. */
export interface LaunchTarget {
  /** Pod name (becomes HOSTNAME). */
  podName: string;
  /** The pod's working directory (cwd and HOME). */
  workDir: string;
}

/** The small environment of a pod process: PATH, HOME = pod dir, HOSTNAME = pod name (+ TERM with a tty). */
export function podEnv(target: LaunchTarget, tty: boolean): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH || DEFAULT_PATH,
    HOME: target.workDir,
    HOSTNAME: target.podName,
  };
  if (tty) env.TERM = 'xterm';
  return env;
}

/**
 * Find `file` the way execvp would (a name with a slash is taken as is). Throws an Error phrased like
 * the container runtime's when it is missing, so callers can report it before forking.
 */
export function resolveExecutable(file: string, env: Record<string, string>): string {
  const candidates = file.includes('/') ? [file] : (env.PATH ?? DEFAULT_PATH).split(delimiter).map((d) => join(d || '.', file));
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // try the next one
    }
  }
  throw new Error(`exec: "${file}": executable file not found in $PATH`);
}

/** The shell-style exit code of a finished process: its code, or 128 + signal number. */
export function exitCodeOf(code: number | null, signal: NodeJS.Signals | number | null): number {
  if (code !== null) return code & 0xff;
  if (typeof signal === 'number' && signal > 0) return (128 + signal) & 0xff;
  if (typeof signal === 'string') return (128 + (osConstants.signals[signal] ?? 0)) & 0xff;
  return 1;
}

/** Send `signal` to the process group led by `pid` (falls back to the process alone). */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/** How long a process gets between SIGTERM and SIGKILL when a session is aborted. */
export const KILL_GRACE_MS = 2000;
