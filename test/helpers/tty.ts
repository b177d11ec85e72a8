/**
 * Running an interactive command (e.g. `kubectl exec -it demo -- sh`) under a real terminal: a private
 * tmux server (`tmux -L <unique socket>`), driven with send-keys and read with capture-pane.
 * Always call {@link TmuxSession.kill} (it kills the whole tmux server).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

/** Options of {@link startTmux}. */
export interface TmuxOptions {
  /** argv of the program to run in the pane (no shell interpretation; a wrapper `sh` records its exit status). */
  argv: readonly string[];
  /** Environment of the tmux server, hence of the program (TERM is set by tmux). */
  env: NodeJS.ProcessEnv;
  /** Terminal size; default 100 x 30. */
  width?: number;
  height?: number;
  cwd?: string;
}

/** A pane running one program. */
export interface TmuxSession {
  /** The `-L` socket name. */
  socket: string;
  /** Run a tmux command on this server (args after `tmux -L <socket>`); returns stdout. */
  tmux(...args: string[]): Promise<string>;
  /** Type literal text (no Enter). */
  type(text: string): Promise<void>;
  /** Type a line of text and press Enter. */
  sendLine(text: string): Promise<void>;
  /** Current visible screen, one string with '\n' between rows, trailing blanks trimmed. */
  screen(): Promise<string>;
  /**
   * Poll capture-pane (every 50 ms) until `predicate(screen)` holds; rejects with the last screen after
   * `timeoutMs`. `onPoll`, if given, runs every `retryEveryMs` (e.g. to re-send a query whose
   * answer depends on asynchronous state such as a resize reaching the remote side).
   */
  waitForScreen(predicate: (screen: string) => boolean, timeoutMs: number, retry?: { onPoll: () => Promise<void>; retryEveryMs: number }): Promise<string>;
  /** `resize-window -x W -y H`, then wait until the pane reports that size. */
  resize(width: number, height: number): Promise<void>;
  /** Whether the program has exited, and its exit status (recorded by a wrapper shell; the pane is kept by remain-on-exit). */
  paneStatus(): Promise<{ dead: boolean; exitStatus: number | undefined }>;
  /** Poll until the program has exited and tmux has its exit status; returns that status. */
  waitForExit(timeoutMs: number): Promise<number | undefined>;
  /** Kill the tmux server and remove temp files. Safe to call twice. */
  kill(): Promise<void>;
}

