/**
 * The one failure recording adds to a session: an enforced recording cannot be made. Before the
 * upgrade the relay answers it as HTTP 503 with {@link RecordingUnavailableError.toStatus}; after
 * it, the relay ends the session with the same Status (on the error channel or stream where the
 * protocol has one), within a second of the sink's failure.
 */
import { errorStatus, type V1Status } from '../status.js';

/** The message of the Status (the wording, so operators can grep for it). */
export const RECORDING_UNAVAILABLE_MESSAGE = 'session recording unavailable';

/** Why an enforced recording is unavailable (logs and the Status's cause; never recording content). */
export type RecordingUnavailableReason = 'sink_open_failed' | 'sink_failed' | 'sink_too_slow' | 'no_sink' | 'stream_unreadable';

/** An enforced recording could not be started or failed mid-session. */
export class RecordingUnavailableError extends Error {
  override readonly name = 'RecordingUnavailableError';
  readonly code = 'KSP_ERR_RECORDING_UNAVAILABLE' as const;
  constructor(
    readonly reason: RecordingUnavailableReason,
    options?: { cause?: unknown },
  ) {
    super(`${RECORDING_UNAVAILABLE_MESSAGE}: ${describeReason(reason)}`, options);
  }

  /** 503 ServiceUnavailable, message "session recording unavailable", the reason as a cause. */
  toStatus(): V1Status {
    return errorStatus(503, RECORDING_UNAVAILABLE_MESSAGE, 'ServiceUnavailable', {
      causes: [{ reason: 'SessionRecordingUnavailable', message: describeReason(this.reason) }],
    });
  }
}

function describeReason(r: RecordingUnavailableReason): string {
  switch (r) {
    case 'sink_open_failed':
      return 'the recording could not be started';
    case 'sink_failed':
      return 'the recording sink failed';
    case 'sink_too_slow':
      return 'the recording sink fell behind past the buffer';
    case 'no_sink':
      return 'the policy requires a recording but no recording sink is configured';
    case 'stream_unreadable':
      return "the session's stream could not be read for the recording";
  }
}
