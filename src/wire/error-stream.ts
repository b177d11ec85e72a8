/**
 * Decoding what the upstream wrote on the SPDY error stream into the session's outcome, as
 * client-go's error decoders do (`tools/remotecommand/v4.go` `errorDecoderV4`, `v2.go`): v4 is one
 * JSON metav1.Status; v1–v3 are text, where nothing at all means success.
 */
import type { V1Status } from '../status.js';
import { StreamProtocolV4Name, StreamProtocolV5Name } from '../stream-protocol.js';

/** How a remote command ended, as seen on the error stream. */
export type RemoteCommandOutcome =
  | { kind: 'success' }
  /** A non-zero exit; `status` is the upstream's NonZeroExitCode Status, passed through unchanged. */
  | { kind: 'exit'; exitCode: number; status: V1Status }
  /** Anything else: an error whose message becomes an InternalError. */
  | { kind: 'error'; message: string };

/**
 * Longest excerpt of undecodable error-stream content quoted in a message. client-go quotes all of it
 * (`%q`), but the error stream may hold up to 1 MiB and the message goes back to the client in a
 * Status: keep the start, enough to diagnose.
 */
export const MAX_QUOTED_ERROR_STREAM_CHARS = 256;

/** `text` as a JSON string, cut to {@link MAX_QUOTED_ERROR_STREAM_CHARS} characters (`…` and the full length noted). */
function quoted(text: string): string {
  if (text.length <= MAX_QUOTED_ERROR_STREAM_CHARS) return JSON.stringify(text);
  return `${JSON.stringify(text.slice(0, MAX_QUOTED_ERROR_STREAM_CHARS))}… (${text.length} characters)`;
}

/**
 * The first line of a parser's message, cut like {@link quoted} (V8 quotes the input in it), without
 * the ` (line L column C)` that newer V8 (Node ≥ 22) adds after the position, so the Status a client
 * gets is the same on every supported runtime.
 */
function parseErrorMessage(e: unknown): string {
  const m = ((e as Error).message.split('\n')[0] ?? '').replace(/ \(line \d+ column \d+\)/, '');
  return m.length <= MAX_QUOTED_ERROR_STREAM_CHARS ? m : `${m.slice(0, MAX_QUOTED_ERROR_STREAM_CHARS)}…`;
}

/** Decode the complete error-stream contents for `protocol`. */
export function decodeErrorStream(protocol: string, bytes: Buffer): RemoteCommandOutcome {
  const text = bytes.toString('utf8');
  if (protocol !== StreamProtocolV4Name && protocol !== StreamProtocolV5Name) {
    if (text.length === 0) return { kind: 'success' };
    const shown = text.length <= MAX_QUOTED_ERROR_STREAM_CHARS ? text : `${text.slice(0, MAX_QUOTED_ERROR_STREAM_CHARS)}… (${text.length} characters)`;
    return { kind: 'error', message: `error executing remote command: ${shown}` };
  }
  // client-go v4 reads to EOF and only decodes a non-empty message.
  if (text.length === 0) return { kind: 'success' };
  let status: V1Status;
  try {
    status = JSON.parse(text) as V1Status;
  } catch (e) {
    return { kind: 'error', message: `error stream protocol error: ${parseErrorMessage(e)} in ${quoted(text)}` };
  }
  if (typeof status !== 'object' || status === null) {
    return { kind: 'error', message: `error stream protocol error: not an object in ${quoted(text)}` };
  }
  switch (status.status) {
    case 'Success':
      return { kind: 'success' };
    case 'Failure': {
      if (status.reason !== 'NonZeroExitCode') return { kind: 'error', message: status.message ?? '' };
      if (!status.details) return { kind: 'error', message: 'error stream protocol error: details must be set' };
      for (const cause of status.details.causes ?? []) {
        if (cause.reason !== 'ExitCode') continue;
        const m = /^\d+$/.exec(cause.message ?? '');
        const code = m ? Number(m[0]) : NaN;
        // Go: strconv.ParseUint(msg, 10, 8)
        if (!(code >= 0 && code <= 255)) {
          return { kind: 'error', message: `error stream protocol error: invalid exit code value ${JSON.stringify(cause.message ?? '')}` };
        }
        return { kind: 'exit', exitCode: code, status };
      }
      return { kind: 'error', message: 'error stream protocol error: no ExitCode cause given' };
    }
    default:
      return { kind: 'error', message: 'error stream protocol error: unknown error' };
  }
}
