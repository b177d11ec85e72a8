/**
 * The file watch behind every reloadable file (`src/file-watch.ts`): a ConfigMap-style symlink swap
 * is seen through the directory watch, the stat poll alone sees a change when watching is off,
 * triggers during a reload coalesce into one more, and nothing runs after close.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileWatch } from '../../src/file-watch.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A ConfigMap volume: FILE -> ..data/FILE, ..data -> ..v1. */
function configMap(text: string): { dir: string; file: string; swap(next: string, version: string): void } {
  const dir = mkdtempSync(join(tmpdir(), 'ksp-watch-'));
  dirs.push(dir);
  const version = (v: string, t: string): void => {
    mkdirSync(join(dir, v));
    writeFileSync(join(dir, v, 'config.yaml'), t);
  };
  version('..v1', text);
  symlinkSync('..v1', join(dir, '..data'));
  symlinkSync('..data/config.yaml', join(dir, 'config.yaml'));
  return {
    dir,
    file: join(dir, 'config.yaml'),
    swap: (next, v) => {
      version(v, next);
      symlinkSync(v, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    },
  };
}

/** Resolves once `count()` reaches `n` (polled: the watch is asynchronous by nature). */
async function until(count: () => number, n: number, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (count() < n) {
    if (Date.now() > deadline) throw new Error(`only ${count()} of ${n} reloads after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('FileWatch', () => {
  it('sees a symlink swap of a ConfigMap through the directory watch', async () => {
    const cm = configMap('a: 1\n');
    let reloads = 0;
    const w = new FileWatch(cm.file, async () => void reloads++, { debounceMs: 20, pollIntervalMs: 0, poll: 'stat' });
    try {
      cm.swap('a: 2\n', '..v2');
      await until(() => reloads, 1);
    } finally {
      w.close();
    }
  });

  it('sees a change through the stat poll alone when watching is off', async () => {
    const cm = configMap('a: 1\n');
    let reloads = 0;
    const w = new FileWatch(cm.file, async () => void reloads++, { debounceMs: 10, pollIntervalMs: 30, poll: 'stat', watch: false });
    try {
      await new Promise((r) => setTimeout(r, 100));
      expect(reloads).toBe(0); // nothing changed: the poll reloads nothing
      cm.swap('a: 22\n', '..v2');
      await until(() => reloads, 1);
    } finally {
      w.close();
    }
  });

  it('coalesces triggers during a reload into one more, and runs nothing after close', async () => {
    const cm = configMap('a: 1\n');
    let reloads = 0;
    let release: () => void = () => undefined;
    const w = new FileWatch(cm.file, () => new Promise<void>((r) => {
      reloads++;
      release = r;
    }), { debounceMs: 10, pollIntervalMs: 0, poll: 'stat', watch: false });
    const first = w.trigger();
    const second = w.trigger();
    const third = w.trigger();
    expect(reloads).toBe(1);
    release();
    await until(() => reloads, 2);
    release();
    await Promise.all([first, second, third]);
    expect(reloads).toBe(2);
    w.close();
    await w.trigger();
    expect(reloads).toBe(2);
  });
});
