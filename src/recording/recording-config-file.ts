/**
 * `--session-recording-config FILE`: the recording policy, loaded at start-up and re-read when the
 * file changes (a mounted ConfigMap's symlink swap included: `src/file-watch.ts`, as for every reloadable file). A reload that fails — unreadable file,
 * bad YAML, invalid configuration — is logged with every field error, counted
 * (`kube_stream_proxy_session_recording_config_reloads_total{result="failure"}`, and the
 * `..._last_reload_successful` gauge goes to 0), and the last good policy stays in force.
 *
 * The start-up load throws a `ConfigError` naming the file and each bad field; the CLI exits 2.
 */
import { readFile } from 'node:fs/promises';
import { loadYaml } from '@kubernetes/client-node';
import { ConfigError } from '../errors.js';
import { FileWatch } from '../file-watch.js';
import type { RecordingPolicy } from './policy.js';
import { parseRecordingConfig, RecordingConfigInvalid } from './recording-config.js';
import type { RecordingMetrics } from './recording-metrics.js';

/** Quiet period after a file-system event before the file is read. */
export const RELOAD_DEBOUNCE_MS = 100;
/** Interval of the backing stat poll. */
export const RELOAD_POLL_MS = 5_000;

/** Where reload outcomes go (a pino logger fits). */
export interface RecordingConfigLogger {
  info(msg: string): void;
  error(msg: string): void;
}

/** Options of {@link RecordingConfigFile.load}. */
export interface RecordingConfigFileOptions {
  logger?: RecordingConfigLogger;
  metrics?: Pick<RecordingMetrics, 'incConfigReload' | 'setConfigHealthy'>;
  debounceMs?: number;
  /** 0 turns the poll off. */
  pollIntervalMs?: number;
  /** fs.watch on the directory (default true). */
  watch?: boolean;
}

const FLAG = '--session-recording-config';

/** Parse the text of a configuration file (YAML or JSON); throws ConfigError naming `path`. */
export function parseRecordingConfigText(path: string, text: string): RecordingPolicy {
  let doc: unknown;
  try {
    doc = loadYaml(text);
  } catch (e) {
    throw new ConfigError(`${FLAG} ${path}: not valid YAML: ${(e as Error).message.split('\n')[0]}`, { cause: e });
  }
  try {
    return parseRecordingConfig(doc);
  } catch (e) {
    if (!(e instanceof RecordingConfigInvalid)) throw e;
    throw new ConfigError(`${FLAG} ${path}: invalid SessionRecordingConfiguration:\n${e.errors.map((f) => `  ${f.field}: ${f.message}`).join('\n')}`, { cause: e });
  }
}

/** Read and parse `path` once (start-up); throws ConfigError. */
export async function loadRecordingConfig(path: string): Promise<RecordingPolicy> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`${FLAG} ${path}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`, { cause: e });
  }
  return parseRecordingConfigText(path, text);
}

/** The policy of one file, kept current. */
export class RecordingConfigFile {
  readonly path: string;
  #policy: RecordingPolicy;
  #seen: string;
  #watch: FileWatch | undefined;
  readonly #o: RecordingConfigFileOptions;

  private constructor(path: string, policy: RecordingPolicy, text: string, options: RecordingConfigFileOptions) {
    this.path = path;
    this.#policy = policy;
    this.#seen = text;
    this.#o = options;
  }

  /** Load `path` (throws ConfigError), then watch it. */
  static async load(path: string, options: RecordingConfigFileOptions = {}): Promise<RecordingConfigFile> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      throw new ConfigError(`${FLAG} ${path}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`, { cause: e });
    }
    const policy = parseRecordingConfigText(path, text);
    options.metrics?.incConfigReload('success');
    options.metrics?.setConfigHealthy(true);
    const f = new RecordingConfigFile(path, policy, text, options);
    f.#watch = new FileWatch(path, () => f.#reloadOnce(), {
      debounceMs: options.debounceMs ?? RELOAD_DEBOUNCE_MS,
      pollIntervalMs: options.pollIntervalMs ?? RELOAD_POLL_MS,
      poll: 'stat',
      ...(options.watch !== undefined ? { watch: options.watch } : {}),
    });
    return f;
  }

  /** The policy in force. */
  get policy(): RecordingPolicy {
    return this.#policy;
  }

  /** Re-read now; resolves when that read (and any it coalesced) is done. */
  reload(): Promise<void> {
    return this.#watch?.trigger() ?? Promise.resolve();
  }

  /** Stop watching. */
  close(): void {
    this.#watch?.close();
  }

  async #reloadOnce(): Promise<void> {
    const log = this.#o.logger;
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (e) {
      return this.#rejected(`${FLAG} ${this.path}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    if (text === this.#seen) return;
    this.#seen = text;
    let policy: RecordingPolicy;
    try {
      policy = parseRecordingConfigText(this.path, text);
    } catch (e) {
      return this.#rejected((e as Error).message);
    }
    this.#policy = policy;
    this.#o.metrics?.incConfigReload('success');
    this.#o.metrics?.setConfigHealthy(true);
    log?.info(`${FLAG} ${this.path}: reloaded, ${policy.rules.length} rules: ${policy.rules.map((r) => r.name).join(', ') || '(none)'}`);
  }

  #rejected(message: string): void {
    this.#o.metrics?.incConfigReload('failure');
    this.#o.metrics?.setConfigHealthy(false);
    this.#o.logger?.error(`${message}\n(reload rejected; keeping the previous ${this.#policy.rules.length} rules)`);
  }
}
