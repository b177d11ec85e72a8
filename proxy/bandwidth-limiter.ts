/**
 * Per-direction bandwidth limiting for an upgraded connection (`--max-connection-bytes-per-sec`, like
 * apiserver's `flowrate` wrappers in UpgradeAwareHandler): a token bucket that pauses the source socket
 * when it runs into debt and resumes it with one timer when the debt is paid. No polling.
 */

/**
 * Tokens a quiet connection may bank, as a fraction of a second of rate. Small, so the average rate
 * holds over short transfers too (go-flowrate has no burst at all); large enough to absorb timer jitter.
 */
export const BURST_SECONDS = 0.1;

/** A token bucket in bytes that may go into debt by one chunk. */
export class TokenBucket {
  readonly #rate: number;
  readonly #capacity: number;
  #tokens = 0;
  #at: number;
  readonly #now: () => number;

  /** `bytesPerSec` > 0; `now` in milliseconds (injectable for tests). */
  constructor(bytesPerSec: number, now: () => number = () => performance.now()) {
    if (!(bytesPerSec > 0)) throw new RangeError('TokenBucket: bytesPerSec must be > 0');
    this.#rate = bytesPerSec;
    this.#capacity = Math.max(1, bytesPerSec * BURST_SECONDS);
    this.#now = now;
    this.#at = now();
  }

  /** Spend `bytes`; returns how many milliseconds to wait before reading more (0 = none). */
  take(bytes: number): number {
    const now = this.#now();
    this.#tokens = Math.min(this.#capacity, this.#tokens + ((now - this.#at) / 1000) * this.#rate);
    this.#at = now;
    this.#tokens -= bytes;
    return this.#tokens >= 0 ? 0 : Math.ceil((-this.#tokens / this.#rate) * 1000);
  }
}

/** A readable side that can be paused and resumed (a socket). */
export interface Pausable {
  pause(): unknown;
  resume(): unknown;
}

/**
 * Limit the flow out of `source`: call `account(n)` for every chunk read; when the bucket is in debt
 * the source is paused and one timer resumes it. `resumeAllowed()` lets the caller veto the resume
 * (the destination is still full); `dispose()` clears the timer.
 */
export class ReadThrottle {
  readonly #bucket: TokenBucket;
  readonly #source: Pausable;
  readonly #resumeAllowed: () => boolean;
  #timer: NodeJS.Timeout | undefined;

  constructor(source: Pausable, bytesPerSec: number, resumeAllowed: () => boolean = () => true) {
    this.#bucket = new TokenBucket(bytesPerSec);
    this.#source = source;
    this.#resumeAllowed = resumeAllowed;
  }

  /** True while waiting for the bucket to refill. */
  get throttled(): boolean {
    return this.#timer !== undefined;
  }

  /** Account for a chunk just read. */
  account(bytes: number): void {
    const waitMs = this.#bucket.take(bytes);
    if (waitMs === 0 || this.#timer !== undefined) return;
    this.#source.pause();
    this.#schedule(waitMs);
  }

  #schedule(waitMs: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      // A chunk that was already in flight when we paused may have deepened the debt.
      const more = this.#bucket.take(0);
      if (more > 0) this.#schedule(more);
      else if (this.#resumeAllowed()) this.#source.resume();
    }, waitMs);
  }

  /** Stop the pending resume timer. */
  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
