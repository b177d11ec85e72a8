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
import { PieceBatch } from '../src/piece-batch.js';
import { TerminalSizeDecoder } from '../src/terminal-size.js';
import { Channel } from './channel-frame.js';
import { decodeErrorStream, type RemoteCommandOutcome } from '../src/wire/error-stream.js';
import { PauseGate } from './pause-gate.js';
import type { RemoteCommandOptions } from '../src/wire/remote-command-options.js';
import type { RemoteCommandStreams } from './remote-command-streams.js';
import type { ChannelWebSocket, InboundMessage } from './websocket.js';
import type { RemoteCommandObserver } from '../src/recording/observer.js';

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
  /** Session recording: told each stdin message, output chunk and terminal size (docs/recording.md). */
  observer?: RemoteCommandObserver;
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
  const { ws, streams, options, log, observer } = parts;
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
  resize?.on('error', ignore);
  // Created with the first resize message: an idle session never needs it.
  let sizes: TerminalSizeDecoder | undefined;
  let resizeDead = false;

  /** Stdin data (a message, or the stdin messages of one socket read as pieces) as one SPDY write. */
  const writeStdin = (payload: Buffer | readonly Buffer[], length: number): void => {
    const stdinStream = stdin!;
    bytes.toUpstream += length;
    if (observer) recordStdin(observer, payload);
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
  // One resize write at a time: while one is on its way, only the latest size is kept (a flood of
  // resize messages costs one pending string, not one queued write each) and it follows when the
  // write is done. The terminal ends at the size the client sent last, as it would have.
  let resizeWriting = false;
  let latestSize: string | undefined;
  const writeResize = (json: string): void => {
    if (resizeWriting) {
      latestSize = json;
      return;
    }
    resizeWriting = true;
    resize!.write(json, onResizeWritten);
  };
  const onResizeWritten = (): void => {
    resizeWriting = false;
    const json = latestSize;
    latestSize = undefined;
    if (json !== undefined && resize?.writable) writeResize(json);
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
        for (const size of (sizes ??= new TerminalSizeDecoder()).push(m.payload)) {
          if (observer) observer.resize(size.width, size.height);
          writeResize(JSON.stringify({ Width: size.width, Height: size.height }));
        }
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
  // per channel run instead of one message (and one write syscall) per chunk. Large chunks go out
  // as the views they are; small ones (an upstream that sends tiny DATA frames) are copied together
  // (src/piece-batch.ts), so a message's pieces, and the write requests behind them, follow its bytes.
  // Created with the first output (an idle session holds none).
  let pending: PieceBatch | undefined;
  let pendingChannel: typeof Channel.Stdout | typeof Channel.Stderr = Channel.Stdout;
  let flushScheduled = false;
  const flushOutput = (): void => {
    if (pending === undefined || pending.bytes === 0) return;
    const parts = pending.take();
    if (!ws.send(pendingChannel, parts.length === 1 ? parts[0]! : parts)) outbound.hold('websocket');
  };
  const flushLater = (): void => {
    flushScheduled = false;
    flushOutput();
  };

  // ---- outcome ----
  // Event-driven, one promise per session: an idle session holds no promise chain, no `once`
  // wrappers and no per-stream promises (docs/benchmarks.md, "Idle sessions").
  return new Promise<RemoteCommandOutcome>((resolve, reject) => {
    let outputsLeft = outputs.length;
    let errorContent: Buffer | undefined;
    let errorFailure: Error | undefined;
    let settled = false;
    const cleanup = (): void => {
      flushOutput();
      ws.off('message', onMessage);
      ws.off('drain', onDrain);
      for (const t of throttles) t.dispose();
      outbound.open();
    };
    // Once stdout and stderr are done, the error stream's end (or its failure) is the outcome. Until
    // then a failed error stream (the upstream reset just it, or we reset it for a protocol error)
    // only waits.
    const settleIfDone = (): void => {
      if (settled || outputsLeft > 0 || (errorContent === undefined && errorFailure === undefined)) return;
      settled = true;
      cleanup();
      if (errorFailure !== undefined) return reject(errorFailure);
      try {
        resolve(decodeErrorStream(parts.protocol, errorContent!));
      } catch (err) {
        reject(err);
      }
    };

    for (const [stream, channel] of outputs) {
      const recorded = channel === Channel.Stdout ? 'stdout' : 'stderr';
      stream.on('data', (chunk: Buffer) => {
        bytes.toClient += chunk.length;
        outboundThrottle?.account(chunk.length);
        if (chunk.length === 0) return;
        if (observer) observer.output(recorded, chunk);
        if (pendingChannel !== channel) flushOutput();
        pendingChannel = channel;
        (pending ??= new PieceBatch()).add(chunk);
        if (!flushScheduled) {
          // The turn's first chunk: send it now, and batch what follows until the turn ends.
          flushScheduled = true;
          setImmediate(flushLater);
          flushOutput();
        } else if (pending!.bytes >= MAX_OUTPUT_BATCH_BYTES) flushOutput();
      });
      stream.on('error', ignore);
      if (stream.readableEnded || stream.destroyed) {
        outputsLeft--;
        continue;
      }
      // Everything read before the end is sent before anyone learns of the end (the Status follows).
      // 'end' and 'close' each fire at most once: one plain listener for both, no `once` wrappers.
      let done = false;
      const onDone = (): void => {
        flushOutput();
        if (done) return;
        done = true;
        outputsLeft--;
        settleIfDone();
      };
      stream.on('end', onDone);
      stream.on('close', onDone);
    }

    // The error stream, read to its end (at most MAX_ERROR_STREAM_BYTES kept); closing without an
    // end is a failure.
    const error = streams.error;
    const chunks: Buffer[] = [];
    let size = 0;
    error.on('data', (c: Buffer) => {
      if (size < MAX_ERROR_STREAM_BYTES) chunks.push(c.subarray(0, MAX_ERROR_STREAM_BYTES - size));
      size += c.length;
    });
    error.on('error', ignore);
    const onErrorStreamDone = (): void => {
      if (errorContent !== undefined || errorFailure !== undefined) return;
      if (error.readableEnded) errorContent = Buffer.concat(chunks);
      else errorFailure = new Error('error reading from error stream: the upstream connection was closed');
      settleIfDone();
    };
    error.on('end', onErrorStreamDone);
    error.on('close', onErrorStreamDone);
    if (error.destroyed) onErrorStreamDone();
    settleIfDone();
  });
}

/** A stdin message, as the pieces it arrived in, to the recording. */
function recordStdin(observer: RemoteCommandObserver, payload: Buffer | readonly Buffer[]): void {
  if (Buffer.isBuffer(payload)) observer.stdin(payload);
  else for (const part of payload) observer.stdin(part);
}

/** The 'error' listener of streams whose errors show as their premature close. */
function ignore(): void {}
