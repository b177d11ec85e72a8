/**
 * pods/exec and pods/attach over SPDY/3.1, served as a kubelet serves them
 * (kubelet `pkg/cri/streaming/remotecommand/httpstream.go`): negotiate v4…v1, wait up to 30 s for the
 * client's streams (identified only by their `streamtype` header), run the command, then report the
 * outcome on the error stream (v4: one JSON Status; v1–v3: text on failure, nothing on success).
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { headerValue, type SpdyStream } from '../../src/spdy/index.js';
import {
  encodeStatus,
  internalErrorStatus,
  nonZeroExitStatus,
  successStatus,
  type V1Status,
} from '../../src/status.js';
import {
  KUBELET_SPDY_REMOTE_COMMAND_PROTOCOLS,
  StreamProtocolV1Name,
  StreamProtocolV2Name,
  StreamProtocolV4Name,
} from '../../src/stream-protocol.js';
import { TerminalSizeDecoder } from '../../src/terminal-size.js';
import { acceptSpdyUpgrade } from './spdy-handshake.js';
import { runAttach, runExec, type RemoteCommandStreams } from './runtime.js';
import type { DevClusterRuntime } from './cluster-runtime.js';
import type { Pod } from './pod.js';
import type { StreamOptions } from './stream-options.js';

/** Everything a remote-command handler needs once the request was validated. */
export interface RemoteCommandContext {
  subresource: 'exec' | 'attach';
  pod: Pod;
  options: StreamOptions;
  /** Close-tracking: `cluster.track(socket)`, `cluster.sessionSignal(own)`, `cluster.trackTask(p)`. */
  cluster: DevClusterRuntime;
  logger?: { warn(msg: string, ...args: unknown[]): void };
}

/** How long the kubelet waits for the client to create all expected streams. */
export const STREAM_CREATION_TIMEOUT_MS = 30_000;

type StreamType = 'error' | 'stdin' | 'stdout' | 'stderr' | 'resize';
const STREAM_TYPES: ReadonlySet<string> = new Set<StreamType>(['error', 'stdin', 'stdout', 'stderr', 'resize']);

/** Serve one exec/attach upgrade request over SPDY on `socket`. Never throws. */
export function serveSpdyRemoteCommand(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  ctx: RemoteCommandContext,
): void {
  const accepted = acceptSpdyUpgrade(req, socket, head, KUBELET_SPDY_REMOTE_COMMAND_PROTOCOLS, ctx.logger);
  if (!accepted) return;
  const { connection, protocol } = accepted;
  const { options } = ctx;
  const wantResize = options.tty && protocol !== StreamProtocolV1Name && protocol !== StreamProtocolV2Name;
  const expected =
    1 + Number(options.stdin) + Number(options.stdout) + Number(options.stderr && !options.tty) + Number(wantResize);

  const abort = new AbortController();
  connection.on('close', () => abort.abort());
  const signal = ctx.cluster.sessionSignal(abort.signal);

  const streams = new Map<StreamType, SpdyStream>();
  let received = 0;
  const timer = setTimeout(() => {
    ctx.logger?.warn(`${ctx.subresource}: timed out waiting for client to create streams`);
    connection.destroy();
  }, STREAM_CREATION_TIMEOUT_MS);
  timer.unref();

  connection.on('stream', (stream: SpdyStream) => {
    // A vanished client destroys every stream with an error; the session ends through 'close'.
    stream.on('error', () => undefined);
    stream.reply();
    const type = headerValue(stream.headers, 'streamtype');
    if (type === undefined || !STREAM_TYPES.has(type) || streams.has(type as StreamType)) {
      // The kubelet logs and ignores unknown stream types.
      ctx.logger?.warn(`${ctx.subresource}: unexpected stream type ${JSON.stringify(type)}`);
      stream.resume();
      return;
    }
    streams.set(type as StreamType, stream);
    // Read sides nobody consumes must be drained, or they would stop the whole connection.
    if (type !== 'stdin' && type !== 'resize') stream.resume();
    received += 1;
    if (received === expected) {
      clearTimeout(timer);
      void ctx.cluster.trackTask(run(ctx, protocol, streams, wantResize, signal).then(() => connection.close()));
    }
  });
}

async function run(
  ctx: RemoteCommandContext,
  protocol: string,
  streams: Map<StreamType, SpdyStream>,
  wantResize: boolean,
  signal: AbortSignal,
): Promise<void> {
  const { options } = ctx;
  const resize = wantResize ? new EventEmitter() : undefined;
  const resizeStream = streams.get('resize');
  if (resize && resizeStream) pumpResize(resizeStream, resize, ctx);

  const io: RemoteCommandStreams = {
    stdin: options.stdin ? streams.get('stdin') : undefined,
    stdout: options.stdout ? streams.get('stdout') : undefined,
    stderr: options.stderr && !options.tty ? streams.get('stderr') : undefined,
    tty: options.tty,
    resize,
  };
  const request = { pod: ctx.pod, container: options.container, command: options.command };
  let status: V1Status;
  try {
    const { exitCode } = await (ctx.subresource === 'exec' ? runExec : runAttach)(request, io, signal);
    status = exitCode === 0 ? successStatus() : nonZeroExitStatus(exitCode);
  } catch (err) {
    status = internalErrorStatus(err instanceof Error ? err.message : String(err));
  }
  if (signal.aborted) return;
  for (const type of ['stdout', 'stderr', 'stdin', 'resize'] as const) streams.get(type)?.end();
  const errorStream = streams.get('error');
  if (errorStream) {
    const payload = statusPayload(protocol, status);
    if (payload) errorStream.write(payload);
    errorStream.end();
  }
}

/** What goes on the error stream for `status` in `protocol` (undefined: nothing). */
export function statusPayload(protocol: string, status: V1Status): Buffer | undefined {
  if (protocol === StreamProtocolV4Name) return encodeStatus(status);
  if (status.status === 'Success') return undefined;
  return Buffer.from(status.message ?? 'error');
}

function pumpResize(stream: SpdyStream, resize: EventEmitter, ctx: RemoteCommandContext): void {
  const decoder = new TerminalSizeDecoder();
  const onData = (chunk: Buffer): void => {
    try {
      for (const size of decoder.push(chunk)) resize.emit('resize', size);
    } catch (err) {
      ctx.logger?.warn(`${ctx.subresource}: dropping bad resize input: ${(err as Error).message}`);
      stream.off('data', onData);
      stream.resume();
    }
  };
  stream.on('data', onData);
}
