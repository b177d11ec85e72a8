/**
 * The authentication benchmark (bench/auth.ts) in quick mode, smaller still: every row runs
 * (TokenReview cache hit, cached and uncached ES256/RS256 JWTs, the passthrough floor) and reports a
 * positive, finite CPU per request; every exec row succeeds. 200 requests a row (--quick: 300) still
 * take several clock ticks of the proxy's CPU even for the passthrough (~170 µs a request on a quiet
 * machine, docs/benchmarks.md: some 34 ms), after as many warm-up requests; 10 execs a row (--quick:
 * 20) give each exec row its p50 and p99. It checks the harness works (requests answered 200, execs
 * end in Success), not the target, which is measured by `npm run bench -- --auth` (docs/benchmarks.md).
 */
import { describe, expect, it } from 'vitest';
import { AUTH_QUICK, authTextTables, runAuthBenchmarks } from '../../bench/auth.js';

/** Test size (concurrency and rounds are the quick preset's). */
const SIZE = { ...AUTH_QUICK, requests: 200, execs: 10 };

describe('bench --auth --quick', () => {
  it('measures every row', async () => {
    const r = await runAuthBenchmarks({ ...SIZE, log: () => undefined });
    console.log(authTextTables(r));
    expect(r.cpu.map((c) => c.name)).toEqual([
      'passthrough (this build)',
      'impersonate, TokenReview cache hit',
      'impersonate, JWT cached (ES256)',
      'impersonate, JWT uncached ES256',
      'impersonate, JWT uncached RS256',
    ]);
    for (const c of r.cpu) {
      expect(c.perRound, c.name).toHaveLength(SIZE.rounds);
      expect(Number.isFinite(c.cpuUsPerRequest) && c.cpuUsPerRequest > 0, `${c.name}: ${c.cpuUsPerRequest}`).toBe(true);
    }
    expect(r.latency.map((l) => l.name)).toEqual(['exec, TokenReview cache hit', 'exec, JWT cached', 'exec, JWT uncached ES256']);
    for (const l of r.latency) expect(l.p99Ms >= l.p50Ms && l.p50Ms > 0, l.name).toBe(true);
  }, 120_000);
});
