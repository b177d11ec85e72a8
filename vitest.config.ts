import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // kubectl end-to-end tests move hundreds of MB; keep generous per-test limits.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // Two cores: run test files two at a time so kubectl + server processes don't starve each other.
    maxWorkers: 2,
    pool: 'forks',
    // The JSON report lets .ci/run print a plain "N passed, N failed" closing line.
    reporters: ['default', ['json', { outputFile: 'test-results/vitest.json' }]],
  },
});
