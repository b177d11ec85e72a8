/**
 * One running translated session, once both legs are up: WebSocket channels ⇄ SPDY streams.
 *
 * - ch0 → SPDY stdin; v5 CLOSE `[255,0]` → FIN on stdin (k/k#89899), a repeated close is a no-op.
 * - ch4 → SPDY resize (JSON objects decoded case-insensitively and re-encoded as Go clients send
 *   them); without tty or a resize stream, resize input is dropped. Resize never blocks stdin.
 * - SPDY stdout/stderr → ch1/ch2.
 * - Backpressure both ways: the WebSocket stops being read while SPDY stdin is full; SPDY
 *   stdout/stderr stop being read while the WebSocket has too much queued. The bandwidth limit
 *   (`--max-connection-bytes-per-sec`) applies per direction on top.
 * - The outcome (client-go's rule): once stdout and stderr have ended, the error stream is read to
 *   its end and decoded.
 */
import { ReadThrottle } from '../proxy/bandwidth-limiter.js';
import type { SpdyConnection, SpdyStream } from '../src/spdy/index.js';
import { TerminalSizeDecoder } from '../src/terminal-size.js';
import { Channel } from './channel-frame.js';
import { decodeErrorStream, type RemoteCommandOutcome } from './error-stream.js';
import { PauseGate } from './pause-gate.js';
import type { RemoteCommandOptions } from './remote-command-options.js';
import type { RemoteCommandStreams } from './remote-command-streams.js';
import type { ChannelWebSocket, InboundMessage } from './websocket.js';

/** Largest error-stream content we keep (a Status is a few hundred bytes). */
export const MAX_ERROR_STREAM_BYTES = 1024 * 1024;

/** Output of one event-loop turn is joined into one WebSocket message up to this size. */
export const MAX_OUTPUT_BATCH_BYTES = 256 * 1024;

