/**
 * Issue 8 item 1, "client stops reading": the proxy runs as its own process (bench/servers.ts) so its
 * VmRSS is its own. The client reads ~1 MiB, stops reading while the far end keeps writing 64 MiB,
 * then resumes: the proxy's RSS growth must stay bounded (issue 7's 16 MiB target) and every byte
 * must arrive, in order. Passthrough and translation reuse bench/slow-reader.ts (a `dd` exec); the
 * tunnel forwards a port whose server writes 64 MiB of pseudo-random bytes, SHA-256 checked.
 */
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { startProxyProcess, type ServerProcess } from '../../bench/servers.js';
import { SLOW_READER_QUICK, SLOW_READER_TARGET_MIB, readRss, runSlowReaderBenchmarks, slowReaderTextTable } from '../../bench/slow-reader.js';
import { sessionChunk } from '../../bench/soak-load.js';
import { scrapeCounter } from '../helpers/metrics.js';
import { startClusterChild, startSourceServer, tunnelForward, type ClusterChild, type SourceServer } from './fault-fixture.js';

const MiB = 1024 * 1024;
const BYTES = 64 * MiB;
const STALL_MS = 1_500;
const TARGET = SLOW_READER_TARGET_MIB * MiB;

describe('fault: client stops reading', () => {
  it('passthrough (SPDY) and translation (WebSocket v5): RSS growth ≤ 16 MiB, stream resumes intact', async () => {
    const rows = await runSlowReaderBenchmarks({ quick: true, opts: { stallMs: STALL_MS } });
    console.log(slowReaderTextTable(rows));
    expect(rows.map((r) => r.path)).toEqual(['passthrough (SPDY)', 'translation (WebSocket v5)']);
    for (const r of rows) {
      expect(r.received, r.path).toBe(SLOW_READER_QUICK.bytes);
      expect(r.bytesOk, r.path).toBe(true);
      expect(r.readBeforeStall, r.path).toBeLessThan(SLOW_READER_QUICK.bytes / 2);
      expect(r.growth, `${r.path}: growth ${(r.growth / MiB).toFixed(1)} MiB`).toBeLessThanOrEqual(TARGET);
    }
  }, 60_000);

  describe('tunnel', () => {
    let cluster: ClusterChild | undefined;
    let proxy: ServerProcess | undefined;
    let source: SourceServer | undefined;
    afterAll(async () => {
      await proxy?.close();
      await cluster?.close();
      await source?.close();
    });

    it('tunnel (SPDY/3.1+portforward.k8s.io): RSS growth ≤ 16 MiB, stream resumes intact', async () => {
      cluster = await startClusterChild();
      // The proxy's own tunnel: `--upstream-streaming spdy` (issue 32: by default it would pass the
      // tunnel through to the 1.36 dev cluster, and the RSS measured would be a passthrough's).
      proxy = await startProxyProcess(cluster.url, ['--upstream-streaming', 'spdy']);
      // The port's server writes BYTES of session 7's stream with backpressure, then ends.
      const sent = createHash('sha256');
      source = await startSourceServer((socket) => {
        let k = 0;
        let off = 0;
        const pump = (): void => {
          while (off < BYTES) {
            const chunk = sessionChunk(7, k++, Math.min(64 * 1024, BYTES - off));
            sent.update(chunk);
            off += chunk.length;
            if (!socket.write(chunk)) return;
          }
          socket.end();
        };
        socket.on('drain', pump);
        pump();
      });
      await new Promise((r) => setTimeout(r, 300)); // let the idle proxy settle before the baseline
      const baseline = readRss(proxy.pid);
      let peak = baseline;
      const sample = (): void => void (peak = Math.max(peak, readRss(proxy!.pid)));
      const sampler = setInterval(sample, 100);
      try {
        const f = await tunnelForward(proxy.url, source.port);
        const got = createHash('sha256');
        let received = 0;
        let paused = false;
        let stalled!: () => void;
        const firstMiB = new Promise<void>((r) => (stalled = r));
        const ended = new Promise<void>((resolve, reject) => {
          f.data.once('end', () => resolve());
          f.data.once('close', () => (f.data.readableEnded ? resolve() : reject(new Error(`data stream closed after ${received} bytes`))));
        });
        ended.catch(() => undefined);
        f.data.on('data', (c: Buffer) => {
          received += c.length;
          got.update(c);
          if (received >= MiB && !paused) {
            paused = true;
            f.data.pause();
            stalled();
          }
        });
        await firstMiB;
        const before = received;
        await new Promise((r) => setTimeout(r, STALL_MS)); // the stall itself is what is measured
        sample();
        clearInterval(sampler);
        const growth = peak - baseline;
        const resumedAt = performance.now();
        f.data.resume();
        await ended;
        console.log(
          `tunnel: baseline ${(baseline / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB, growth ${(growth / MiB).toFixed(1)} MiB; ` +
            `${before} bytes before the stall, ${received} in total, resumed in ${(performance.now() - resumedAt).toFixed(0)} ms`,
        );
        expect(before).toBeLessThan(BYTES / 2);
        expect(received).toBe(BYTES);
        expect(got.digest('hex')).toBe(sent.digest('hex'));
        expect(growth).toBeLessThanOrEqual(TARGET);
        expect(await scrapeCounter(proxy.url, 'apiserver_websocket_streaming_requests_total', { subresource: 'portforward', proxy_type: 'tunneled_at_apiserver' })).toBe(1);
        f.conn.destroy();
      } finally {
        clearInterval(sampler);
      }
    }, 60_000);
  });
});
