/**
 * relayTunnel with a fake WebSocket and a fake upstream, to observe backpressure and endings through
 * the calls the relay makes (pause/resume/send/close), without timing.
 */
import { describe, expect, it } from 'vitest';
import { EventEmitter } from 'node:events';
import { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import { relayTunnel } from '../../translator/stream-tunnel-relay.js';

/** The part of ws's WebSocket the relay uses, scripted. */
class FakeWebSocket extends EventEmitter {
  readonly OPEN = 1;
  readonly CLOSED = 3;
  readyState = 1;
  bufferedAmount = 0;
  paused = false;
  sent: Buffer[] = [];
  readonly callbacks: Array<(err?: Error) => void> = [];
  closes: Array<{ code: number | undefined; reason: string | undefined }> = [];
  send(data: Buffer, _opts: unknown, cb: (err?: Error) => void): void {
    this.sent.push(data);
    this.bufferedAmount += data.length;
    this.callbacks.push(cb);
  }
  /** Pretend `n` queued sends reached the kernel. */
  flush(n = this.callbacks.length): void {
    for (const cb of this.callbacks.splice(0, n)) {
      this.bufferedAmount = 0;
      cb();
    }
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  close(code?: number, reason?: string): void {
    this.closes.push({ code, reason });
  }
  terminate(): void {}
  ping(): void {}
  /** The peer's close arrived and the socket is gone. */
  closed(code: number): void {
    this.readyState = 3;
    this.emit('close', code, Buffer.alloc(0));
  }
}

/** An upstream socket whose writes complete only when the test says so. */
class FakeUpstream extends Duplex {
  written: Buffer[] = [];
  readonly pending: Array<() => void> = [];
  endedByRelay = false;
  /** After release(), writes complete at once. */
  open = false;
  constructor() {
    super({ highWaterMark: 16, allowHalfOpen: true });
  }
  override _read(): void {}
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.written.push(chunk);
    if (this.open) cb();
    else this.pending.push(cb);
  }
  override _final(cb: () => void): void {
    this.endedByRelay = true;
    cb();
  }
  release(): void {
    this.open = true;
    for (const cb of this.pending.splice(0)) cb();
  }
}

const asWs = (f: FakeWebSocket): WebSocket => f as unknown as WebSocket;

describe('relayTunnel', () => {
  it('sends early bytes first, then each upstream read as one binary message', () => {
    const ws = new FakeWebSocket();
    const up = new FakeUpstream();
    relayTunnel(asWs(ws), up, Buffer.from('early'), { maxBytesPerSec: 0 });
    up.push(Buffer.from('one'));
    expect(ws.sent.map(String)).toEqual(['early']);
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        expect(ws.sent.map(String)).toEqual(['early', 'one']);
        resolve();
      }),
    );
  });

  it('pauses the upstream while the WebSocket send buffer is above the high-water mark', () => {
    const ws = new FakeWebSocket();
    const up = new FakeUpstream();
    relayTunnel(asWs(ws), up, Buffer.alloc(0), { maxBytesPerSec: 0, highWaterBytes: 100, lowWaterBytes: 10 });
    up.emit('data', Buffer.alloc(60));
    expect(up.isPaused()).toBe(false);
    up.emit('data', Buffer.alloc(60));
    expect(up.isPaused()).toBe(true);
    ws.flush();
    expect(up.isPaused()).toBe(false);
  });

  it("pauses the WebSocket while the upstream's write buffer is full, resumes on drain", async () => {
    const ws = new FakeWebSocket();
    const up = new FakeUpstream();
    relayTunnel(asWs(ws), up, Buffer.alloc(0), { maxBytesPerSec: 0 });
    expect(ws.paused).toBe(false);
    ws.emit('message', Buffer.alloc(8), true);
    ws.emit('message', Buffer.alloc(32), true);
    // The messages of one read are written together once they are all in (a microtask later).
    expect(up.written).toEqual([]);
    expect(ws.paused).toBe(false);
    await Promise.resolve();
    expect(up.written.map((b) => b.length)).toEqual([40]);
    expect(ws.paused).toBe(true);
    const drained = new Promise<void>((resolve) => up.once('drain', () => setImmediate(resolve)));
    up.release();
    await drained;
    expect(ws.paused).toBe(false);
    expect(Buffer.concat(up.written).length).toBe(40);
  });

  it('writes a read of 5,000 one-byte messages upstream as one write, in order (issue 26)', async () => {
    const ws = new FakeWebSocket();
    const up = new FakeUpstream();
    up.release();
    relayTunnel(asWs(ws), up, Buffer.alloc(0), { maxBytesPerSec: 0 });
    const data = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));
    for (const x of data) ws.emit('message', Buffer.from([x]), true);
    await Promise.resolve();
    expect(up.written.length).toBeLessThanOrEqual(8);
    expect(Buffer.concat(up.written).equals(data)).toBe(true);
  });

  it('pauses the upstream while too many messages wait to be written to the client, whatever their bytes', () => {
    const ws = new FakeWebSocket();
    const up = new FakeUpstream();
    relayTunnel(asWs(ws), up, Buffer.alloc(0), { maxBytesPerSec: 0 });
    for (let i = 0; i < 1023; i++) up.emit('data', Buffer.from([i & 0xff]));
    expect(up.isPaused()).toBe(false);
    up.emit('data', Buffer.from([1]));
    expect(up.isPaused()).toBe(true);
    ws.flush(700);
    expect(up.isPaused()).toBe(true);
    ws.flush(100);
    expect(up.isPaused()).toBe(false);
  });

  it('ends both sides at once on a frame ws cannot read: upstream destroyed, client socket read no more and dropped', async () => {
    const ws = new FakeWebSocket();
    const up = new FakeUpstream();
    const client = new Duplex({ read() {}, write: (_c, _e, cb) => cb() });
    const relay = relayTunnel(asWs(ws), up, Buffer.alloc(0), { maxBytesPerSec: 0, clientSocket: client });
    // What ws's receiverOnError does: schedule a resume of the socket, then emit 'error'.
    process.nextTick(() => client.resume());
    ws.emit('error', Object.assign(new RangeError('Max payload size exceeded'), { code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' }));
    expect(up.destroyed).toBe(true);
    expect(client.isPaused()).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(client.isPaused()).toBe(true);
    await new Promise<void>((resolve) => client.once('close', () => resolve()));
    expect(client.destroyed).toBe(true);
    ws.closed(1009);
    expect(await relay.done).toEqual({ side: 'client', reason: 'protocol-error' });
  });

  it('closes 1003 on a text message and destroys the upstream', async () => {
    const ws = new FakeWebSocket();
    const up = new FakeUpstream();
    const relay = relayTunnel(asWs(ws), up, Buffer.alloc(0), { maxBytesPerSec: 0 });
    ws.emit('message', Buffer.from('hi'), false);
    expect(ws.closes).toEqual([{ code: 1003, reason: 'tunnel: text messages are not supported, only binary' }]);
    expect(up.destroyed).toBe(true);
    expect(up.written).toEqual([]);
    ws.closed(1003);
    expect(await relay.done).toEqual({ side: 'client', reason: 'text-message' });
  });

  it('ends (not destroys) the upstream on close 1000, after flushing what the client sent', async () => {
    const ws = new FakeWebSocket();
    const up = new FakeUpstream();
    const relay = relayTunnel(asWs(ws), up, Buffer.alloc(0), { maxBytesPerSec: 0 });
    ws.emit('message', Buffer.from('bye'), true);
    ws.closed(1000);
    expect(up.destroyed).toBe(false);
    up.release();
    expect(await relay.done).toEqual({ side: 'client', reason: 'eof', closeCode: 1000 });
    expect(up.endedByRelay).toBe(true);
    expect(Buffer.concat(up.written).toString()).toBe('bye');
  });

  it('destroys the upstream on any other close code', async () => {
    const ws = new FakeWebSocket();
    const up = new FakeUpstream();
    const relay = relayTunnel(asWs(ws), up, Buffer.alloc(0), { maxBytesPerSec: 0 });
    ws.closed(1006);
    expect(up.destroyed).toBe(true);
    expect(await relay.done).toEqual({ side: 'client', reason: 'error', closeCode: 1006 });
  });

  it('closes 1000 on upstream EOF and 1011 on an upstream error', async () => {
    for (const [how, code] of [['eof', 1000], ['error', 1011]] as const) {
      const ws = new FakeWebSocket();
      const up = new FakeUpstream();
      const relay = relayTunnel(asWs(ws), up, Buffer.alloc(0), { maxBytesPerSec: 0 });
      if (how === 'eof') up.push(null);
      else up.destroy(new Error('ECONNRESET'));
      await new Promise<void>((resolve) => up.once('close', () => resolve()));
      expect(ws.closes.map((c) => c.code)).toEqual([code]);
      ws.closed(code);
      expect(await relay.done).toMatchObject({ side: 'upstream', reason: how });
    }
  });
});
