/**
 * Watching one configuration file for changes, the one mechanism behind every reloadable file of the
 * proxy (`--apiservice-config`, `--authentication-config`, `--session-recording-config`). A mounted
 * ConfigMap changes under the process by a symlink swap (`FILE -> ..data/FILE`, a new `..data`
 * renamed into place), so the watch is on the file's DIRECTORY (`fs.watch`), not on the inode the
 * swap leaves behind; events are debounced (a swap is several), and a low-frequency poll backs the
 * watcher up (watchers miss events, or are unavailable on some mounts). Reloads never overlap: a
 * trigger during a reload makes exactly one more. What a reload does (read, compare, parse, apply or
 * keep the last good) is the owner's.
 */
import { watch, type FSWatcher } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Options of {@link FileWatch}. */
export interface FileWatchOptions {
  /** Quiet period after a file-system event before the reload, ms. */
  debounceMs: number;
  /** Interval of the backing poll, ms; 0 turns it off. */
  pollIntervalMs: number;
  /**
   * What the poll does: `stat` reloads only when the file's inode, size or mtime changed (cheap);
   * `always` reloads every time (kube-apiserver re-reads its authentication configuration every
   * minute whatever the watcher says).
   */
  poll: 'stat' | 'always';
  /** fs.watch on the directory (default true); off leaves only the poll. */
  watch?: boolean;
  /** Told when the directory cannot be watched (the poll still runs). */
  onWatchError?: (message: string) => void;
}

/** Watches `path` and runs `reload` when it may have changed. */
export class FileWatch {
  readonly #path: string;
  readonly #reload: () => Promise<void>;
  readonly #o: FileWatchOptions;
  #watcher: FSWatcher | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #poll: NodeJS.Timeout | undefined;
  #statKey: string | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #closed = false;

  constructor(path: string, reload: () => Promise<void>, options: FileWatchOptions) {
    this.#path = path;
    this.#reload = reload;
    this.#o = options;
    if (options.watch !== false) {
      try {
        this.#watcher = watch(dirname(path), { persistent: false }, () => this.#schedule());
        this.#watcher.on('error', (e) => {
          options.onWatchError?.(`file watch failed (${e.message}); relying on the ${options.pollIntervalMs} ms poll`);
          this.#watcher?.close();
          this.#watcher = undefined;
        });
      } catch (e) {
        options.onWatchError?.(`cannot watch the directory (${(e as Error).message}); relying on the ${options.pollIntervalMs} ms poll`);
      }
    }
    if (options.pollIntervalMs > 0) {
      if (options.poll === 'stat') void statKeyOf(path).then((k) => (this.#statKey ??= k), () => undefined);
      this.#poll = setInterval(() => void this.#pollOnce(), options.pollIntervalMs);
      this.#poll.unref();
    }
  }

  /**
   * Reload now (also what the watcher and the poll call). Resolves when a reload that started after
   * this call is done; calls during a reload coalesce into one more.
   */
  trigger(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#running = (async () => {
      try {
        do {
          this.#again = false;
          await this.#reload();
        } while (this.#again && !this.#closed);
      } finally {
        this.#running = undefined;
      }
    })();
    return this.#running;
  }

  /** Stop watching; no reload starts afterwards. */
  close(): void {
    this.#closed = true;
    this.#watcher?.close();
    this.#watcher = undefined;
    clearTimeout(this.#debounce);
    clearInterval(this.#poll);
  }

  #schedule(): void {
    if (this.#closed) return;
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => void this.trigger(), this.#o.debounceMs);
    this.#debounce.unref();
  }

  async #pollOnce(): Promise<void> {
    if (this.#o.poll === 'always') return void (await this.trigger());
    const key = await statKeyOf(this.#path).catch(() => 'missing');
    if (key === this.#statKey) return;
    this.#statKey = key;
    this.#schedule();
  }
}

/** What the stat poll compares: inode, size and mtime of the file the path resolves to. */
async function statKeyOf(path: string): Promise<string> {
  const s = await stat(path);
  return `${s.ino}:${s.size}:${s.mtimeMs}`;
}
