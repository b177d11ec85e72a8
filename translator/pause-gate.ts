/**
 * Pausing one flow for several independent reasons (backpressure, the bandwidth limit, waiting for
 * the upstream): the targets are paused while any reason is held and resumed when the last one is
 * released, so no reason can resume a flow another reason stopped.
 */

/** Something that can be paused and resumed (a socket, a WebSocket, a readable stream). */
export interface PauseTarget {
  pause(): unknown;
  resume(): unknown;
}

/** A set of held reasons applied to some targets. */
export class PauseGate {
  readonly #reasons = new Set<string>();
  readonly #targets: PauseTarget[];
  #disposed = false;

  constructor(targets: PauseTarget[]) {
    this.#targets = targets;
  }

  /** True while some reason is held. */
  get paused(): boolean {
    return this.#reasons.size > 0;
  }

  /** Hold `reason` (idempotent); pauses the targets when it is the first. */
  hold(reason: string): void {
    if (this.#disposed || this.#reasons.has(reason)) return;
    this.#reasons.add(reason);
    if (this.#reasons.size === 1) for (const t of this.#targets) t.pause();
  }

  /** Release `reason` (idempotent); resumes the targets when none is left. */
  release(reason: string): void {
    if (this.#disposed || !this.#reasons.delete(reason)) return;
    if (this.#reasons.size === 0) for (const t of this.#targets) t.resume();
  }

  /** Forget every reason, resume the targets, and ignore later calls. */
  open(): void {
    this.#disposed = true;
    if (this.#reasons.size > 0) {
      this.#reasons.clear();
      for (const t of this.#targets) t.resume();
    }
  }

  /** Ignore every later call and leave the targets as they are (paused or not): the flow is over. */
  dispose(): void {
    this.#disposed = true;
  }

  /** A {@link PauseTarget} view holding/releasing `reason` (for ReadThrottle). */
  asTarget(reason: string): PauseTarget {
    return { pause: () => this.hold(reason), resume: () => this.release(reason) };
  }
}
