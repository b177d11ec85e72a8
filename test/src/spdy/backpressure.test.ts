import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_QUEUED_BYTES, type SpdyStream } from '../../../src/spdy/index.js';
import { connectionPair } from './helpers.js';

const MiB = 1024 * 1024;

/** Resolves once `cond()` holds, re-checking on every turn of the event loop (no fixed sleeps). */
async function until(cond: () => boolean, what: string, limitMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > limitMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

describe('backpressure', { timeout: 30_000 }, () => {
  /*
   * Measurement: both connections run in this process. The client pushes 300 MB into a stream
   * whose server-side consumer does not read. Once the server has paused its socket and the client
   * connection's socket queue is at its limit (so the kernel's loopback buffers are full too), we
   * check that (a) the writer is blocked: its latest write callback has not fired and it has
   * acknowledged only a few MB; (b) the server holds at most the stream's highWaterMark plus one
   * socket read; (c) RSS grew by less than 100 MiB over the baseline taken before the test.
   * Then the consumer starts reading and all 300 MB must arrive, with RSS still bounded.
   */
  it('a consumer that does not read bounds memory and blocks the writer; then all 300 MB arrive', async () => {
    const { client, server, sockets } = await connectionPair();
    const total = 300 * MiB;
    const chunk = Buffer.alloc(MiB, 0x5a);
    const accepted = once(server, 'stream') as Promise<[SpdyStream]>;
    const opening = client.openStream({ streamtype: 'stdin' });
    const [s] = await accepted;
    s.reply();
    const c = await opening;

    const rss0 = process.memoryUsage().rss;
    let written = 0;
    let acked = 0;
    let lastCallbackPending = false;
    const pump = (): void => {
      while (written < total) {
        written += chunk.length;
        lastCallbackPending = true;
        const ok = c.write(chunk, () => {
          acked += chunk.length;
          lastCallbackPending = acked < written;
        });
        if (!ok) {
          c.once('drain', pump);
          return;
        }
      }
      c.end();
    };
    pump();

    await once(sockets.server, 'pause');
    await until(() => sockets.client.writableLength >= DEFAULT_MAX_QUEUED_BYTES, 'client socket queue to fill');
    // The kernel may still move a few buffers; wait until the writer's progress is quiescent for
    // 200 consecutive event-loop turns (the loopback pipe is full and nobody reads).
    let quietTurns = 0;
    let lastAcked = acked;
    await until(() => {
      quietTurns = acked === lastAcked ? quietTurns + 1 : 0;
      lastAcked = acked;
      return quietTurns >= 200;
    }, 'writer to stall');
    expect(lastCallbackPending).toBe(true);
    expect(c.writableNeedDrain).toBe(true);
    expect(acked).toBeLessThan(64 * MiB);
    expect(s.readableLength).toBeLessThanOrEqual(s.readableHighWaterMark + 2 * MiB);
    expect(sockets.server.readableLength).toBeLessThan(4 * MiB);
    const rssStalled = process.memoryUsage().rss;
    expect(rssStalled - rss0).toBeLessThan(100 * MiB);

    let received = 0;
    let rssMax = rssStalled;
    s.on('data', (d: Buffer) => {
      received += d.length;
      if ((received & (32 * MiB - 1)) < d.length) rssMax = Math.max(rssMax, process.memoryUsage().rss);
    });
    await once(s, 'end');
    expect(received).toBe(total);
    expect(rssMax - rss0).toBeLessThan(100 * MiB);
    sockets.close();
  });
});
