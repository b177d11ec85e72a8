/**
 * The agent's relay between one tunnel stream and its apiserver connection: bytes both ways with
 * backpressure (`copyBatched`: the DATA frames of one event-loop turn leave in one writev, and a
 * socket read is not followed by a pause and resume of the socket, as `pipe` into a 16 KiB
 * highWaterMark did), a half-close carried across (END_STREAM → `end()` of the socket and the
 * socket's FIN → END_STREAM), and a reset carried across (RST_STREAM before our END_STREAM, or a
 * stream error, destroys the socket; a socket error or abrupt close resets the stream with CANCEL).
 */
import { constants as h2, type ServerHttp2Stream } from 'node:http2';
import type { Duplex, Transform } from 'node:stream';
import { copyBatched } from './batched-copy.js';

/**
 * Relay `stream` ↔ `socket` until both are done. Returns a promise settled when both are closed.
 * `toSocket`, when given, sits between the stream and the socket (the agent's body framer: it passes
 * one request body and drops what follows); its end still carries the stream's half-close.
 */
export function relayTunnelStream(stream: ServerHttp2Stream, socket: Duplex, toSocket?: Transform): Promise<void> {
  let stopReadingStream: () => void;
  if (toSocket) {
    toSocket.on('error', () => socket.destroy());
    stopReadingStream = copyBatched(stream, toSocket);
    copyBatched(toSocket, socket);
  } else stopReadingStream = copyBatched(stream, socket);
  copyBatched(socket, stream);
  const streamClosed = new Promise<void>((resolve) => stream.once('close', resolve));
  const socketClosed = new Promise<void>((resolve) => socket.once('close', resolve));
  stream.on('error', () => socket.destroy());
  // The peer reset the stream before we ended our side. Node's `destroy()` without an error sends
  // RST_STREAM with NO_ERROR and then also emits 'end', so neither rstCode nor 'end' tells a reset
  // from a clean close; 'aborted' does (measured, Node 20.20).
  stream.once('aborted', () => socket.destroy());
  stream.once('close', () => {
    if (stream.rstCode !== undefined && stream.rstCode !== h2.NGHTTP2_NO_ERROR) socket.destroy();
  });
  socket.on('error', () => {
    if (!stream.closed) stream.close(h2.NGHTTP2_CANCEL);
  });
  socket.once('close', () => {
    // Closed without a FIN we relayed (reset by the apiserver): reset the stream too.
    if (!socket.readableEnded && !stream.closed) stream.close(h2.NGHTTP2_CANCEL);
    // Nothing reads the stream any more: drain what still arrives (at least its END_STREAM), or the
    // stream, closed by nghttp2 but with its readable side never ended, is never destroyed and a
    // graceful close of the session (the agent's stop on SIGTERM) waits for it forever.
    stopReadingStream();
    toSocket?.destroy();
    stream.resume();
  });
  return Promise.all([streamClosed, socketClosed]).then(() => undefined);
}
