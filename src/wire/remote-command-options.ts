/**
 * The stream options of a pods/exec or pods/attach request (PodExecOptions / PodAttachOptions), read
 * from the query as kube-apiserver reads it, and checked before any upgrade: a refusal here is a plain
 * HTTP Status answer, which a WebSocket client sees as a failed handshake (kubectl then retries over
 * SPDY, as it does against kube-apiserver).
 */
import { errorStatus, type V1Status } from '../status.js';

/** Which remote-command streams the client asked for. */
export interface RemoteCommandOptions {
  stdin: boolean;
  stdout: boolean;
  /** Already false when `tty` is set (the kubelet merges stderr into the terminal). */
  stderr: boolean;
  tty: boolean;
}

/** Either the options or the Status refusing the request. */
export type ParsedRemoteCommandOptions = { ok: true; value: RemoteCommandOptions } | { ok: false; status: V1Status };

/**
 * apimachinery's bool conversion (`Convert_Slice_string_To_bool`): absent, `0` or `false` (any case)
 * is false; anything else, the empty string included, is true. Only the first value counts.
 */
export function queryBool(query: URLSearchParams, name: string): boolean {
  const value = query.get(name);
  if (value === null) return false;
  const v = value.toLowerCase();
  return v !== 'false' && v !== '0';
}

/**
 * Parse `stdin`, `stdout`, `stderr` and `tty`. With tty, stderr is dropped first; then at least one
 * of stdin/stdout/stderr must be left (400 otherwise, the message kube-apiserver and the kubelet use).
 * `command` and `container` are left to the upstream, which receives the query unchanged.
 */
export function parseRemoteCommandOptions(query: URLSearchParams): ParsedRemoteCommandOptions {
  const stdin = queryBool(query, 'stdin');
  const stdout = queryBool(query, 'stdout');
  const tty = queryBool(query, 'tty');
  // The kubelet's `NewOptions` drops stderr under tty BEFORE counting streams, so `tty&stderr` alone
  // asks for nothing and is refused here too (not upgraded and then refused on channel 3).
  const stderr = queryBool(query, 'stderr') && !tty;
  if (!stdin && !stdout && !stderr) {
    return { ok: false, status: errorStatus(400, 'you must specify at least 1 of stdin, stdout, stderr', 'BadRequest') };
  }
  return { ok: true, value: { stdin, stdout, stderr, tty } };
}
