/**
 * Test helpers for session recording through the real proxy (`startServer` with the recording
 * flags, as `serve` runs it): a policy file, the proxy's log lines (the audit line carries the
 * recording id), reading a stored cast and its index entry, and `sessions play` under tmux.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { expect } from 'vitest';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import type { RecordingSummary } from '../../src/recording/sink.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { hasLine, startTmux } from '../helpers/tty.js';
import { waitFor } from '../helpers/wait.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const CLI = join(ROOT, 'bin/kube-stream-proxy.js');

/** A SessionRecordingConfiguration with one rule. */
export function policyYaml(rule: { match?: string; record?: 'output' | 'full'; enforce?: boolean } = {}): string {
  return [
    'apiVersion: kube-stream-proxy.io/v1alpha1',
    'kind: SessionRecordingConfiguration',
    'rules:',
    '- name: test',
    `  match: ${rule.match ?? '{namespaces: [default]}'}`,
    `  record: ${rule.record ?? 'output'}`,
    ...(rule.enforce ? ['  enforce: true'] : []),
    '',
  ].join('\n');
}

/** A proxy with recording on, and what it logged. */
export interface RecordingProxy {
  proxy: RunningServer;
  url: string;
  registry: Registry;
  /** Every JSON log line so far. */
  lines: Array<Record<string, any>>;
  /** The audit lines (one per streaming session). */
  audits(): Array<Record<string, any>>;
  /** Wait for the `n`th audit line (1-based) and return it. */
  audit(n: number, timeoutMs?: number): Promise<Record<string, any>>;
  close(): Promise<void>;
}

/** Start the proxy with `flags` (listen on loopback; the caller gives upstream and recording flags). */
export async function startRecordingProxy(flags: ServeFlags): Promise<RecordingProxy> {
  const lines: Array<Record<string, any>> = [];
  let partial = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      partial += chunk.toString();
      let at: number;
      while ((at = partial.indexOf('\n')) >= 0) {
        const line = partial.slice(0, at);
        partial = partial.slice(at + 1);
        try {
          lines.push(JSON.parse(line));
        } catch {
          // not JSON: ignored
        }
      }
      cb();
    },
  });
  const registry = new Registry();
  const proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', ...flags }), { registry, logger: { level: 'info', stream } });
  const audits = (): Array<Record<string, any>> => lines.filter((l) => l.audit === true);
  return {
    proxy,
    url: proxy.url,
    registry,
    lines,
    audits,
    audit: (n, timeoutMs = 15_000) => waitFor(`audit line ${n}`, async () => audits()[n - 1], timeoutMs, 50),
    close: () => proxy.close(),
  };
}

/** A stored recording: its index entry and its cast, parsed. */
export interface StoredRecording {
  summary: RecordingSummary;
  text: string;
  header: Record<string, any>;
  events: Array<[number, string, string]>;
}

/** Wait for recording `id`'s index entry in `dir` (written when the recording ends), then read both files. */
export async function storedRecording(dir: string, id: string, timeoutMs = 15_000): Promise<StoredRecording> {
  const json = join(dir, `${id}.json`);
  await waitFor(`${json}`, async () => (existsSync(json) ? true : undefined), timeoutMs, 50);
  const summary = JSON.parse(readFileSync(json, 'utf8')) as RecordingSummary;
  const cast = join(dir, `${id}.cast`);
  const text = existsSync(cast) ? readFileSync(cast, 'utf8') : '';
  const lines = text.split('\n').filter((l) => l !== '');
  return {
    summary,
    text,
    header: lines.length > 0 ? JSON.parse(lines[0]!) : {},
    events: lines.slice(1).map((l) => JSON.parse(l) as [number, string, string]),
  };
}

/** The `o` events' text joined. */
export function outputOf(events: Array<[number, string, string]>): string {
  return events.filter((e) => e[1] === 'o').map((e) => e[2]).join('');
}

/**
 * Asciicast v2 as the spec (and asciinema 2.2's loader) wants it: a header object with version 2 and
 * positive width/height, then one `[time, code, data]` array per line, times never going backwards,
 * codes o/i/r/m, no blank lines.
 */
export function expectValidAsciicastV2(text: string): void {
  expect(text.endsWith('\n')).toBe(true);
  const lines = text.slice(0, -1).split('\n');
  expect(lines.every((l) => l !== '')).toBe(true);
  const header = JSON.parse(lines[0]!);
  expect(header).toMatchObject({ version: 2, width: expect.any(Number), height: expect.any(Number) });
  expect(header.width).toBeGreaterThan(0);
  expect(header.height).toBeGreaterThan(0);
  let last = 0;
  for (const l of lines.slice(1)) {
    const e = JSON.parse(l);
    expect(Array.isArray(e) && e.length === 3, l).toBe(true);
    expect(typeof e[0] === 'number' && e[0] >= last, l).toBe(true);
    expect(['o', 'i', 'r', 'm']).toContain(e[1]);
    expect(typeof e[2]).toBe('string');
    last = e[0];
  }
}

/** Write a file and return its path. */
export function writeText(path: string, text: string): string {
  writeFileSync(path, text);
  return path;
}

/**
 * `sessions play ID --dir DIR` under tmux at `width`×`height`; resolves with the final screen lines
 * (the player's own exit line last). The player runs under a shell that stays, so the pane does not die.
 */
export async function playUnderTmux(id: string, dir: string, width: number, height: number, cwd: string): Promise<string[]> {
  const play = `${process.execPath} ${CLI} sessions play ${id} --dir ${dir} --idle-time-limit 0.05; echo play-exit=$?; sleep 600`;
  const player = await startTmux({ argv: ['sh', '-c', play], env: { PATH: process.env.PATH }, width, height, cwd });
  try {
    return (await player.waitForScreen(hasLine('play-exit=0'), 30_000)).split('\n');
  } finally {
    await player.kill();
  }
}

/**
 * The live screen (taken at the prompt before `exit N` was typed) against the played one: the same
 * lines, the played prompt line followed by the typed `exit N`, then the player's exit line.
 */
export function expectPlayedAsLive(played: string[], live: string, exitCommand: string): void {
  const liveLines = live.split('\n');
  expect(played.slice(0, liveLines.length - 1)).toEqual(liveLines.slice(0, -1));
  expect(played[liveLines.length - 1]).toBe(`${liveLines.at(-1)} ${exitCommand}`);
  expect(played[liveLines.length]).toBe('play-exit=0');
}

/** `kube-stream-proxy recorder` as its own process (the built CLI), which a test may SIGKILL. */
export interface RecorderProcess {
  url: string;
  port: number;
  child: ChildProcess;
  kill(signal: NodeJS.Signals): Promise<void>;
}

/**
 * Start the recorder on `port` (0: a free one) storing into `dir`, with `work`'s `ingest.csv`
 * (replicas) and `viewers.csv` (viewers of group `auditors`); resolves once it listens.
 */
export async function startRecorderProcess(dir: string, work: string, port = 0): Promise<RecorderProcess> {
  const child = spawn(process.execPath, [CLI, 'recorder', '--listen', `127.0.0.1:${port}`, '--dir', dir, '--ingest-token-file', join(work, 'ingest.csv'), '--viewer-token-file', join(work, 'viewers.csv'), '--viewer-group', 'auditors'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+),/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => reject(new Error(`recorder exited ${code}: ${out}`)));
  });
  return {
    url,
    port: Number(new URL(url).port),
    child,
    kill: async (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
