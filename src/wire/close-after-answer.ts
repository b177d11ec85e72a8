/**
 * Closing a client connection after a final answer on the raw socket (a refused upgrade, a relayed
 * upstream error, or Fastify's own answer to an upgrade request).
 */
import type { Duplex } from 'node:stream';
import { writeRawStatus } from './http-response.js';
import type { V1Status } from '../status.js';

/**
 * How long the client may take to read an answer and close its side before the socket is destroyed.
 * Same as the apiserver's 10 s write deadline for relayed upstream errors.
 */
export const ANSWER_CLOSE_DEADLINE_MS = 10_000;

/**
 * Optionally write `status` as a complete HTTP answer, then end the socket: flush, send FIN, and
 * destroy once the client closes its side or after the deadline. Incoming bytes are read and dropped
 * meanwhile, so unread input cannot make the kernel answer with a reset that discards our answer.
 */
export function closeAfterAnswer(socket: Duplex, status?: V1Status): void {
  if (socket.destroyed) return;
  socket.on('error', () => {});
  socket.on('data', () => {});
  socket.once('end', () => socket.destroy());
  const deadline = setTimeout(() => socket.destroy(), ANSWER_CLOSE_DEADLINE_MS);
  deadline.unref();
  socket.once('close', () => clearTimeout(deadline));
  if (status) writeRawStatus(socket, status);
  else if (!socket.writableEnded) socket.end();
  socket.resume();
}
