/**
 * The agent's reconnect delays: exponential from 1 s, capped at 30 s, with "equal jitter" (half the
 * delay fixed, half random), so a proxy restart does not bring every agent back in the same
 * instant (Teleport's thundering herd) while none waits longer than the cap.
 */

/** First reconnect delay. */
export const RECONNECT_BASE_MS = 1_000;

/** Longest reconnect delay (the cap). */
export const RECONNECT_CAP_MS = 30_000;

/**
 * A tunnel that stayed up this long counts as healthy: the next failure starts again from the base
 * delay instead of continuing the backoff.
 */
export const RECONNECT_RESET_AFTER_MS = 60_000;

/**
 * The delay before reconnect attempt `attempt` (0 = the first retry), in ms, for a `random` in
 * [0, 1). Pure.
 */
export function reconnectDelayMs(attempt: number, random: number, baseMs = RECONNECT_BASE_MS, capMs = RECONNECT_CAP_MS): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + (ceiling / 2) * random);
}
