/**
 * Issue 8 item 4, the `npm test` size: concurrent translated exec sessions (WebSocket v5 → proxy →
 * SPDY → dev cluster `cat`) moving 1 MB each way, SHA-256 verified, zero bytes lost, zero errors;
 * then sequential sessions after which the process's open file descriptors and heap (after a full
 * GC) are back to their baseline. The full size (1,000 × 10 MB, 10,000 sequential) is `npm run soak`
 * (bench/soak.ts); both share bench/soak-load.ts.
 *
 * Proxy and dev cluster run in this process so that the descriptors and the heap measured are theirs.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openFds, runConcurrent, runSequential, summaryLine } from '../../bench/soak-load.js';
import { startDevCluster, type DevCluster } from '../../src/devcluster/dev-cluster.js';
import type { RunningServer } from '../../src/server.js';
import { eventually } from '../operability/operability-fixture.js';
import { startProxy } from '../proxy/scripted-upstream.js';

const CONCURRENT = 50;
const CONCURRENT_BYTES = 1_000_000;
const WARMUP = 30;
const SEQUENTIAL = 150;
const SEQUENTIAL_BYTES = 64 * 1024;
/** Heap growth allowed over SEQUENTIAL sessions (noise of JIT and caches; a 4 KiB/session leak is 1.2 MiB). */
const HEAP_SLACK_BYTES = 1024 * 1024;
/** How long the heap may take to come back (the SPDY close grace timer is 30 s). */
const HEAP_SETTLE_MS = 35_000;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Heap in use after two full collections. */
function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

let cluster: DevCluster;
let proxy: RunningServer;

describe('load: translated exec sessions (npm test size)', () => {
  beforeAll(async () => {
    cluster = await startDevCluster();
    proxy = await startProxy(cluster.url);
  });
  afterAll(async () => {
    await proxy?.close();
    await cluster?.close();
  });

  it(`${CONCURRENT} concurrent sessions × 1 MB each way: every byte back, sha256-verified, no error`, async () => {
    const s = await runConcurrent(proxy.url, CONCURRENT, CONCURRENT_BYTES, { timeoutMs: 100_000 });
    console.log(summaryLine('load (npm test)', s));
    expect(s.firstErrors).toEqual([]);
    expect(s.errors).toBe(0);
    expect(s.bytesLost).toBe(0);
    expect(s.hashMismatches).toBe(0);
    expect(s.sessions).toBe(CONCURRENT);
  }, 120_000);

  it(`${SEQUENTIAL} sequential sessions: file descriptors and heap back to baseline`, async () => {
    // Warm up (JIT, pools, metric children), then take the baseline.
    const warm = await runSequential(proxy.url, WARMUP, SEQUENTIAL_BYTES, { timeoutMs: 30_000, firstSession: 10_000 });
    expect(warm.errors).toBe(0);
    const fdBase = await eventually('descriptors to settle after the warm-up', () => settledFds());
    const heapBase = heapAfterGc();
    const s = await runSequential(proxy.url, SEQUENTIAL, SEQUENTIAL_BYTES, { timeoutMs: 30_000, firstSession: 20_000 });
    console.log(summaryLine('sequential (npm test)', s));
    expect(s.firstErrors).toEqual([]);
    expect(s.errors).toBe(0);
    expect(s.bytesLost).toBe(0);
    // Sockets and pipes of the last session close a moment after its WebSocket did.
    const fdAfter = await eventually('descriptors back to baseline', () => (openFds() <= fdBase ? openFds() : undefined), 10_000);
    // A closed SpdyConnection stays reachable from its close() grace timer (src/spdy/connection.ts,
    // CLOSE_GRACE_MS = 30 s) until that fires; see docs/reliability.md. Poll until the heap is back.
    const heapWait = performance.now();
    let heapAfter = heapAfterGc();
    while (heapAfter - heapBase >= HEAP_SLACK_BYTES && performance.now() - heapWait < HEAP_SETTLE_MS) {
      await new Promise((r) => setTimeout(r, 500));
      heapAfter = heapAfterGc();
    }
    console.log(`sequential (npm test): heap back within ${(performance.now() - heapWait).toFixed(0)} ms of the last session`);
    console.log(
      `sequential (npm test): fds ${fdBase} → ${fdAfter}, heap after GC ${(heapBase / 2 ** 20).toFixed(2)} → ${(heapAfter / 2 ** 20).toFixed(2)} MiB ` +
        `(${((heapAfter - heapBase) / 1024).toFixed(0)} KiB)`,
    );
    expect(fdAfter).toBeLessThanOrEqual(fdBase);
    expect(heapAfter - heapBase).toBeLessThan(HEAP_SLACK_BYTES);
  }, 120_000);
});

/** The descriptor count once two reads 100 ms apart agree (closing sockets settle). */
async function settledFds(): Promise<number | undefined> {
  const a = openFds();
  await new Promise((r) => setTimeout(r, 100));
  return openFds() === a ? a : undefined;
}
