/**
 * The `serve` flags of session recording, validated at start-up (a bad one is a `ConfigError` naming
 * it; the CLI exits 2):
 *
 * - `--session-recording-config FILE` — the policy (`recording-config.ts`); validated here, watched
 *   by the server (`RecordingConfigFile`). Without it nothing is recorded.
 * - one sink: `--session-recording-dir DIR`, or `--session-recorder-url URL` with
 *   `--session-recorder-token-file`, `--session-recorder-ca-file`,
 *   `--session-recorder-client-cert-file`/`--session-recorder-client-key-file`.
 * - `--session-recording-max-bytes N` — `o`/`i` bytes recorded per session (default
 *   {@link DEFAULT_MAX_RECORDED_BYTES}; 0 = no limit).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigError } from '../errors.js';
import { DirectorySink } from './directory-sink.js';
import type { RecordingPolicy } from './policy.js';
import { parseRecorderUrl, type RecorderEndpoint } from './recorder-client.js';
import { RecorderSink } from './recorder-sink.js';
import type { RecordingSink } from './sink.js';

/**
 * Default per-session limit of recorded output: a recorded `cat` of a large file must not fill the
 * recordings volume; 64 MiB is hours of interactive work.
 */
export const DEFAULT_MAX_RECORDED_BYTES = 64 * 1024 * 1024;

/** The flags as given (camelCase of their names). */
export interface RecordingFlags {
  sessionRecordingConfig?: string;
  sessionRecordingDir?: string;
  sessionRecordingMaxBytes?: string;
  sessionRecorderUrl?: string;
  sessionRecorderTokenFile?: string;
  sessionRecorderCaFile?: string;
  sessionRecorderClientCertFile?: string;
  sessionRecorderClientKeyFile?: string;
}

/** Validated recording settings. */
export interface SessionRecordingSettings {
  /** The policy file (the server watches it). */
  configPath: string;
  /** The policy as loaded at start-up. */
  policy: RecordingPolicy;
  sink: { kind: 'directory'; dir: string } | { kind: 'recorder'; endpoint: RecorderEndpoint };
  maxOutputBytes: number;
}

function file(flag: string, path: string): string {
  if (!existsSync(path)) throw new ConfigError(`${flag}: ${path} does not exist`);
  return resolve(path);
}

/** Validate the recording flags; undefined when recording is not configured. */
export async function parseRecordingFlags(flags: RecordingFlags): Promise<SessionRecordingSettings | undefined> {
  const sinkGiven = flags.sessionRecordingDir !== undefined || flags.sessionRecorderUrl !== undefined;
  if (flags.sessionRecordingConfig === undefined) {
    if (sinkGiven || flags.sessionRecordingMaxBytes !== undefined) throw new ConfigError('--session-recording-dir, --session-recorder-url and --session-recording-max-bytes need --session-recording-config (the policy; without it nothing is recorded)');
    return undefined;
  }
  if (flags.sessionRecordingDir !== undefined && flags.sessionRecorderUrl !== undefined) throw new ConfigError('--session-recording-dir and --session-recorder-url: give one sink');
  if (!sinkGiven) throw new ConfigError('--session-recording-config needs a sink: --session-recording-dir or --session-recorder-url');
  const recorderOnly = [flags.sessionRecorderTokenFile, flags.sessionRecorderCaFile, flags.sessionRecorderClientCertFile, flags.sessionRecorderClientKeyFile].some((f) => f !== undefined);
  if (recorderOnly && flags.sessionRecorderUrl === undefined) throw new ConfigError('--session-recorder-token-file, -ca-file and -client-*-file need --session-recorder-url');
  if ((flags.sessionRecorderClientCertFile === undefined) !== (flags.sessionRecorderClientKeyFile === undefined)) {
    throw new ConfigError('--session-recorder-client-cert-file and --session-recorder-client-key-file must be given together');
  }
  const maxText = flags.sessionRecordingMaxBytes ?? String(DEFAULT_MAX_RECORDED_BYTES);
  if (!/^\d+$/.test(maxText.trim()) || !Number.isSafeInteger(Number(maxText))) throw new ConfigError(`--session-recording-max-bytes: want a non-negative integer, got ${JSON.stringify(maxText)}`);
  let sink: SessionRecordingSettings['sink'];
  if (flags.sessionRecordingDir !== undefined) sink = { kind: 'directory', dir: resolve(flags.sessionRecordingDir) };
  else {
    let url: URL;
    try {
      url = parseRecorderUrl(flags.sessionRecorderUrl!, '--session-recorder-url');
    } catch (e) {
      throw new ConfigError((e as Error).message);
    }
    sink = {
      kind: 'recorder',
      endpoint: {
        url,
        ...(flags.sessionRecorderTokenFile !== undefined ? { tokenFile: file('--session-recorder-token-file', flags.sessionRecorderTokenFile) } : {}),
        ...(flags.sessionRecorderCaFile !== undefined ? { caFile: file('--session-recorder-ca-file', flags.sessionRecorderCaFile) } : {}),
        ...(flags.sessionRecorderClientCertFile !== undefined ? { certFile: file('--session-recorder-client-cert-file', flags.sessionRecorderClientCertFile) } : {}),
        ...(flags.sessionRecorderClientKeyFile !== undefined ? { keyFile: file('--session-recorder-client-key-file', flags.sessionRecorderClientKeyFile) } : {}),
      },
    };
  }
  const configPath = resolve(flags.sessionRecordingConfig);
  // On demand (client-node's YAML parser costs start-up time): only when recording is configured.
  const { loadRecordingConfig } = await import('./recording-config-file.js');
  const policy = await loadRecordingConfig(configPath);
  return { configPath, policy, sink, maxOutputBytes: Number(maxText) };
}

/** The sink the settings name. */
export function createRecordingSink(settings: SessionRecordingSettings): RecordingSink {
  return settings.sink.kind === 'directory' ? new DirectorySink(settings.sink.dir) : new RecorderSink(settings.sink.endpoint);
}
