/**
 * The authentication benchmark in quick mode (bench/auth.ts): every row runs (TokenReview cache hit,
 * cached and uncached ES256/RS256 JWTs, the passthrough floor) and reports a positive, finite CPU per
 * request; every exec row succeeds. It checks the harness works (requests answered 200, execs end in
 * Success), not the target, which is measured by `npm run bench -- --auth` (docs/benchmarks.md).
 */
import { describe, expect, it } from 'vitest';
import { AUTH_QUICK, authTextTables, runAuthBenchmarks } from '../../bench/auth.js';

describe('bench --auth --quick', () => {
  it('measures every row', async () => {
    const r = await runAuthBenchmarks({ ...AUTH_QUICK, log: () => undefined });
    console.log(authTextTables(r));
    expect(r.cpu.map((c) => c.name)).toEqual([
      'passthrough (this build)',
      'impersonate, TokenReview cache hit',
      'impersonate, JWT cached (ES256)',
      'impersonate, JWT uncached ES256',
      'impersonate, JWT uncached RS256',
    ]);
    for (const c of r.cpu) expect(Number.isFinite(c.cpuUsPerRequest) && c.cpuUsPerRequest > 0, `${c.name}: ${c.cpuUsPerRequest}`).toBe(true);
    expect(r.latency.map((l) => l.name)).toEqual(['exec, TokenReview cache hit', 'exec, JWT cached', 'exec, JWT uncached ES256']);
    for (const l of r.latency) expect(l.p99Ms >= l.p50Ms && l.p50Ms > 0, l.name).toBe(true);
  }, 120_000);
});
