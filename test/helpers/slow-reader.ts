/**
 * A slow reader for the "never truncate" tests (issue 32, item 7): it reads at full speed, then, in
 * the last `tail` bytes of a stream of known length, pauses for `pauseMs` after every `step` bytes
 * (`tail / step` pauses: their sum is what the test states, e.g. several times the no-progress
 * deadline the test configures, each pause well inside it). The schedule is one of bytes: it pauses
 * at byte counts, never to wait for something.
 * Optionally it also stalls once early (`stall`), while most of the stream is still to come: a relay
 * that buffered instead of applying backpressure would read the rest into memory then.
 * At each pause `onPause` runs (a kubectl-like client sends a ping there; a test may sample), and
 * `onResume` at its end.
 */

/** What the reader controls on its source. */
export interface PausableSource {
  pause(): void;
  resume(): void;
}

/** The schedule of a {@link SlowReader}. */
export interface SlowReaderSchedule {
  /** Bytes the whole stream carries. */
  total: number;
  /** The last bytes, read slowly. */
  tail: number;
  /** Bytes read between two pauses in the tail. */
  step: number;
  /** Each pause. */
  pauseMs: number;
  /** One early pause: after `at` bytes, for `ms` (not counted in {@link SlowReader.pauses}). */
  stall?: { at: number; ms: number };
  /** Runs at the start of each pause, the stall included (a ping, a sample). */
  onPause?: (received: number) => void;
  /** Runs at the end of each pause, before reading resumes (a sample). */
  onResume?: (received: number) => void;
}

/** Counts what its source delivers and pauses it on the schedule. */
export class SlowReader {
  readonly #source: PausableSource;
  readonly #schedule: SlowReaderSchedule;
  #received = 0;
  #next: number;
  #pauses = 0;
  #paused = false;
  #stalled = false;

  constructor(source: PausableSource, schedule: SlowReaderSchedule) {
    this.#source = source;
    this.#schedule = schedule;
    this.#next = Math.max(0, schedule.total - schedule.tail);
  }

  /** Bytes seen so far. */
  get received(): number {
    return this.#received;
  }

  /** Steps paused for so far (a chunk that crossed two steps paused twice as long, once). */
  get pauses(): number {
    return this.#pauses;
  }

  /** Call with each chunk's length as it arrives (also while paused: what the source had read). */
  onData(length: number): void {
    this.#received += length;
    const stall = this.#schedule.stall;
    if (this.#paused) return;
    if (stall !== undefined && !this.#stalled && this.#received >= stall.at && this.#received < this.#schedule.total) {
      this.#stalled = true;
      return this.#pause(stall.ms);
    }
    if (this.#received < this.#next) return;
    // A chunk that crossed several steps (a large message) pauses once, for all of them.
    let steps = 0;
    while (this.#received >= this.#next && this.#next < this.#schedule.total) {
      this.#next += this.#schedule.step;
      steps++;
    }
    if (steps === 0) return;
    this.#pauses += steps;
    this.#pause(this.#schedule.pauseMs * steps);
  }

  #pause(ms: number): void {
    this.#paused = true;
    this.#source.pause();
    this.#schedule.onPause?.(this.#received);
    setTimeout(() => {
      this.#schedule.onResume?.(this.#received);
      this.#paused = false;
      this.#source.resume();
    }, ms);
  }
}
