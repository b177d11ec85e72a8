/**
 * The idle-session concurrency benchmark in quick mode (200 sessions of the dev cluster's process-free
 * `kube-stream-proxy:idle` built-in, 50 opening at a time) with a 2 s idle window (--quick: 6 s) and
 * the clients pinging every 1 s (kubectl: 5 s), so that every session still sees pings inside the
 * window as in the quick run: every session of every path must open, echo and still echo after the
 * window, and the proxy's RSS and idle CPU must come back as finite numbers. The two paths (each its
 * own dev cluster and proxy process, measured from /proc by process id) run side by side: their
 * windows and settling pauses are idle time. It checks the harness works, not the 40 KiB /
 * 10,000-session targets.
 */
import { describe, expect, it } from 'vitest';
import { IDLE_PATHS, IDLE_QUICK, idleTextTable, runIdleBenchmarks } from '../../bench/idle.js';

/** The idle window is the thing held; 2 s with a ping a second covers pings on idle sessions. */
const OPTS = { windowMs: 2_000, pingIntervalMs: 1_000, settleMs: 500 };

describe('bench --idle --quick', () => {
  it('holds every session open on every path and reports RSS per session and idle CPU', async () => {
    const started = Date.now();
    const rows = (await Promise.all(IDLE_PATHS.map((path) => runIdleBenchmarks({ quick: true, opts: OPTS, paths: [path] })))).flat();
    console.log(idleTextTable(rows));
    console.log(`idle quick mode took ${Date.now() - started} ms`);
    const [count] = IDLE_QUICK.counts;
    expect(rows.map((r) => `${r.path} ${r.sessions}`)).toEqual(IDLE_PATHS.map((p) => `${p.name} ${count}`));
    for (const r of rows) {
      expect(r.failures, r.path).toEqual({});
      expect(r.opened, r.path).toBe(count);
      expect(r.held, r.path).toBe(count);
      expect(r.baselineRss, r.path).toBeGreaterThan(0);
      expect(r.heldRss, r.path).toBeGreaterThan(0);
      expect(Number.isFinite(r.rssPerSession), `${r.path}: RSS per session ${r.rssPerSession}`).toBe(true);
      expect(Number.isFinite(r.idleCpuSeconds) && r.idleCpuSeconds >= 0, `${r.path}: idle CPU ${r.idleCpuSeconds}`).toBe(true);
      expect(r.windowMs, r.path).toBe(OPTS.windowMs);
      // Each held session costs the proxy two sockets (client side and upstream).
      expect(r.proxyFds, r.path).toBeGreaterThanOrEqual(2 * count);
      expect(r.openMs, r.path).toBeGreaterThan(0);
    }
  }, 90_000);
});
