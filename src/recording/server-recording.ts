/**
 * Session recording in the server (docs/recording.md, "Wiring", step 7): the policy file (watched,
 * reloads apply to new sessions), the sink the flags name, and the {@link SessionRecorder} the pod
 * streaming routes ask before any upgrade. Built once per server; `close` stops the watch and
 * releases the sink when the server closes.
 */
import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import { RecordingConfigFile } from './recording-config-file.js';
import { createRecordingSink, type SessionRecordingSettings } from './recording-flags.js';
import { createRecordingMetrics } from './recording-metrics.js';
import { SessionRecorder } from './session-recorder.js';

/** What the server logs recording through (a pino logger fits). */
export interface ServerRecordingLogger {
  info(msg: string): void;
  error(msg: string): void;
  warn(obj: object, msg: string): void;
}

/** The server's recording: the recorder for the routes, and its teardown. */
export interface ServerRecording {
  recorder: SessionRecorder;
  close(): Promise<void>;
}

/**
 * Load the policy, open the sink, build the recorder. `replica` names this proxy in each recording
 * (`recordedBy`); default the host name (a pod's name on Kubernetes).
 */
export async function startServerRecording(settings: SessionRecordingSettings, registry: Registry, log: ServerRecordingLogger, replica: string = hostname()): Promise<ServerRecording> {
  const metrics = createRecordingMetrics(registry);
  const file = await RecordingConfigFile.load(settings.configPath, {
    metrics,
    logger: { info: (msg) => log.info(msg), error: (msg) => log.error(msg) },
  });
  const sink = createRecordingSink(settings);
  const recorder = new SessionRecorder({
    policy: () => file.policy,
    sink,
    metrics,
    log: { warn: (obj, msg) => log.warn(obj, msg) },
    maxOutputBytes: settings.maxOutputBytes,
    replica,
  });
  return {
    recorder,
    close: async () => {
      file.close();
      await sink.close();
    },
  };
}
