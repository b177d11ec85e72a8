/**
 * Session recording at the pod streaming routes (docs/recording.md, "Wiring"): before any upgrade,
 * ask the server's {@link SessionRecorder} whether this request is recorded — it checks the sink and,
 * in passthrough, asks the upstream who the caller is (a SelfSubjectReview with the caller's own
 * credentials, along the request's route). An enforced recording whose sink is unusable is answered
 * here with its 503 Status, before the upgrade. The recording exists nowhere yet: the path's relay
 * calls `upgraded()` once the upstream's 101 has arrived (the recording is created on the sink then),
 * or {@link abandonRecording} when the session never got it (nothing is stored; counted).
 */
import type { FastifyRequest } from 'fastify';
import { authenticatedUserOf } from '../src/auth/request-auth.js';
import { RecordingUnavailableError } from '../src/recording/recording-errors.js';
import type { BegunRecording, SessionRecorder } from '../src/recording/session-recorder.js';
import { routeOf, unavailableRoute } from '../src/routing/route.js';
import type { V1Status } from '../src/status.js';
import type { SessionFacts, StreamingSession } from '../src/streaming-sessions.js';
import { clusterOf } from '../src/tunnel/cluster-path.js';
import { queryBool } from '../src/wire/remote-command-options.js';

/** The recorder's answer for one request. */
export type RecordingStart = { kind: 'recorded'; recording: BegunRecording } | { kind: 'unrecorded' } | { kind: 'refused'; status: V1Status; message: string };

/** The route of a request the router never saw (components driven directly): the review then fails, the caller is unknown. */
const NO_ROUTE = unavailableRoute('the request has no route');

/** Decide, check the sink and name the caller of a pods/{exec,attach,portforward} request. Never throws. */
export async function startRecording(
  recorder: SessionRecorder,
  request: FastifyRequest<{ Params: { namespace: string; name: string } }>,
  subresource: 'exec' | 'attach' | 'portforward',
): Promise<RecordingStart> {
  const query = new URL(request.raw.url ?? '/', 'http://request.invalid').searchParams;
  const user = authenticatedUserOf(request.raw);
  const container = query.get('container');
  try {
    const recording = await recorder.begin(
      {
        ...(user ? { user: user.username, groups: user.groups } : {}),
        cluster: clusterOf(request.raw) ?? '',
        namespace: request.params.namespace,
        pod: request.params.name,
        ...(container !== null && container !== '' ? { container } : {}),
        subresource,
        tty: subresource !== 'portforward' && queryBool(query, 'tty'),
        command: subresource === 'exec' ? query.getAll('command') : [],
        ...(subresource === 'portforward' ? { ports: query.getAll('ports') } : {}),
      },
      // Passthrough: the upstream says who the caller is (impersonate: the proxy authenticated it).
      user ? {} : { identify: () => recorder.identities.review(request.raw, routeOf(request.raw, NO_ROUTE)) },
    );
    return recording ? { kind: 'recorded', recording } : { kind: 'unrecorded' };
  } catch (e) {
    const error = e instanceof RecordingUnavailableError ? e : new RecordingUnavailableError('sink_open_failed', { cause: e });
    request.log.warn({ subresource, reason: error.reason }, 'session refused: its recording could not be started');
    return { kind: 'refused', status: error.toStatus(), message: error.message };
  }
}

/** What a recorded session's audit line carries: the recording's id and who it names. */
export function recordedSessionFacts(recording: BegunRecording): Pick<SessionFacts, 'recordingId' | 'user' | 'userUnknown'> {
  return { recordingId: recording.id, ...recording.caller };
}

/**
 * A recorded session that never got the upstream's 101 (`statusCode`: what the client was answered):
 * nothing is stored, the attempt is counted, and the audit line names no recording.
 */
export function abandonRecording(recording: BegunRecording | undefined, statusCode: number, session?: StreamingSession): void {
  if (!recording) return;
  if (recording.created) {
    // Created at the upstream's 101, but the client left before its own: the recording ends here.
    if ('exit' in recording) recording.exit({ error: `not upgraded (${statusCode})` });
    recording.close();
    return;
  }
  recording.abandon(statusCode);
  if (session?.facts.recordingId === recording.id) delete session.facts.recordingId;
}
