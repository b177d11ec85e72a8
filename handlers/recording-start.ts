/**
 * Session recording at the pod streaming routes (docs/recording.md, "Wiring"): before any upgrade,
 * ask the server's {@link SessionRecorder} whether this request is recorded and open its recording.
 * An enforced recording that cannot start is answered here with its 503 Status, before the upgrade;
 * a begun recording is handed to the relay of the chosen path, which taps it, and its id goes on the
 * session's audit line.
 */
import type { FastifyRequest } from 'fastify';
import { authenticatedUserOf } from '../src/auth/request-auth.js';
import { RecordingUnavailableError } from '../src/recording/recording-errors.js';
import type { BegunRecording, SessionRecorder } from '../src/recording/session-recorder.js';
import type { V1Status } from '../src/status.js';
import { clusterOf } from '../src/tunnel/cluster-path.js';
import { queryBool } from '../src/wire/remote-command-options.js';

/** The recorder's answer for one request. */
export type RecordingStart = { kind: 'recorded'; recording: BegunRecording } | { kind: 'unrecorded' } | { kind: 'refused'; status: V1Status; message: string };

/** Decide and open the recording of a pods/{exec,attach,portforward} request. Never throws. */
export async function startRecording(
  recorder: SessionRecorder,
  request: FastifyRequest<{ Params: { namespace: string; name: string } }>,
  subresource: 'exec' | 'attach' | 'portforward',
): Promise<RecordingStart> {
  const query = new URL(request.raw.url ?? '/', 'http://request.invalid').searchParams;
  const user = authenticatedUserOf(request.raw);
  const container = query.get('container');
  try {
    const recording = await recorder.begin({
      ...(user ? { user: user.username, groups: user.groups } : {}),
      cluster: clusterOf(request.raw) ?? '',
      namespace: request.params.namespace,
      pod: request.params.name,
      ...(container !== null && container !== '' ? { container } : {}),
      subresource,
      tty: subresource !== 'portforward' && queryBool(query, 'tty'),
      command: subresource === 'exec' ? query.getAll('command') : [],
      ...(subresource === 'portforward' ? { ports: query.getAll('ports') } : {}),
    });
    return recording ? { kind: 'recorded', recording } : { kind: 'unrecorded' };
  } catch (e) {
    const error = e instanceof RecordingUnavailableError ? e : new RecordingUnavailableError('sink_open_failed', { cause: e });
    request.log.warn({ subresource, reason: error.reason }, 'session refused: its recording could not be started');
    return { kind: 'refused', status: error.toStatus(), message: error.message };
  }
}

/** Close a recording whose session never got upgraded (refused, failed): it ends with that error. */
export function closeUnusedRecording(recording: BegunRecording | undefined, error: string): void {
  if (!recording) return;
  if ('exit' in recording) recording.exit({ error });
  recording.close();
}
