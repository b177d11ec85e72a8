/**
 * Issue 24, logs: on a terminal `npm start` prints lines for people, no JSON; in a pipe (a pod, a
 * log collector) the same demo prints JSON lines; `--logging-format` overrides the guess.
 * The terminal is a real one: tmux runs `npm start` in a pane, and a kubectl exec through the proxy
 * makes it log a session (the audit line).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { findKubectl, kubectlEnv } from '../helpers/kubectl.js';
import { startDemo } from '../helpers/demo.js';
import { startTmux, type TmuxSession } from '../helpers/tty.js';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'ksp-logs-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Wait for the banner; the kubeconfig then points at the proxy. */
async function serverOf(kubeconfig: string, tty: TmuxSession): Promise<void> {
  await tty.waitForScreen((s) => s.includes('try:'), 60_000);
  expect(readFileSync(kubeconfig, 'utf8')).toMatch(/http:\/\/127\.0\.0\.1:\d+/);
}

describe('logs on a terminal and in a pipe', () => {
  it('npm start on a terminal prints human lines, no JSON, also for a session it logs', async () => {
    const kubeconfig = join(work, 'tty', 'kubeconfig');
    const tty = await startTmux({ argv: ['npm', 'start', '--', '--listen', '127.0.0.1:0', '--kubeconfig', kubeconfig], env: process.env, cwd: ROOT, width: 200, height: 50 });
    try {
      await serverOf(kubeconfig, tty);
      const exec = await run(findKubectl('1.33'), ['exec', 'demo', '--', 'echo', 'hello-terminal'], { env: kubectlEnv(kubeconfig) });
      expect(exec.stdout).toBe('hello-terminal\n');
      // The session's audit line, in text.
      await tty.waitForScreen((s) => /INFO.*streaming session/.test(s), 30_000);
      const all = await tty.tmux('capture-pane', '-p', '-J', '-S', '-', '-t', 'main');
      const lines = all.split('\n').filter((l) => l.trim() !== '');
      expect(lines.filter((l) => /^\s*\{"/.test(l) || /"level":\d+/.test(l))).toEqual([]);
      expect(lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO/.test(l))).toBe(true);
      // Ctrl-C goes to the whole foreground group (npm, node, the wrapper shell): the demo drains and the pane dies.
      await tty.tmux('send-keys', '-t', 'main', 'C-c');
      await tty.waitForScreen((s) => s.includes('shut down'), 30_000);
    } finally {
      await tty.kill();
    }
  });

  it('the same demo in a pipe prints JSON lines; --logging-format text and --log-level change that', async () => {
    mkdirSync(join(work, 'pipe'));
    mkdirSync(join(work, 'pipe-text'));
    const json = await startDemo(join(work, 'pipe'), ['--listen', '127.0.0.1:0']);
    try {
      const logLines = json.output().split('\n').filter((l) => l.startsWith('{'));
      expect(logLines.length).toBeGreaterThan(0);
      for (const l of logLines) expect(JSON.parse(l)).toHaveProperty('level');
    } finally {
      await json.stop();
    }
    const text = await startDemo(join(work, 'pipe-text'), ['--listen', '127.0.0.1:0', '--logging-format', 'text', '--log-level', 'warn']);
    try {
      expect(text.output()).not.toMatch(/^\{"level"/m);
      // At warn, the info lines (the listener, the heap floor) are not written.
      expect(text.output()).not.toMatch(/INFO/);
    } finally {
      await text.stop();
    }
  });
});
