/**
 * What a WebSocket session does once `ws` failed to read its client (a receiver error: a frame
 * announcing more than the payload limit, too many fragments, bad UTF-8 in a text frame, a bad
 * opcode, …): the session ends now (issue 26 item 2). `ws` has already queued its close frame
 * (1002, 1007, 1008 or 1009) and ends the socket once that is written; left alone it would then
 * read and discard whatever the client still sends, and keep the socket for its close timeout (the
 * translator's 15-minute Status-flush deadline). Go's WebSocket servers (gorilla, x/net) close the
 * connection on a read error instead; so do we: nothing more is read, and the socket is destroyed
 * at most {@link PROTOCOL_ERROR_CLOSE_DEADLINE_MS} later (or when it closes first), leaving the close
 * frame that time to reach the client.
 */
import type { Duplex } from 'node:stream';

/** How long the client socket is kept after a protocol error (its close frame on the way, nothing read). */
export const PROTOCOL_ERROR_CLOSE_DEADLINE_MS = 1_000;

/**
 * Read nothing more from `socket` (the client's, under a `ws` that reported a receiver error) and
 * destroy it within `deadlineMs`. Call it from the WebSocket's `'error'` listener, with every other
 * `'data'` listener of the socket removed.
 */
export function abandonAfterReceiveError(socket: Duplex, deadlineMs = PROTOCOL_ERROR_CLOSE_DEADLINE_MS): void {
  if (socket.destroyed) return;
  socket.pause();
  // ws resumes the socket on the next tick (to read the peer's close frame); this tick comes after
  // it (the 'error' event follows ws's own scheduling), so the socket stays paused. At most one
  // more read fills the socket's buffer and then reading stops.
  process.nextTick(() => socket.pause());
  const timer = setTimeout(() => socket.destroy(), deadlineMs);
  socket.once('close', () => clearTimeout(timer));
}
