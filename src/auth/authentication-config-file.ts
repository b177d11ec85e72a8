/**
 * `--authentication-config FILE`: the file loaded at start-up (an invalid file is a
 * {@link ConfigError} naming the field, which the CLI turns into exit code 2) and re-read when it
 * changes, as kube-apiserver's `WatchUntil` handler does (`pkg/kubeapiserver/options/authentication.go`):
 * - the directory is watched (`src/file-watch.ts`: a Kubernetes ConfigMap changes by a symlink swap,
 *   which leaves the file's old inode behind), events are debounced, and the file is also re-read every
 *   {@link DEFAULT_AUTHENTICATION_CONFIG_POLL_INTERVAL_MS} (kube-apiserver: every minute);
 * - content equal (by SHA-256) to the last applied or rejected content does nothing;
 * - a file that cannot be read is a failure, retried at the next read;
 * - a file that does not decode or validate (including a change of `anonymous`, which a reload may
 *   not make) is a failure and is remembered, so it is not retried until its content changes;
 * - a valid file gets a new {@link JwtAuthenticator}, which must have every issuer's keys within
 *   {@link AUTHENTICATION_CONFIG_UPDATE_TIMEOUT_MS}; otherwise the reload fails (and is retried) and the
 *   old set stays. After a swap the old set is closed {@link OLD_AUTHENTICATOR_GRACE_MS} later.
 * Each outcome is logged and counted in `apiserver_authentication_config_controller_automatic_reloads_total`.
 */
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { readFile } from 'node:fs/promises';
import { isDeepStrictEqual } from 'node:util';
import { ConfigError } from '../errors.js';
import { FileWatch } from '../file-watch.js';
import { decodeAuthenticationConfiguration, type AuthenticationConfiguration } from './authentication-config.js';
import { validateAuthenticationConfiguration, type CompiledJwtAuthenticator } from './authentication-config-validation.js';
import { aggregateMessage, FieldPath, forbidden } from './field-errors.js';
import { JwtAuthenticator, type JwtAuthenticatorOptions } from './jwt-authenticator.js';
import type { JwtMetrics } from './jwt-metrics.js';

/** How often the file is re-read whatever the watcher says (kube-apiserver: 1 minute). */
export const DEFAULT_AUTHENTICATION_CONFIG_POLL_INTERVAL_MS = 60_000;

/** Quiet period after a file-system event before the file is read (a swap is several events). */
export const DEFAULT_AUTHENTICATION_CONFIG_DEBOUNCE_MS = 100;

/** How long a reloaded set may take to get every issuer's keys (kube-apiserver's `UpdateAuthenticationConfigTimeout`). */
export const AUTHENTICATION_CONFIG_UPDATE_TIMEOUT_MS = 60_000;

/** How long a replaced set keeps working for requests that picked it before the swap (kube-apiserver: 1 minute). */
export const OLD_AUTHENTICATOR_GRACE_MS = 60_000;

/** Where reload outcomes go (a pino logger fits). */
export interface AuthenticationConfigLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Options of {@link AuthenticationConfigFile.load}. */
export interface AuthenticationConfigFileOptions {
  logger?: AuthenticationConfigLogger;
  metrics?: JwtMetrics;
  /** Issuers no authenticator may claim (kube-apiserver: the service-account issuers). */
  disallowedIssuers?: readonly string[];
  /** Passed to every {@link JwtAuthenticator} built (clocks and intervals for tests). */
  authenticator?: Omit<JwtAuthenticatorOptions, 'metrics' | 'log'>;
  pollIntervalMs?: number;
  debounceMs?: number;
  updateTimeoutMs?: number;
  oldSetGraceMs?: number;
  /** Watch the directory (default true); off leaves the poll. */
  watch?: boolean;
}

/** The events of {@link AuthenticationConfigFile}. */
export interface AuthenticationConfigFileEvents {
  /** A new configuration is in force. */
  change: [authenticator: JwtAuthenticator, config: AuthenticationConfiguration];
  /** A reload failed; the previous configuration stays. */
  rejected: [error: Error];
}