/** Logger used by the session. */
export interface SessionLogger {
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

/** Everything a session wires together. */
export interface TranslatorSessionParts {
  ws: ChannelWebSocket;
  connection: SpdyConnection;
  protocol: string;
  streams: RemoteCommandStreams;
  options: RemoteCommandOptions;
  /** Per-direction limit in bytes per second; 0 = unlimited. */
  maxBytesPerSec: number;
  log: SessionLogger;
}

/** Bytes moved by a session. */
export interface SessionBytes {
  toUpstream: number;
  toClient: number;
}

/**
 * Run the session until the outcome is known. Resolves with the outcome; rejects when the upstream
 * connection is lost before the error stream ended. Messages in `backlog` (read before the upstream
 * was ready) are handled first.
 */
export function runTranslatorSession(
  parts: TranslatorSessionParts,
  backlog: InboundMessage[],
  bytes: SessionBytes,
): Promise<RemoteCommandOutcome> {
  const { ws, streams, options, log } = parts;
  const throttles: ReadThrottle[] = [];

  // ---- client → upstream ----
  const stdin = streams.stdin;
  let stdinClosed = false;
  let stdinWaiting = false;
  if (parts.maxBytesPerSec > 0) {
    throttles.push(
      new ReadThrottle({ pause: () => ws.pauseInbound('throttle'), resume: () => ws.resumeInbound('throttle') }, parts.maxBytesPerSec),
    );
  }
  const inboundThrottle = throttles[0];
  stdin?.on('error', (err: Error) => log.debug({ err }, 'upstream stdin stream error'));
  const resize = options.tty ? streams.resize : undefined;
  resize?.on('error', () => {});
  const sizes = new TerminalSizeDecoder();
  let resizeDead = false;

  /** One stdin message (a buffer, or the pieces it arrived in) as one DATA frame. */
  const writeStdin = (payload: Buffer | readonly Buffer[], length: number): void => {
    const stdinStream = stdin!;
    bytes.toUpstream += length;
    inboundThrottle?.account(length);
    // Messages already parsed from the same socket read still arrive after the pause: wait once
    // only (a listener per message piled up: MaxListenersExceededWarning under load). Straight to
    // DATA frames, no Writable write request per message; the order is kept (see writeDirect).
    if (!stdinStream.writeDirect(payload) && !stdinWaiting) {
      stdinWaiting = true;
      ws.pauseInbound('stdin');
      stdinStream.whenWritable(() => {
        stdinWaiting = false;
        ws.resumeInbound('stdin');
      });
    }
  };
  const onMessage = (m: InboundMessage): void => {
    if (m.kind === 'data-parts') {
      if (!stdin || stdinClosed || !stdin.writable) return;
      writeStdin(m.parts, m.length);
      return;
    }
    if (m.kind === 'close') {
      if (m.channel === Channel.Stdin && stdin && !stdinClosed) {
        stdinClosed = true;
        stdin.end();
      } else if (m.channel === Channel.Resize && resize && !resize.writableEnded) {
        resize.end();
      }
      return;
    }
    if (m.kind !== 'data') return;
    if (m.channel === Channel.Stdin) {
      if (!stdin || stdinClosed || !stdin.writable) return;
      writeStdin(m.payload, m.payload.length);
    } else if (m.channel === Channel.Resize) {
      // Never blocks: without tty (or a resize stream) the input is dropped.
      if (!resize || resizeDead || !resize.writable) return;
      try {
        for (const size of sizes.push(m.payload)) resize.write(JSON.stringify({ Width: size.width, Height: size.height }));
      } catch (err) {
        resizeDead = true;
        log.warn({ err }, 'dropping bad resize input');
      }
    }
    // Channels 1–3 are write-only for the client; input there is ignored.
  };
  for (const m of backlog) onMessage(m);
  ws.on('message', onMessage);

  // ---- upstream → client ----
  const outputs: Array<[SpdyStream, typeof Channel.Stdout | typeof Channel.Stderr]> = [];
  if (streams.stdout) outputs.push([streams.stdout, Channel.Stdout]);
  if (streams.stderr) outputs.push([streams.stderr, Channel.Stderr]);
  const outbound = new PauseGate(outputs.map(([s]) => s));
  if (parts.maxBytesPerSec > 0) throttles.push(new ReadThrottle(outbound.asTarget('throttle'), parts.maxBytesPerSec));
  const outboundThrottle = parts.maxBytesPerSec > 0 ? throttles[throttles.length - 1] : undefined;
  const onDrain = (): void => outbound.release('websocket');
  ws.on('drain', onDrain);
  // The first output chunk of an event-loop turn goes out at once (an interactive echo is not held
  // back behind the turn's other I/O callbacks: src/turn-cork.ts); the chunks after it in that turn
  // (the DATA pieces of every socket read the poll phase delivered) go out as one WebSocket message
  // per channel run instead of one message (and one write syscall) per chunk. The channel message is
  // a copy anyway, and the pieces are copied straight into it.
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let pendingChannel: typeof Channel.Stdout | typeof Channel.Stderr = Channel.Stdout;
  let flushScheduled = false;
  const flushOutput = (): void => {
    if (pendingBytes === 0) return;
    const payload = pending.length === 1 ? pending[0]! : pending;
    pending = [];
    pendingBytes = 0;
    if (!ws.send(pendingChannel, payload)) outbound.hold('websocket');
  };
  const flushLater = (): void => {
    flushScheduled = false;
    flushOutput();
  };
  const outputsDone = outputs.map(([stream, channel]) => {
    stream.on('data', (chunk: Buffer) => {
      bytes.toClient += chunk.length;
      outboundThrottle?.account(chunk.length);
      if (chunk.length === 0) return;
      if (pendingChannel !== channel) flushOutput();
      pendingChannel = channel;
      pending.push(chunk);
      pendingBytes += chunk.length;
      if (!flushScheduled) {
        // The turn's first chunk: send it now, and batch what follows until the turn ends.
        flushScheduled = true;
        setImmediate(flushLater);
        flushOutput();
      } else if (pendingBytes >= MAX_OUTPUT_BATCH_BYTES) flushOutput();
    });
    // Everything read before the end is sent before anyone learns of the end (the Status follows).
    stream.once('end', flushOutput);
    stream.once('close', flushOutput);
    return ended(stream);
  });

  // ---- outcome ----
  const errorBytes = readToEnd(streams.error, MAX_ERROR_STREAM_BYTES);
  // Awaited only once stdout and stderr are done. Until then a rejection (the upstream reset just the
  // error stream, or we reset it for a protocol error) must not count as unhandled: Node would end
  // the process.
  errorBytes.catch(() => {});
  const cleanup = (): void => {
    flushOutput();
    ws.off('message', onMessage);
    ws.off('drain', onDrain);
    for (const t of throttles) t.dispose();
    outbound.open();
  };
  return Promise.all(outputsDone)
    .then(() => errorBytes)
    .then(
      (content) => {
        cleanup();
        return decodeErrorStream(parts.protocol, content);
      },
      (err: unknown) => {
        cleanup();
        throw err;
      },
    );
}

/** Resolves when `stream`'s readable side is over, normally or not. */
function ended(stream: SpdyStream): Promise<void> {
  return new Promise<void>((resolve) => {
    if (stream.readableEnded || stream.destroyed) return resolve();
    stream.once('end', () => resolve());
    stream.once('close', () => resolve());
    stream.on('error', () => {});
  });
}

/** Read a stream to its end (at most `limit` bytes kept); rejects if it closes without ending. */
function readToEnd(stream: SpdyStream, limit: number): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (c: Buffer) => {
      if (size < limit) chunks.push(c.subarray(0, limit - size));
      size += c.length;
    });
    stream.on('error', () => {});
    stream.once('end', () => resolve(Buffer.concat(chunks)));
    stream.once('close', () => {
      if (!stream.readableEnded) reject(new Error('error reading from error stream: the upstream connection was closed'));
    });
  });
}
