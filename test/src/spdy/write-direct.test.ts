/**
 * SpdyStream.writeDirect, the relay fast path (DATA frames without a Writable write request): the
 * peer must read exactly the bytes written, in call order, mixed with ordinary writes and `end()`,
 * and the return value / whenWritable must carry the socket's backpressure.
 */
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_QUEUED_BYTES, type SpdyStream } from '../../../src/spdy/index.js';
import { connectionPair, digest, pattern, sha } from './helpers.js';

async function streamPair(): Promise<{ local: SpdyStream; remote: SpdyStream; sockets: Awaited<ReturnType<typeof connectionPair>>['sockets'] }> {
  const { client, server, sockets } = await connectionPair();
  const accepted = once(server, 'stream') as Promise<[SpdyStream]>;
  const opening = client.openStream({ streamtype: 'stdin' });
  const [remote] = await accepted;
  remote.reply();
  return { local: await opening, remote, sockets };
}

describe('SpdyStream.writeDirect', () => {
  it('delivers direct writes, multi-buffer payloads, ordinary and corked writes in call order, then FIN', async () => {
    const { local, remote } = await streamPair();
    const read = digest(remote);
    const pieces: Buffer[] = [];
    const add = (b: Buffer): Buffer => (pieces.push(b), b);
    let seed = 1;
    for (let i = 0; i < 50; i++) {
      const kind = i % 5;
      if (kind === 0) local.writeDirect(add(pattern(32768, seed++)));
      else if (kind === 1) local.writeDirect([add(pattern(1000, seed++)), add(Buffer.alloc(0)), add(pattern(70_000, seed++))]);
      else if (kind === 2) local.write(add(pattern(5000, seed++)));
      else if (kind === 3) {
        // Corked: the direct write must queue behind the corked one, not overtake it.
        local.cork();
        local.write(add(pattern(300, seed++)));
        local.writeDirect(add(pattern(400, seed++)));
        local.uncork();
      } else local.writeDirect(add(pattern(1024 * 1024 + 3, seed++))); // above the frame limit: split
    }
    local.end();
    const got = await read;
    const want = Buffer.concat(pieces);
    expect(got.bytes).toBe(want.length);
    expect(got.sha256).toBe(sha(want));
  });

  it('returns false once the socket queue is at its limit, and whenWritable calls back when it drains', async () => {
    const { local, remote, sockets } = await streamPair();
    remote.pause();
    sockets.server.pause();
    const chunk = Buffer.alloc(256 * 1024, 7);
    let written = 0;
    // Write until false, let the turn's batch go to the kernel, and repeat until the kernel's
    // loopback buffers are full too and the queue stays at the limit across a turn.
    for (;;) {
      while (local.writeDirect(chunk)) {
        written += chunk.length;
        if (written > 256 * 1024 * 1024) throw new Error('writeDirect never reported backpressure');
      }
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      if (sockets.client.writableLength >= DEFAULT_MAX_QUEUED_BYTES) break;
    }
    expect(local.writeDirect(chunk)).toBe(false);
    let called = false;
    const writable = new Promise<void>((r) => local.whenWritable(() => ((called = true), r())));
    await new Promise((r) => setImmediate(r));
    expect(called).toBe(false);
    remote.resume();
    sockets.server.resume();
    await writable;
    expect(sockets.client.writableLength).toBeLessThan(DEFAULT_MAX_QUEUED_BYTES);
  });
});
