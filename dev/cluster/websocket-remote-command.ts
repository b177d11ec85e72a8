/**
 * exec and attach over the kubelet's legacy WebSocket protocols: `channel.k8s.io`,
 * `base64.channel.k8s.io`, `v4.channel.k8s.io`, `v4.base64.channel.k8s.io` (and no subprotocol =
 * binary v1). Channels 0 stdin, 1 stdout, 2 stderr, 3 status, 4 resize. There is no stdin
 * half-close in these protocols: the process's stdin ends when the socket closes.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { PassThrough, type Duplex, type Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { WebSocket, WebSocketServer } from 'ws';
import { encodeStatus, internalErrorStatus, nonZeroExitStatus, successStatus, type V1Status } from '../../src/status.js';
import { TerminalSizeDecoder, TerminalSizeDecodeError, type TerminalSize } from '../../src/terminal-size.js';
import { runAttach, runExec, type RemoteCommandStreams } from './runtime.js';
import type { RemoteCommandContext } from './spdy-remote-command.js';
import { channelWriter, decodeChannelMessage, sendChannel } from './ws-channels.js';
import { acceptKubeletWebSocket } from './ws-subprotocol.js';

/** The subprotocols the kubelet accepts for exec/attach, besides the empty one. */
export const REMOTE_COMMAND_WS_PROTOCOLS = [
  'channel.k8s.io',
  'base64.channel.k8s.io',
  'v4.channel.k8s.io',
  'v4.base64.channel.k8s.io',
] as const;

const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
const STATUS = 3;
const RESIZE = 4;
/** Bytes of client stdin buffered before the socket is paused. */
const STDIN_HIGH_WATER_MARK = 1024 * 1024;

/**
 * Upgrade `req` to a WebSocket and run the exec/attach of `ctx`. A client that offers none of the
 * supported subprotocols gets 403 with an empty body. Pod and options were validated by the caller.
 */
export function serveWebSocketRemoteCommand(
  wss: WebSocketServer,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  ctx: RemoteCommandContext,
): void {
  acceptKubeletWebSocket(wss, req, socket, head, REMOTE_COMMAND_WS_PROTOCOLS, ctx.cluster, (ws, protocol) =>
    runSession(ws, protocol, ctx),
  );
}

async function runSession(ws: WebSocket, protocol: string, ctx: RemoteCommandContext): Promise<void> {
  const { options } = ctx;
  const base64 = protocol.includes('base64');
  const v4 = protocol.startsWith('v4.');
  const session = new AbortController();
  const signal = ctx.cluster.sessionSignal(session.signal);
  ws.on('error', () => undefined);

  // The one initial empty frame, on the lowest writable channel (kubelet websocket.go).
  sendChannel(ws, options.stdout ? STDOUT : options.stderr ? STDERR : STATUS, Buffer.alloc(0), base64);

  // An exec whose output can no longer be delivered is killed, as SIGPIPE would.
  const onDropped = ctx.subresource === 'exec' ? () => session.abort(new Error('client went away')) : undefined;
  const stdout = options.stdout ? channelWriter(ws, STDOUT, base64, onDropped) : undefined;
  const stderr = options.stderr && !options.tty ? channelWriter(ws, STDERR, base64, onDropped) : undefined;
  const stdin = options.stdin ? new PassThrough({ highWaterMark: STDIN_HIGH_WATER_MARK }) : undefined;
  const resize = new EventEmitter();
  const decoder = new TerminalSizeDecoder();
  let resizeDead = false;

  ws.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => {
    const msg = decodeChannelMessage(toBuffer(data), base64);
    if (!msg) return;
    if (msg.channel === STDIN && stdin && !stdin.writableEnded) {
      if (msg.payload.length > 0 && !stdin.write(msg.payload)) {
        ws.pause();
        stdin.once('drain', () => ws.resume());
      }
    } else if (msg.channel === RESIZE && !resizeDead) {
      for (const size of decodeResize(decoder, msg.payload, () => (resizeDead = true))) resize.emit('resize', size);
    }
  });
  ws.once('close', () => {
    stdin?.end(); // the only way these protocols end stdin
    if (ctx.subresource === 'attach') session.abort(new Error('client went away'));
  });

  const streams: RemoteCommandStreams = { stdin, stdout, stderr, tty: options.tty, resize };
  const request = { pod: ctx.pod, container: options.container, command: options.command };
  let status: V1Status;
  try {
    const { exitCode } = await (ctx.subresource === 'exec' ? runExec : runAttach)(request, streams, signal);
    // The kubelet reports an attach that ended as Success whatever the exit code.
    status = exitCode === 0 || ctx.subresource === 'attach' ? successStatus() : nonZeroExitStatus(exitCode);
  } catch (err) {
    status = internalErrorStatus(err instanceof Error ? err.message : String(err));
  }
  await Promise.all([flush(stdout), flush(stderr)]);
  finish(ws, status, v4, base64);
}

/** Write the status the protocol wants on channel 3, then close with 1000. */
function finish(ws: WebSocket, status: V1Status, v4: boolean, base64: boolean): void {
  if (ws.readyState !== ws.OPEN) return;
  if (v4) sendChannel(ws, STATUS, encodeStatus(status), base64);
  else if (status.status !== 'Success') sendChannel(ws, STATUS, Buffer.from(status.message ?? ''), base64);
  ws.close(1000);
}

/** End a channel writer and wait until everything was handed to ws. */
async function flush(w: Writable | undefined): Promise<void> {
  if (!w) return;
  w.end();
  await finished(w).catch(() => undefined);
}

/** Feed the decoder; on bad input, keep what decoded before it and call `dead` (resize input stops). */
function decodeResize(decoder: TerminalSizeDecoder, chunk: Buffer, dead: () => void): TerminalSize[] {
  try {
    return decoder.push(chunk);
  } catch (err) {
    dead();
    return err instanceof TerminalSizeDecodeError ? err.decoded : [];
  }
}

function toBuffer(data: Buffer | ArrayBuffer | Buffer[]): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
