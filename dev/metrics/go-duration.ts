/**
 * Go's `time.Duration.String()` for whole milliseconds, the form `metav1.Duration` takes in JSON
 * (the `window` of PodMetrics and NodeMetrics: `20.064s`, `1m0s`, `500ms`, `0s`). Pure.
 */

/** `ms` as Go prints a Duration of that many milliseconds. */
export function formatGoDuration(ms: number): string {
  if (!Number.isSafeInteger(ms)) throw new RangeError(`not a whole number of milliseconds: ${ms}`);
  if (ms < 0) return `-${formatGoDuration(-ms)}`;
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const hours = Math.floor(ms / 3_600_000);
  const minutes = Math.floor((ms % 3_600_000) / 60_000);
  const rest = ms % 60_000;
  const whole = Math.floor(rest / 1000);
  const frac = rest % 1000;
  const seconds = frac === 0 ? `${whole}s` : `${whole}.${String(frac).padStart(3, '0').replace(/0+$/, '')}s`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}`;
  if (minutes > 0) return `${minutes}m${seconds}`;
  return seconds;
}
