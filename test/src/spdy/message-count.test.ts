/**
 * Backpressure counts frames and chunks as well as bytes (issue 26): a peer that sends tiny DATA
 * frames to a stream whose consumer does not read must not queue one chunk per frame under the
 * stream's byte highWaterMark, and a writer of tiny frames waits at DEFAULT_MAX_QUEUED_FRAMES frames
 * not yet written, far below the byte limit. Bytes are checked exactly, in order.
 */
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_QUEUED_FRAMES } from '../../../src/spdy/frame-writer.js';
import type { SpdyStream } from '../../../src/spdy/index.js';
import { connectionPair } from './helpers.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

/** The chunks waiting in a Readable's buffer (Node 20: a BufferList; later: an array and an index). */
function bufferedChunks(s: SpdyStream): number {
  const state = (s as unknown as { _readableState: { buffer: { length: number } | unknown[]; bufferIndex?: number } })._readableState;
  return Array.isArray(state.buffer) ? state.buffer.length - (state.bufferIndex ?? 0) : (state.buffer as { length: number }).length;
}

describe('SPDY backpressure by count', { timeout: 30_000 }, () => {
  it('20,000 one-byte DATA frames to a paused stream are held as a few chunks; every byte arrives in order', async () => {
    const { client, server, sockets } = await connectionPair();
    const accepted = once(server, 'stream') as Promise<[SpdyStream]>;
    const opening = client.openStream({ streamtype: 'stdout' });
    const [s] = await accepted;
    s.reply();
    const c = await opening;
    s.pause();
    const data = Buffer.from(Array.from({ length: 20_000 }, (_, i) => (i * 7) % 256));
    // One DATA frame per byte (writeDirect with a one-byte buffer each).
    for (const x of data) c.writeDirect(Buffer.from([x]));
    // Wait until everything sent has arrived, but for what may still be held (under 16 KiB).
    const deadline = Date.now() + 10_000;
    while (s.readableLength < data.length - 16 * 1024) {
      if (Date.now() > deadline) throw new Error(`only ${s.readableLength} of ${data.length} bytes arrived`);
      await turn();
    }
    // Held as few chunks, not one per frame.
    expect(bufferedChunks(s)).toBeLessThan(50);
    const got: Buffer[] = [];
    s.on('data', (d: Buffer) => got.push(d));
    s.resume();
    c.end();
    await once(s, 'end');
    expect(Buffer.concat(got).equals(data)).toBe(true);
    sockets.close();
  });

  it('a writer of tiny frames waits once DEFAULT_MAX_QUEUED_FRAMES frames are unwritten, though their bytes are far below the byte limit', async () => {
    const { client, server, sockets } = await connectionPair();
    const accepted = once(server, 'stream') as Promise<[SpdyStream]>;
    const opening = client.openStream({ streamtype: 'stdin' });
    const [s] = await accepted;
    s.reply();
    const c = await opening;
    // Cork the client's socket: every frame stays queued (not written) until uncorked.
    sockets.client.cork();
    let accepting = 0;
    while (c.writeDirect(Buffer.from([accepting & 0xff]))) accepting++;
    expect(accepting + 1).toBe(DEFAULT_MAX_QUEUED_FRAMES);
    expect(sockets.client.writableLength).toBeLessThan(64 * 1024);
    let resumed = false;
    c.whenWritable(() => (resumed = true));
    await turn();
    expect(resumed).toBe(false);
    sockets.client.uncork();
    while (!resumed) await turn();
    const got: Buffer[] = [];
    s.on('data', (d: Buffer) => got.push(d));
    c.end();
    await once(s, 'end');
    expect(Buffer.concat(got).length).toBe(DEFAULT_MAX_QUEUED_FRAMES);
    sockets.close();
  });
});
