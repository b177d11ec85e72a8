/**
 * Opening the remote-command streams on an upstream SPDY connection exactly as client-go does
 * (`tools/remotecommand/v2.go`, `v3.go`): `error`, then `stdin`, `stdout`, `stderr` (not with tty) and
 * `resize` (tty, protocol v3 or later), one at a time, each awaiting its SYN_REPLY. Only the
 * `streamtype` header is sent. A kubelet reads nothing until every expected stream exists, so the
 * caller must not write stdin before this resolves (SPDY-NOTES B4). Once every reply is in, the
 * connection's header decompressor is released (no header block can legitimately follow).
 */
import { DEFAULT_OPEN_TIMEOUT_MS, type SpdyConnection, type SpdyStream } from '../src/spdy/index.js';
import { StreamProtocolV1Name, StreamProtocolV2Name } from '../src/stream-protocol.js';
import type { RemoteCommandOptions } from '../src/wire/remote-command-options.js';

/** The upstream streams of one session. */
export interface RemoteCommandStreams {
  /** The upstream writes its Status here (v4 JSON, v1–v3 text). client-go never half-closes it. */
  error: SpdyStream;
  stdin?: SpdyStream;
  stdout?: SpdyStream;
  stderr?: SpdyStream;
  resize?: SpdyStream;
}

type RemoteCommandStreamType = keyof RemoteCommandStreams;

/**
 * The SYN_STREAM headers of each stream type, shared by every session: a stream keeps the headers it
 * was opened with (src/spdy/stream.ts), so an idle session holds no copy of its own.
 */
const STREAM_HEADERS: Readonly<Record<RemoteCommandStreamType, Readonly<{ streamtype: string }>>> = Object.freeze({
  error: Object.freeze({ streamtype: 'error' }),
  stdin: Object.freeze({ streamtype: 'stdin' }),
  stdout: Object.freeze({ streamtype: 'stdout' }),
  stderr: Object.freeze({ streamtype: 'stderr' }),
  resize: Object.freeze({ streamtype: 'resize' }),
});

/** True when `protocol` has a resize stream (v3 and later). */
export function protocolHasResize(protocol: string): boolean {
  return protocol !== StreamProtocolV1Name && protocol !== StreamProtocolV2Name;
}

/**
 * Create the streams in client-go's order. Rejects (and leaves cleanup to the caller, who destroys
 * the connection) if any SYN_REPLY does not arrive within `timeoutMs` (client-go: 30 s).
 */
export async function openRemoteCommandStreams(
  connection: SpdyConnection,
  protocol: string,
  options: RemoteCommandOptions,
  timeoutMs: number = DEFAULT_OPEN_TIMEOUT_MS,
): Promise<RemoteCommandStreams> {
  const open = (type: RemoteCommandStreamType): Promise<SpdyStream> => connection.openStream(STREAM_HEADERS[type], { timeoutMs });
  const streams: RemoteCommandStreams = { error: await open('error') };
  if (options.stdin) streams.stdin = await open('stdin');
  if (options.stdout) streams.stdout = await open('stdout');
  if (options.stderr && !options.tty) streams.stderr = await open('stderr');
  if (options.tty && protocolHasResize(protocol)) streams.resize = await open('resize');
  // Every stream has its SYN_REPLY, and a kubelet sends header blocks in nothing else: free the
  // connection's inbound zlib context (~40 KiB per idle session); a later header block is a
  // connection error (GOAWAY PROTOCOL_ERROR).
  connection.releaseHeaderDecompressor();
  return streams;
}
