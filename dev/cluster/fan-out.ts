/**
 * Copying one source's chunks into several Writables with backpressure: the source is paused while
 * any target is over its highWaterMark and resumed once all of them drained. Targets that are
 * destroyed or removed never hold the source back.
 */
import type { Writable } from 'node:stream';

/** A broadcast point for one output stream (a process's stdout, say) and its current readers. */
export class FanOut {
  readonly #targets = new Set<Writable>();
  readonly #waiting = new Map<Writable, () => void>();
  #paused = false;

  /**
   * @param pause stop the source (e.g. `readable.pause()`)
   * @param resume restart the source
   */
  constructor(
    private readonly pause: () => void,
    private readonly resume: () => void,
  ) {}

  /** Number of current targets. */
  get size(): number {
    return this.#targets.size;
  }

  /** Start copying to `target`. */
  add(target: Writable): void {
    this.#targets.add(target);
  }

  /** Stop copying to `target`; if the source waited only for it, the source resumes. */
  remove(target: Writable): void {
    this.#targets.delete(target);
    this.#unwait(target);
  }

  /** Write `chunk` to every live target, pausing the source if one of them is full. */
  write(chunk: Buffer): void {
    for (const target of this.#targets) {
      if (target.destroyed || target.writableEnded) continue;
      if (!target.write(chunk) && !this.#waiting.has(target)) {
        const onDone = (): void => this.#unwait(target);
        this.#waiting.set(target, onDone);
        target.once('drain', onDone);
        target.once('close', onDone);
      }
    }
    if (this.#waiting.size > 0 && !this.#paused) {
      this.#paused = true;
      this.pause();
    }
  }

  #unwait(target: Writable): void {
    const onDone = this.#waiting.get(target);
    if (!onDone) return;
    this.#waiting.delete(target);
    target.off('drain', onDone);
    target.off('close', onDone);
    if (this.#waiting.size === 0 && this.#paused) {
      this.#paused = false;
      this.resume();
    }
  }
}