function shQuote(a: string): string {
  return `'${a.replace(/'/g, `'\\''`)}'`;
}

/** True if a tmux binary can be run. */
export async function tmuxAvailable(): Promise<boolean> {
  try {
    await execFileP('tmux', ['-V']);
    return true;
  } catch {
    return false;
  }
}

/** Start a detached tmux session on a private server running `argv`. */
export async function startTmux(o: TmuxOptions): Promise<TmuxSession> {
  const socket = `ksp-test-${process.pid}-${randomBytes(4).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'ksp-tmux-'));
  const conf = join(dir, 'tmux.conf');
  // remain-on-exit keeps the pane (and its exit status) after the program ends;
  // a plain 'sh' default-shell avoids user shell start-up files.
  writeFileSync(conf, 'set -g remain-on-exit on\nset -g default-shell /bin/sh\nset -g history-limit 5000\n');
  const env: NodeJS.ProcessEnv = { ...o.env };
  delete env.TMUX;
  delete env.TMUX_PANE;
  const tmux = async (...args: string[]): Promise<string> => {
    try {
      const { stdout } = await execFileP('tmux', ['-L', socket, '-f', conf, ...args], { env, cwd: o.cwd, maxBuffer: 16 << 20 });
      return stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`tmux ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
    }
  };
  const width = o.width ?? 100;
  const height = o.height ?? 30;
  // A wrapper shell records the exit status in a file: under load tmux sometimes marks the pane dead
  // (pty EOF) long before it reaps the child, leaving #{pane_dead_status} empty.
  const statusFile = join(dir, 'exit-status');
  const command = `exec /bin/sh -c ${shQuote('"$@"; echo $? > "$0.tmp" && mv "$0.tmp" "$0"')} ${[statusFile, ...o.argv].map(shQuote).join(' ')}`;
  try {
    await tmux('new-session', '-d', '-s', 'main', '-x', String(width), '-y', String(height), ...(o.cwd ? ['-c', o.cwd] : []), command);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`${(err as Error).message}\n(the kubectl TTY tests need tmux installed: apt-get install tmux)`);
  }
  let killed = false;
  const screen = async (): Promise<string> =>
    (await tmux('capture-pane', '-p', '-t', 'main'))
      .split('\n')
      .map((l) => l.replace(/\s+$/, ''))
      .join('\n')
      .replace(/\n+$/, '');
  const session: TmuxSession = {
    socket,
    tmux,
    async type(text) {
      await tmux('send-keys', '-t', 'main', '-l', text);
    },
    async sendLine(text) {
      await tmux('send-keys', '-t', 'main', '-l', text);
      await tmux('send-keys', '-t', 'main', 'Enter');
    },
    screen,
    async waitForScreen(predicate, timeoutMs, retry) {
      const deadline = Date.now() + timeoutMs;
      let nextRetry = retry ? Date.now() + retry.retryEveryMs : Infinity;
      let last = '';
      for (;;) {
        // Read the status first: if the program had already exited, this screen is its last one.
        const st = await session.paneStatus();
        last = await screen();
        if (predicate(last)) return last;
        if (st.dead) {
          throw new Error(`waitForScreen: the program exited with status ${st.exitStatus} before the screen matched. Screen:\n----\n${last}\n----`);
        }
        if (Date.now() > deadline) {
          throw new Error(`waitForScreen timed out after ${timeoutMs} ms (program still running). Screen:\n----\n${last}\n----`);
        }
        if (retry && Date.now() >= nextRetry) {
          await retry.onPoll();
          nextRetry = Date.now() + retry.retryEveryMs;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async resize(w, h) {
      await tmux('resize-window', '-t', 'main', '-x', String(w), '-y', String(h));
      const deadline = Date.now() + 5000;
      for (;;) {
        const size = (await tmux('display-message', '-p', '-t', 'main', '#{pane_width}x#{pane_height}')).trim();
        if (size === `${w}x${h}`) return;
        if (Date.now() > deadline) throw new Error(`tmux pane is ${size} after resize-window -x ${w} -y ${h}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async paneStatus() {
      let exitStatus: number | undefined;
      try {
        exitStatus = Number(readFileSync(statusFile, 'utf8').trim());
      } catch {
        // Not exited yet.
      }
      if (exitStatus !== undefined) return { dead: true, exitStatus };
      const dead = (await tmux('display-message', '-p', '-t', 'main', '#{pane_dead}')).trim() === '1';
      return { dead, exitStatus };
    },
    async waitForExit(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const st = await session.paneStatus();
        if (st.exitStatus !== undefined) return st.exitStatus;
        if (Date.now() > deadline) {
          const raw = (await tmux('display-message', '-p', '-t', 'main', 'dead=#{pane_dead} pid=#{pane_pid} cmd=#{pane_current_command}')).trim();
          throw new Error(`program has not exited (with a status) after ${timeoutMs} ms [${raw}]. Screen:\n----\n${await screen()}\n----`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async kill() {
      if (killed) return;
      killed = true;
      try {
        await execFileP('tmux', ['-L', socket, 'kill-server'], { env });
      } catch {
        // Already gone (e.g. the server exited with its last session).
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return session;
}

/** A screen predicate: some line of the screen, trimmed, is exactly `line`. */
export function hasLine(line: string): (screen: string) => boolean {
  return (s) => s.split('\n').some((l) => l.trim() === line);
}

/**
 * In a shell started in a 100×30 window (kubectl exec -it … sh): wait until the shell answers, see
 * `stty size` print `30 100`, resize the window to 120×40 and see `stty size` print `40 120`. Rejects
 * (with the last screen) when a step does not show within its time.
 */
export async function expectShellFollowsResize(tty: TmuxSession): Promise<void> {
  // $((6*7)) makes the expected line differ from the echoed command line.
  const ping = (): Promise<void> => tty.sendLine('echo READY-$((6*7))');
  await ping();
  await tty.waitForScreen(hasLine('READY-42'), 30_000, { onPoll: ping, retryEveryMs: 3000 });
  // Re-asking is polling: the size travels on kubectl's resize stream, asynchronously to stdin.
  const size = (): Promise<void> => tty.sendLine('stty size');
  await size();
  await tty.waitForScreen(hasLine('30 100'), 15_000, { onPoll: size, retryEveryMs: 1000 });
  await tty.resize(120, 40);
  await size();
  await tty.waitForScreen(hasLine('40 120'), 15_000, { onPoll: size, retryEveryMs: 1000 });
}