const SILENT: AuthenticationConfigLogger = { info() {}, warn() {}, error() {} };
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

/** Decode and validate `text`; the compiled authenticators, or the error message. */
function parse(text: string, disallowedIssuers: readonly string[] | undefined, originalAnonymous?: { value: AuthenticationConfiguration['anonymous'] }): { config: AuthenticationConfiguration; compiled: CompiledJwtAuthenticator[] } | { error: string } {
  let config: AuthenticationConfiguration;
  try {
    config = decodeAuthenticationConfiguration(text);
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
  const { errors, authenticators } = validateAuthenticationConfiguration(config, disallowedIssuers ? { disallowedIssuers } : {});
  if (originalAnonymous && !isDeepStrictEqual(originalAnonymous.value, config.anonymous)) errors.push(forbidden(FieldPath.of('anonymous'), 'changed from initial configuration file'));
  if (errors.length) return { error: `invalid authentication configuration: ${aggregateMessage(errors)}` };
  return { config, compiled: authenticators };
}

/**
 * Read, decode and validate `path` as {@link AuthenticationConfigFile.load} does, without starting
 * anything (no issuer is contacted, nothing is watched): the start-up check of `serve`'s flags.
 * Throws the same {@link ConfigError}s.
 */
export async function checkAuthenticationConfigFile(path: string, disallowedIssuers?: readonly string[]): Promise<AuthenticationConfiguration> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`failed to load authentication configuration from file ${JSON.stringify(path)}: ${(err as Error).message}`, { cause: err });
  }
  const parsed = parse(text, disallowedIssuers);
  if ('error' in parsed) throw loadError(path, parsed.error);
  return parsed.config;
}

/** The ConfigError of a file that does not decode or validate. */
function loadError(path: string, error: string): ConfigError {
  const prefix = error.startsWith('invalid authentication configuration') ? '' : `failed to load authentication configuration from file ${JSON.stringify(path)}: `;
  return new ConfigError(`--authentication-config ${path}: ${prefix}${error}`);
}

/** The authentication configuration file, kept current. */
export class AuthenticationConfigFile extends EventEmitter<AuthenticationConfigFileEvents> {
  #authenticator: JwtAuthenticator;
  #config: AuthenticationConfiguration;
  /** Hash of the last content applied or rejected for good (kube-apiserver's tracked data). */
  #tracked: string;
  readonly #originalAnonymous: AuthenticationConfiguration['anonymous'];
  readonly #log: AuthenticationConfigLogger;
  #watch: FileWatch | undefined;
  readonly #retiring = new Set<NodeJS.Timeout>();
  #closed = false;

  /** `anonymous` as the file had it at start: a reload that changes it is refused. */
  get anonymous(): AuthenticationConfiguration['anonymous'] {
    return this.#originalAnonymous;
  }

  private constructor(
    readonly path: string,
    text: string,
    parsed: { config: AuthenticationConfiguration; compiled: CompiledJwtAuthenticator[] },
    private readonly options: AuthenticationConfigFileOptions,
  ) {
    super();
    this.#log = options.logger ?? SILENT;
    this.#config = parsed.config;
    this.#originalAnonymous = parsed.config.anonymous;
    this.#tracked = sha256(text);
    this.#authenticator = this.#build(parsed.compiled);
    options.metrics?.setConfigInfo(text);
  }

