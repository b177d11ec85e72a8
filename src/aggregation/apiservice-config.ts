/**
 * `--apiservice-config FILE`: the registered APIServices, loaded at start-up and re-read when the
 * file changes, without a restart.
 *
 * The file is watched as every reloadable file of the proxy is (`src/file-watch.ts`: the directory, for
 * a ConfigMap's symlink swap, debounced, backed by a low-frequency stat poll, reloads never
 * overlapping); a reload that finds the same bytes does nothing.
 *
 * A valid new set is emitted as `change`. An invalid one (or an unreadable file) is logged through
 * the injected logger and emitted as `rejected`; the last good set stays in force. The start-up load
 * throws the {@link ConfigError} instead, with the same message.
 */
import { EventEmitter } from 'node:events';
import { readFile } from 'node:fs/promises';
import { ConfigError } from '../errors.js';
import { FileWatch } from '../file-watch.js';
import { parseAPIServices, type APIService } from './apiservice.js';

/** Quiet period after a file-system event before the file is read (a swap is several events). */
export const DEFAULT_DEBOUNCE_MS = 100;

/** Interval of the stat poll that backs up the watcher; low frequency, the watcher is the fast path. */
export const DEFAULT_POLL_INTERVAL_MS = 5_000;

/** Where reload outcomes are reported (a pino logger fits). */
export interface APIServiceConfigLogger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

/** Options of {@link APIServiceConfig.load}. */
export interface APIServiceConfigOptions {
  /** Reload outcomes and insecureSkipTLSVerify warnings; silent when unset. */
  logger?: APIServiceConfigLogger;
  /** Debounce of file-system events, in milliseconds. */
  debounceMs?: number;
  /** Stat poll interval in milliseconds; 0 turns the poll off. */
  pollIntervalMs?: number;
  /** Watch the directory with fs.watch (default true); off leaves only the poll. */
  watch?: boolean;
}

/** The events of {@link APIServiceConfig}. */
export interface APIServiceConfigEvents {
  /** A new, valid set of APIServices is in force. */
  change: [apiServices: readonly APIService[]];
  /** A reload failed; the previous set stays in force. */
  rejected: [error: ConfigError];
}

const SILENT: APIServiceConfigLogger = { info() {}, warn() {}, error() {} };

function readError(path: string, e: unknown): ConfigError {
  const code = (e as NodeJS.ErrnoException).code;
  return new ConfigError(`--apiservice-config ${path}: cannot read the file${code ? ` (${code})` : ''}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
}

function warnInsecure(log: APIServiceConfigLogger, set: readonly APIService[]): void {
  for (const a of set) {
    if (a.spec.insecureSkipTLSVerify) {
      log.warn(`APIService ${a.metadata.name}: insecureSkipTLSVerify is set; the backend's serving certificate is not verified`);
    }
  }
}

/** The APIServices of one config file, kept current as the file changes. */
export class APIServiceConfig extends EventEmitter<APIServiceConfigEvents> {
  #current: readonly APIService[];
  #goodText: string;
  /** The bytes last read (good or not), so an unchanged file is not re-parsed or re-logged. */
  #seenText: string | undefined;
  #watch: FileWatch | undefined;
  #closed = false;
  readonly #log: APIServiceConfigLogger;

  private constructor(readonly path: string, text: string, set: readonly APIService[], private readonly options: APIServiceConfigOptions) {
    super();
    this.#current = set;
    this.#goodText = text;
    this.#seenText = text;
    this.#log = options.logger ?? SILENT;
  }

  /**
   * Read and validate `path`, then start watching it. Throws {@link ConfigError} when the file
   * cannot be read or holds an invalid APIService.
   */
  static async load(path: string, options: APIServiceConfigOptions = {}): Promise<APIServiceConfig> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      throw readError(path, e);
    }
    const set = parseAPIServices(text, path);
    const config = new APIServiceConfig(path, text, set, options);
    warnInsecure(config.#log, set);
    config.#watch = new FileWatch(path, () => config.#reloadOnce(), {
      debounceMs: options.debounceMs ?? DEFAULT_DEBOUNCE_MS,
      pollIntervalMs: options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
      poll: 'stat',
      ...(options.watch !== undefined ? { watch: options.watch } : {}),
      onWatchError: (message) => config.#log.warn(`--apiservice-config ${path}: ${message}`),
    });
    return config;
  }

  /** The APIServices in force (the last good set). */
  get current(): readonly APIService[] {
    return this.#current;
  }

  /**
   * Re-read the file now (also what the watcher and the poll call). Resolves when a read that
   * started after this call is done; calls during a read coalesce into one more read.
   */
  reload(): Promise<void> {
    return this.#watch?.trigger() ?? Promise.resolve();
  }

  /** Stop watching; no events are emitted afterwards. */
  close(): void {
    this.#closed = true;
    this.#watch?.close();
  }

  async #reloadOnce(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (e) {
      if (this.#seenText === undefined) return; // already reported
      this.#seenText = undefined;
      this.#reject(readError(this.path, e));
      return;
    }
    if (this.#closed || text === this.#seenText) return;
    this.#seenText = text;
    let set: APIService[];
    try {
      set = parseAPIServices(text, this.path);
    } catch (e) {
      this.#reject(e instanceof ConfigError ? e : new ConfigError(String(e), { cause: e }));
      return;
    }
    if (text === this.#goodText) {
      this.#log.info(`--apiservice-config ${this.path}: back to the configuration in force (${set.length} APIServices)`);
      return;
    }
    this.#goodText = text;
    this.#current = set;
    warnInsecure(this.#log, set);
    this.#log.info(`--apiservice-config ${this.path}: reloaded, ${set.length} APIServices: ${set.map((a) => a.metadata.name).join(', ') || '(none)'}`);
    this.emit('change', set);
  }

  #reject(error: ConfigError): void {
    this.#log.error(`${error.message}\n(reload rejected; keeping the previous ${this.#current.length} APIServices)`);
    this.emit('rejected', error);
  }
}
