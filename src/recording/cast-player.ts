/**
 * Playing a cast in a terminal (`kube-stream-proxy sessions play`): the `o` events' text written to
 * the output with their timing, scaled by `speed`, pauses capped at `idleTimeLimit` (as asciinema
 * play's `-s` and `-i`). Other events (input, resize, markers) are not written; unparseable lines
 * are skipped, so a truncated last line (a writer that died) still plays.
 */

/** Options of {@link playCast}. */
export interface PlayOptions {
  /** Playback speed factor (default 1). */
  speed?: number;
  /** Longest pause in seconds (default: the header's `idle_time_limit`, else none). */
  idleTimeLimit?: number;
  /** Waits `ms` milliseconds (tests pass a fake clock). */
  sleep?: (ms: number) => Promise<void>;
}

/** One `o` event with the delay before it, in milliseconds. */
export interface ScheduledOutput {
  delayMs: number;
  text: string;
}

/** The pure schedule of a cast's lines (header first): delays after speed and idle limit. */
export function scheduleCast(lines: Iterable<string>, speed = 1, idleTimeLimit?: number): ScheduledOutput[] {
  const out: ScheduledOutput[] = [];
  let first = true;
  let limit = idleTimeLimit;
  let last = 0;
  for (const line of lines) {
    if (line.trim() === '') continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      continue;
    }
    if (first) {
      first = false;
      const h = v as { idle_time_limit?: unknown };
      if (limit === undefined && typeof h.idle_time_limit === 'number') limit = h.idle_time_limit;
      continue;
    }
    if (!Array.isArray(v) || v.length < 3 || typeof v[0] !== 'number') continue;
    const [t, code, data] = v as [number, unknown, unknown];
    if (code !== 'o' || typeof data !== 'string') continue;
    let gap = Math.max(0, t - last);
    last = Math.max(last, t);
    if (limit !== undefined && limit > 0) gap = Math.min(gap, limit);
    out.push({ delayMs: (gap * 1000) / speed, text: data });
  }
  return out;
}

const realSleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Play `castText` to `write`. */
export async function playCast(castText: string, write: (text: string) => void, options: PlayOptions = {}): Promise<void> {
  const speed = options.speed ?? 1;
  if (!(speed > 0)) throw new RangeError('speed must be > 0');
  const sleep = options.sleep ?? realSleep;
  for (const e of scheduleCast(castText.split('\n'), speed, options.idleTimeLimit)) {
    if (e.delayMs >= 1) await sleep(e.delayMs);
    write(e.text);
  }
}
