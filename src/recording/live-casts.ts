/**
 * The recorder's running recordings, for read-only live following: the cast text arriving from a
 * replica is split into lines and offered to every follower as it comes. A follower that joins late
 * gets the terminal's state so far first (the size and all output so far, as asciinema-player's
 * EventSource driver takes it: `{cols, rows, time, init}`), then the events from there on.
 */
import { StringDecoder } from 'node:string_decoder';

/** Output kept for late followers (the start is dropped past this; the terminal catches up). */
export const MAX_INIT_CHARS = 4 * 1024 * 1024;

/** What a follower receives. */
export interface LiveFollower {
  /** The terminal so far (first call), then nothing of that kind again. */
  reset(state: { cols: number; rows: number; time: number; init: string }): void;
  /** One event line (`[t, code, data]`, as written). */
  event(line: string): void;
  /** The recording ended. */
  done(): void;
}

/** One running recording. */
class LiveCast {
  readonly #decoder = new StringDecoder('utf8');
  #partial = '';
  #header: { width: number; height: number } | undefined;
  #cols = 80;
  #rows = 24;
  #time = 0;
  #init = '';
  readonly followers = new Set<LiveFollower>();

  push(chunk: Buffer): void {
    const text = this.#partial + this.#decoder.write(chunk);
    const lines = text.split('\n');
    this.#partial = lines.pop()!;
    for (const line of lines) if (line !== '') this.#line(line);
  }

  #line(line: string): void {
    if (this.#header === undefined) {
      try {
        const h = JSON.parse(line) as { width?: number; height?: number };
        this.#header = { width: h.width || 80, height: h.height || 24 };
        this.#cols = this.#header.width;
        this.#rows = this.#header.height;
      } catch {
        return;
      }
      for (const f of this.followers) this.#reset(f);
      return;
    }
    let e: unknown;
    try {
      e = JSON.parse(line);
    } catch {
      return;
    }
    if (!Array.isArray(e) || typeof e[0] !== 'number') return;
    this.#time = e[0];
    if (e[1] === 'o' && typeof e[2] === 'string') {
      this.#init += e[2];
      if (this.#init.length > MAX_INIT_CHARS) this.#init = this.#init.slice(this.#init.length - MAX_INIT_CHARS);
    } else if (e[1] === 'r' && typeof e[2] === 'string') {
      const [c, r] = e[2].split('x').map(Number);
      if (c! > 0 && r! > 0) [this.#cols, this.#rows] = [c!, r!];
    }
    for (const f of this.followers) f.event(line);
  }

  #reset(f: LiveFollower): void {
    f.reset({ cols: this.#cols, rows: this.#rows, time: this.#time, init: this.#init });
  }

  follow(f: LiveFollower): void {
    this.followers.add(f);
    if (this.#header !== undefined) this.#reset(f);
  }
}

/** Every running recording of the recorder. */
export class LiveCasts {
  readonly #casts = new Map<string, LiveCast>();

  /** A recording started (or resumed) arriving. */
  open(id: string, existing?: Buffer): void {
    if (this.#casts.has(id)) return;
    const c = new LiveCast();
    if (existing) c.push(existing);
    this.#casts.set(id, c);
  }

  /** Cast bytes of `id` arrived. */
  push(id: string, chunk: Buffer): void {
    this.#casts.get(id)?.push(chunk);
  }

  /** True while `id` is arriving. */
  isLive(id: string): boolean {
    return this.#casts.has(id);
  }

  /** The recording ended: followers are told, and it is forgotten. */
  end(id: string): void {
    const c = this.#casts.get(id);
    if (!c) return;
    this.#casts.delete(id);
    for (const f of c.followers) f.done();
  }

  /** Follow `id`; returns the unfollow function, or undefined when it is not live. */
  follow(id: string, f: LiveFollower): (() => void) | undefined {
    const c = this.#casts.get(id);
    if (!c) return undefined;
    c.follow(f);
    return () => c.followers.delete(f);
  }
}
