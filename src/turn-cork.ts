/**
 * Write coalescing per event-loop turn, latency first.
 *
 * Every relay of the project (the upgraded passthrough's copy loop, the SPDY frame writer, the
 * translator's output, the port-forward tunnel) used to cork its destination at the first write of
 * a turn and uncork it in `setImmediate`, so that everything the poll phase delivered left in one
 * writev. That also held the FIRST write back until every other I/O callback of the turn had run:
 * with 100 busy sessions on one event loop, a lone keystroke or echo waited behind the other 99
 * (nginx and a bare `pipe()` relay write at once). Now the first write of a turn leaves at once;
 * only the writes that follow it in the same turn are corked, and they leave together when the
 * turn's I/O callbacks are done. A bulk transfer pays one more writev per turn (a few per MB); an
 * interactive session pays no wait.
 */

/** What {@link TurnCork} needs of a destination (a socket, or any Writable). */
export interface Corkable {
  cork(): void;
  uncork(): void;
  readonly writableEnded: boolean;
}

/**
 * `KSP_WRITE_FIRST=0` restores the old batching (the first write of a turn is corked too), for the
 * benchmark's same-run before/after (`npm run bench -- --latency --paths …,passthrough-batched`).
 */
const WRITE_FIRST = process.env.KSP_WRITE_FIRST !== '0';

/** Idle: nothing written this turn. Open: the turn's first write left at once. Corked: later ones wait. */
const IDLE = 0;
const OPEN = 1;
const CORKED = 2;

/**
 * Call {@link beforeWrite} before each write to `dest`: the first write of an event-loop turn goes
 * out at once, the following writes of that turn are corked until the turn's I/O callbacks are
 * done (`setImmediate`), then leave in one writev. The write order is never changed.
 */
export class TurnCork {
  #state = IDLE;
  readonly #dest: Corkable;

  constructor(dest: Corkable) {
    this.#dest = dest;
  }

  /** Before a write: the first of this turn passes; a second one corks the destination until the turn ends. */
  beforeWrite(): void {
    if (this.#state === IDLE) {
      this.#state = OPEN;
      setImmediate(this.#endTurn);
      if (WRITE_FIRST || this.#dest.writableEnded) return;
      this.#state = CORKED;
      this.#dest.cork();
    } else if (this.#state === OPEN && !this.#dest.writableEnded) {
      this.#state = CORKED;
      this.#dest.cork();
    }
  }

  /** True when this turn already wrote (the next write would be coalesced with later ones). */
  get turnOpen(): boolean {
    return this.#state !== IDLE;
  }

  readonly #endTurn = (): void => {
    const corked = this.#state === CORKED;
    this.#state = IDLE;
    if (corked) this.#dest.uncork();
  };
}