  /**
   * Read, decode and validate `path` and start its authenticators (without waiting for the issuers)
   * and the watch. Throws {@link ConfigError} with kube-apiserver's message when the file cannot be
   * read or is invalid.
   */
  static async load(path: string, options: AuthenticationConfigFileOptions = {}): Promise<AuthenticationConfigFile> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      throw new ConfigError(`failed to load authentication configuration from file ${JSON.stringify(path)}: ${(err as Error).message}`, { cause: err });
    }
    const parsed = parse(text, options.disallowedIssuers);
    if ('error' in parsed) throw loadError(path, parsed.error);
    const file = new AuthenticationConfigFile(path, text, parsed, options);
    file.#watch = new FileWatch(path, () => file.#reloadOnce(), {
      debounceMs: options.debounceMs ?? DEFAULT_AUTHENTICATION_CONFIG_DEBOUNCE_MS,
      pollIntervalMs: options.pollIntervalMs ?? DEFAULT_AUTHENTICATION_CONFIG_POLL_INTERVAL_MS,
      // kube-apiserver re-reads the file every minute, whatever the watcher says.
      poll: 'always',
      ...(options.watch !== undefined ? { watch: options.watch } : {}),
      onWatchError: (message) => file.#log.warn({ path }, `--authentication-config ${path}: ${message}`),
    });
    return file;
  }

  /** The JWT authenticators in force. */
  get authenticator(): JwtAuthenticator {
    return this.#authenticator;
  }

  /** The configuration in force. */
  get config(): AuthenticationConfiguration {
    return this.#config;
  }

  /** Re-read the file now (what the watcher and the poll call); concurrent calls coalesce. */
  reload(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return this.#watch?.trigger() ?? Promise.resolve();
  }

  /** Stop watching and close every authenticator. */
  close(): void {
    this.#closed = true;
    this.#watch?.close();
    for (const t of this.#retiring) clearTimeout(t);
    this.#retiring.clear();
    this.#authenticator.close();
  }

  #build(compiled: CompiledJwtAuthenticator[]): JwtAuthenticator {
    const o = this.options;
    return new JwtAuthenticator(compiled, { ...o.authenticator, log: this.#log, ...(o.metrics ? { metrics: o.metrics } : {}) });
  }

  #fail(message: string, track: string | undefined): void {
    if (track !== undefined) this.#tracked = track;
    this.options.metrics?.recordConfigReload('failure');
    this.#log.error({ path: this.path }, `--authentication-config ${this.path}: ${message} (keeping the configuration in force)`);
    this.emit('rejected', new ConfigError(message));
  }

  async #reloadOnce(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      // Not remembered: the file may come back.
      this.#fail(`failed to read authentication config file: ${(err as Error).message}`, undefined);
      return;
    }
    const hash = sha256(text);
    if (this.#closed || hash === this.#tracked) return;
    const parsed = parse(text, this.options.disallowedIssuers, { value: this.#originalAnonymous });
    if ('error' in parsed) {
      this.#fail(parsed.error, hash);
      return;
    }
    const next = this.#build(parsed.compiled);
    try {
      await next.waitReady(this.options.updateTimeoutMs ?? AUTHENTICATION_CONFIG_UPDATE_TIMEOUT_MS);
    } catch (err) {
      next.close();
      // Not remembered: the issuers may become reachable; the next read retries.
      this.#fail(`failed to update authentication config: ${(err as Error).message}`, undefined);
      return;
    }
    if (this.#closed) {
      next.close();
      return;
    }
    const old = this.#authenticator;
    this.#authenticator = next;
    this.#config = parsed.config;
    this.#tracked = hash;
    const retire = setTimeout(() => {
      this.#retiring.delete(retire);
      old.close();
    }, this.options.oldSetGraceMs ?? OLD_AUTHENTICATOR_GRACE_MS);
    retire.unref();
    this.#retiring.add(retire);
    for (const issuer of old.issuers) if (!next.issuers.includes(issuer)) this.options.metrics?.deleteIssuer(issuer);
    this.options.metrics?.recordConfigReload('success');
    this.options.metrics?.setConfigInfo(text);
    this.#log.info({ path: this.path, issuers: next.issuers }, `--authentication-config ${this.path}: reloaded authentication config (${next.issuers.length} JWT authenticators)`);
    this.emit('change', next, parsed.config);
  }
}
