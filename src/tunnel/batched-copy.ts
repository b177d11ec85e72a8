/**
 * A copy loop from one stream to another that batches writes per event-loop turn, for the agent's
 * relay between a tunnel stream and its apiserver socket (`pipe.ts`).
 *
 * `src.pipe(dst)` writes each chunk on its own, and an Http2Stream delivers one chunk per DATA
 * frame: at most 16 KiB, since Node 20's http2 never sends a larger DATA frame whatever the peer's
 * `maxFrameSize` (nghttp2's default without a read-length callback; measured, Node 20.20). Each
 * chunk arrives in its own callback (the tick queue drains between them), but one read of the
 * tunnel socket delivers dozens of them in the same event-loop turn. Here the turn's first chunk is
 * written at once and the ones after it are corked until the turn ends (src/turn-cork.ts), so they
 * leave in one writev (one syscall, one wake-up of the peer) instead of one write each. The same
 * rule as the proxy's copy loop (proxy/splice.ts); the source is paused while the destination holds
 * `maxQueued` bytes or more ({@link AGENT_MAX_QUEUED_BYTES} by default), or {@link AGENT_MAX_QUEUED_WRITES}
 * writes whatever their bytes (a peer sending tiny DATA frames: each is a write request here, issue
 * 26), and resumed once both are below (its 'drain', or the write callbacks).
 */
import type { Readable, Writable } from 'node:stream';
import { TurnCork } from '../turn-cork.js';

/**
 * The agent's bound on bytes queued in a destination: 16 DATA frames. Enough for a turn's frames to
 * leave in a few writevs; small, because what waits here is held in the heap. A 1 MiB bound (the
 * proxy's MAX_QUEUED_BYTES) let 64 KiB socket reads pile up in an Http2Stream, and the agent's GC
 * time was 2.8× larger in a --cpu-prof pair (docs/benchmarks.md "Through an agent tunnel").
 */
export const AGENT_MAX_QUEUED_BYTES = 256 * 1024;

/** Writes queued in a destination at which the source pauses, whatever their bytes. */
export const AGENT_MAX_QUEUED_WRITES = 1024;
/** Queued writes at which a source paused for their count resumes. */
const AGENT_RESUME_WRITES = 256;

/**
 * Copy `src` to `dst` until `src` ends (then `dst.end()`, as `pipe` does) or `dst` closes. Errors
 * are the caller's to handle, as with `pipe`. Returns a function that stops the copy: `src` is
 * paused (as `unpipe` leaves it), so nothing it reads is lost until someone resumes it.
 */
export function copyBatched(src: Readable, dst: Writable, maxQueued = AGENT_MAX_QUEUED_BYTES): () => void {
  const turn = new TurnCork(dst);
  let full = false;
  let stopped = false;
  /** Writes handed to `dst` whose callback has not run. */
  let queued = 0;
  const onData = (chunk: Buffer): void => {
    // Nothing can be written after the destination ended or was destroyed (pipe drops it too).
    if (dst.writableEnded || dst.destroyed) return;
    turn.beforeWrite();
    // Past maxQueued (> the 16 KiB highWaterMark of the streams here) this write returned false,
    // so 'drain' follows.
    queued++;
    dst.write(chunk, onWritten);
    if (dst.writableLength >= maxQueued || queued >= AGENT_MAX_QUEUED_WRITES) {
      full = true;
      src.pause();
    }
  };
  const onDrain = (): void => {
    if (!full || queued > AGENT_RESUME_WRITES || dst.writableLength >= maxQueued) return;
    full = false;
    if (!stopped) src.resume();
  };
  function onWritten(): void {
    queued--;
    if (full && queued <= AGENT_RESUME_WRITES && !dst.writableNeedDrain) onDrain();
  }
  const onEnd = (): void => {
    stop();
    if (!dst.writableEnded && !dst.destroyed) dst.end();
  };
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    src.off('data', onData);
    src.off('end', onEnd);
    dst.off('drain', onDrain);
    dst.off('close', stop);
    src.pause();
  };
  src.on('data', onData);
  src.once('end', onEnd);
  dst.on('drain', onDrain);
  dst.once('close', stop);
  src.resume();
  return stop;
}
