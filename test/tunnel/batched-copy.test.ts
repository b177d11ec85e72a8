/**
 * copyBatched (src/tunnel/batched-copy.ts), the agent's copy loop: the first chunk of an event-loop
 * turn is written at once and the turn's later chunks reach the destination in one writev, every byte arrives in order, the source is paused
 * while the destination holds AGENT_MAX_QUEUED_BYTES and resumed on 'drain', the source's end ends the
 * destination, and a stopped copy (or a destroyed destination) leaves the source paused. Tiny chunks
 * are bounded by their count too: the source pauses at AGENT_MAX_QUEUED_WRITES unwritten writes.
 */
import { describe, expect, it } from 'vitest';
import { Readable, Writable } from 'node:stream';
import { once } from 'node:events';
import { AGENT_MAX_QUEUED_BYTES as MAX_QUEUED_BYTES, AGENT_MAX_QUEUED_WRITES, copyBatched } from '../../src/tunnel/batched-copy.js';
import { deterministicBytes } from '../helpers/random-data.js';

/** A source whose chunks the test pushes (nothing is produced on read). */
function source(): Readable {
  return new Readable({ read() {} });
}

/** A destination recording each write call's chunks; `hold` keeps the callbacks until `release()`. */
function recorder(hold = false): { dst: Writable; calls: Buffer[][]; release: () => void } {
  const calls: Buffer[][] = [];
  const held: (() => void)[] = [];
  let holding = hold;
  const done = (cb: () => void): void => {
    if (holding) held.push(cb);
    else cb();
  };
  const dst = new Writable({
    write(chunk: Buffer, _e, cb) {
      calls.push([chunk]);
      done(cb);
    },
    writev(chunks, cb) {
      calls.push(chunks.map((c) => c.chunk as Buffer));
      done(cb);
    },
  });
  const release = (): void => {
    holding = false;
    for (const cb of held.splice(0)) cb();
  };
  return { dst, calls, release };
}

const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('copyBatched', () => {
  it('writes the first chunk of an event-loop turn at once and the turn’s other chunks in one writev, bytes in order, and ends the destination on the source end', async () => {
    const src = source();
    const { dst, calls } = recorder();
    copyBatched(src, dst);
    await nextTurn();
    const data = deterministicBytes(7, 10 * 16384 + 5);
    for (let off = 0; off < data.length; off += 16384) src.push(data.subarray(off, off + 16384));
    await nextTurn();
    await nextTurn();
    expect(calls.map((c) => c.length)).toEqual([1, 10]);
    src.push(Buffer.from('tail'));
    src.push(null);
    await once(dst, 'finish');
    expect(Buffer.concat(calls.flat()).equals(Buffer.concat([data, Buffer.from('tail')]))).toBe(true);
  });

  it('pauses the source while the destination holds AGENT_MAX_QUEUED_BYTES and resumes it on drain', async () => {
    const src = source();
    const { dst, calls, release } = recorder(true);
    copyBatched(src, dst);
    await nextTurn();
    const chunk = 64 * 1024;
    const data = deterministicBytes(9, MAX_QUEUED_BYTES + 4 * chunk);
    for (let off = 0; off < data.length; off += chunk) src.push(data.subarray(off, off + chunk));
    await nextTurn();
    // The destination holds MAX_QUEUED_BYTES; the rest waits in the source, which is paused.
    expect(src.isPaused()).toBe(true);
    expect(dst.writableLength).toBe(MAX_QUEUED_BYTES);
    expect(src.readableLength).toBe(data.length - MAX_QUEUED_BYTES);
    release();
    await nextTurn();
    await nextTurn();
    expect(src.isPaused()).toBe(false);
    src.push(null);
    await once(dst, 'finish');
    expect(Buffer.concat(calls.flat()).equals(data)).toBe(true);
  });

  it('stop() leaves the source paused with its bytes unread, and the destination open', async () => {
    const src = source();
    const { dst, calls } = recorder();
    const stop = copyBatched(src, dst);
    src.push(Buffer.from('one'));
    await nextTurn();
    await nextTurn();
    stop();
    src.push(Buffer.from('two'));
    src.push(null);
    await nextTurn();
    expect(Buffer.concat(calls.flat()).toString()).toBe('one');
    expect(src.isPaused()).toBe(true);
    expect(src.read()?.toString()).toBe('two');
    expect(dst.writableEnded).toBe(false);
  });

  it('stops when the destination is destroyed: no write after it, the source paused', async () => {
    const src = source();
    const { dst, calls } = recorder();
    dst.on('error', () => {});
    copyBatched(src, dst);
    src.push(Buffer.from('one'));
    await nextTurn();
    await nextTurn();
    dst.destroy();
    await once(dst, 'close');
    src.push(Buffer.from('two'));
    await nextTurn();
    expect(Buffer.concat(calls.flat()).toString()).toBe('one');
    expect(src.isPaused()).toBe(true);
    expect(src.listenerCount('data')).toBe(0);
  });
  it('pauses the source at AGENT_MAX_QUEUED_WRITES unwritten one-byte writes, far below the byte limit, and resumes once they are written (issue 26)', async () => {
    const src = source();
    const { dst, calls, release } = recorder(true);
    copyBatched(src, dst);
    await nextTurn();
    const data = deterministicBytes(11, 3 * AGENT_MAX_QUEUED_WRITES);
    for (const x of data) src.push(Buffer.from([x]));
    await nextTurn();
    await nextTurn();
    expect(src.isPaused()).toBe(true);
    // What reached the destination is bounded by the count (its bytes are nowhere near the byte limit).
    expect(dst.writableLength).toBe(AGENT_MAX_QUEUED_WRITES);
    expect(dst.writableLength).toBeLessThan(MAX_QUEUED_BYTES);
    release();
    src.push(null);
    await once(dst, 'finish');
    expect(Buffer.concat(calls.flat()).equals(data)).toBe(true);
  });
});
