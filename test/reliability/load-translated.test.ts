/**
 * Issue 8 item 4, the `npm test` size: concurrent translated exec sessions (WebSocket v5 → proxy →
 * SPDY → dev cluster echo) moving 1 MB each way, SHA-256 verified, zero bytes lost, zero errors;
 * then sequential sessions after which the process's open file descriptors and heap (after a full
 * GC) are back to their baseline. The full size (1,000 × 10 MB, 10,000 sequential) is `npm run soak`
 * (bench/soak.ts); both share bench/soak-load.ts.
 *
 * - 100 concurrent sessions through the dev cluster's process-free echo (`kube-stream-proxy:idle`):
 *   the proxy's side of each session is the same as for `cat`, and 100 sessions are enough for their
 *   writes and backpressure to interleave on every connection;
 * - 20 concurrent sessions through real `cat` processes (started by the dev cluster's spawn helper);
 * - 100 sequential `cat` sessions (pipes and sockets are descriptors: a leak of one per session shows).
 *
 * Proxy and dev cluster run in this process so that the descriptors and the heap measured are theirs.
 * The load is the proxy's translator's: it runs with `--upstream-streaming spdy` (issue 32: by default
 * it would pass v5 through to the 1.36 dev cluster, whose own translator would carry the load), and
 * every session is counted `translated_at_apiserver`.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILTIN_ECHO, openFds, runConcurrent, runSequential, summaryLine } from '../../bench/soak-load.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import type { RunningServer } from '../../src/server.js';
import { eventually } from '../operability/operability-fixture.js';
import { startProxy } from '../proxy/scripted-upstream.js';
import { scrapeCounter } from '../helpers/metrics.js';

const CONCURRENT = 100;
const CONCURRENT_CAT = 20;
const CONCURRENT_BYTES = 1_000_000;
const WARMUP = 20;
const SEQUENTIAL = 100;
const SEQUENTIAL_BYTES = 64 * 1024;
/** Heap growth allowed over SEQUENTIAL sessions (noise of JIT and caches; a 12 KiB/session leak is 1.2 MiB). */
const HEAP_SLACK_BYTES = 1024 * 1024;
/**
 * How long the heap may take to come back: at once where a closed SPDY connection is released when
 * its socket closes; up to its 30 s close-grace timer (src/spdy/connection.ts) where that timer
 * still holds it (see docs/reliability.md).
 */
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

/** v5 exec sessions the proxy translated itself. */
const translated = (): Promise<number> => scrapeCounter(proxy.url, 'apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'translated_at_apiserver' });

describe('load: translated exec sessions (npm test size)', () => {
  beforeAll(async () => {
    cluster = await startDevCluster();
    proxy = await startProxy(cluster.url, { upstreamStreaming: 'spdy' });
  });
  afterAll(async () => {
    await proxy?.close();
    await cluster?.close();
  });

  for (const [n, command, label] of [
    [CONCURRENT, BUILTIN_ECHO, 'built-in echo'],
    [CONCURRENT_CAT, 'cat', 'cat processes'],
  ] as const) {
    it(`${n} concurrent sessions × 1 MB each way (${label}): every byte back, sha256-verified, no error`, async () => {
      const before = await translated();
      const s = await runConcurrent(proxy.url, n, CONCURRENT_BYTES, { timeoutMs: 50_000, command });
      console.log(summaryLine(`load (npm test, ${label})`, s));
      expect(s.firstErrors).toEqual([]);
      expect(s.errors).toBe(0);
      expect(s.bytesLost).toBe(0);
      expect(s.hashMismatches).toBe(0);
      expect(s.sessions).toBe(n);
      expect(await translated()).toBe(before + n);
    }, 60_000);
  }

  it(`${SEQUENTIAL} sequential sessions: file descriptors and heap back to baseline`, async () => {
    // Warm up (JIT, pools, metric children), then take the baseline.
    const warm = await runSequential(proxy.url, WARMUP, SEQUENTIAL_BYTES, { timeoutMs: 30_000, firstSession: 10_000, command: 'cat' });
    expect(warm.errors).toBe(0);
    const fdBase = await eventually('descriptors to settle after the warm-up', () => settledFds());
    const heapBase = heapAfterGc();
    const s = await runSequential(proxy.url, SEQUENTIAL, SEQUENTIAL_BYTES, { timeoutMs: 30_000, firstSession: 20_000, command: 'cat' });
    console.log(summaryLine('sequential (npm test)', s));
    expect(s.firstErrors).toEqual([]);
    expect(s.errors).toBe(0);
    expect(s.bytesLost).toBe(0);
    // Sockets and pipes of the last session close a moment after its WebSocket did.
    const fdAfter = await eventually('descriptors back to baseline', () => (openFds() <= fdBase ? openFds() : undefined), 10_000);
    // Poll until the heap is back (see HEAP_SETTLE_MS).
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
  }, 90_000);
});

/** The descriptor count once two reads 100 ms apart agree (closing sockets settle). */
async function settledFds(): Promise<number | undefined> {
  const a = openFds();
  await new Promise((r) => setTimeout(r, 100));
  return openFds() === a ? a : undefined;
}
