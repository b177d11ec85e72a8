/**
 * The pieces of one batch of relayed data (the messages of one socket read, one event-loop turn's
 * output), kept so that their count is bounded by their bytes: a piece of {@link SMALL_PIECE_BYTES}
 * or more is kept as it is (a view, no copy: the bulk path), smaller ones are copied, back to back,
 * into a buffer of the batch's own. A flood of one-byte messages then becomes a few buffers per
 * socket read instead of one write request (and one Buffer object, pinning its whole read) per
 * message: the relays' memory and their write syscalls follow the bytes, not the message count
 * (issue 26; docs/reliability.md, "Hostile load").
 */

/** Pieces at least this long are kept as views; shorter ones are copied. */
export const SMALL_PIECE_BYTES = 1024;

/** Largest copy buffer; the first of a batch is sized from the bytes the previous batch copied. */
export const MAX_COPY_BUFFER_BYTES = 16 * 1024;

/** Smallest copy buffer (an interactive keystroke costs this much, once). */
const MIN_COPY_BUFFER_BYTES = 256;

/** Up to this many bytes are copied byte by byte (cheaper than `Buffer#copy`'s call for a few bytes). */
const LOOP_COPY_BYTES = 32;

/** One batch: {@link add} pieces in order, then {@link take} them as few buffers. */
export class PieceBatch {
  #parts: Buffer[] = [];
  #bytes = 0;
  #count = 0;
  /** The copy buffer: bytes [#start, #used) are copies not yet sealed into #parts. */
  #buf: Buffer | undefined;
  #start = 0;
  #used = 0;
  /** Bytes copied in this batch and in the previous one (sizes the next copy buffer). */
  #copied = 0;
  #lastCopied = 0;

  /** Bytes in the batch. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Pieces added since the last {@link take}. */
  get count(): number {
    return this.#count;
  }

  /** Add `piece` (kept as a view when it is large, else copied: the caller may reuse it). */
  add(piece: Buffer): void {
    const n = piece.length;
    if (n === 0) return;
    if (n >= SMALL_PIECE_BYTES) {
      this.#seal();
      this.#parts.push(piece);
      this.#bytes += n;
      this.#count++;
      return;
    }
    this.addCopy(piece, 0, n);
  }

  /** Add a copy of `src[start, end)` (no view is made of `src`). */
  addCopy(src: Buffer, start: number, end: number): void {
    const n = end - start;
    if (n <= 0) return;
    let buf = this.#buf;
    if (buf === undefined || buf.length - this.#used < n) {
      this.#seal();
      const size = Math.min(MAX_COPY_BUFFER_BYTES, Math.max(MIN_COPY_BUFFER_BYTES, 2 * Math.max(this.#copied, this.#lastCopied)));
      buf = this.#buf = Buffer.allocUnsafeSlow(Math.max(n, size));
      this.#start = 0;
      this.#used = 0;
    }
    const at = this.#used;
    if (n <= LOOP_COPY_BYTES) for (let i = 0; i < n; i++) buf[at + i] = src[start + i]!;
    else src.copy(buf, at, start, end);
    this.#used = at + n;
    this.#bytes += n;
    this.#copied += n;
    this.#count++;
  }

  /**
   * The batch's pieces in order (copies as few buffers), and an empty batch. The buffers returned
   * are never written again. The copy buffer's unused rest is kept for the next batch when it is
   * worth keeping; an idle batch holds none.
   */
  take(): Buffer[] {
    this.#seal();
    const parts = this.#parts;
    this.#parts = [];
    this.#bytes = 0;
    this.#count = 0;
    this.#lastCopied = this.#copied;
    this.#copied = 0;
    if (this.#buf !== undefined && this.#buf.length - this.#used < SMALL_PIECE_BYTES) this.#buf = undefined;
    return parts;
  }

  #seal(): void {
    if (this.#used > this.#start) {
      this.#parts.push(this.#buf!.subarray(this.#start, this.#used));
      this.#start = this.#used;
    }
  }
}
