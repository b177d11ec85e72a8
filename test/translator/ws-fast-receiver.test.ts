/**
 * The fast receive path (translator/ws-fast-receiver.ts): client frames parsed in front of ws's
 * Receiver, unmasked in place and handed on as the pieces of the socket reads they lie in. These
 * tests compare bytes: every message as sent, in order, and every byte the fast path does not take
 * handed to ws unchanged.
 */
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { Channel } from '../../translator/channel-frame.js';
import { ChannelWebSocket, MAX_MESSAGES_PER_READ, type InboundMessage } from '../../translator/websocket.js';
import { FastFrameReceiver, unmaskInPlace } from '../../translator/ws-fast-receiver.js';

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A deterministic pseudo-random generator (xorshift32), so a failure can be replayed. */
function rng(seed: number): (n: number) => number {
  let x = seed || 1;
  return (n: number) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

/** One client frame (RFC 6455 §5.2), masked with `mask` unless `mask` is null. */
function frame(opcode: number, payload: Buffer, o: { fin?: boolean; mask?: Buffer | null; rsv?: number } = {}): Buffer {
  const mask = o.mask === undefined ? randomBytes(4) : o.mask;
  const len = payload.length;
  const ext = len >= 65536 ? 8 : len > 125 ? 2 : 0;
  const head = Buffer.alloc(2 + ext + (mask ? 4 : 0));
  head[0] = ((o.fin ?? true) ? 0x80 : 0) | ((o.rsv ?? 0) << 4) | opcode;
  head[1] = (mask ? 0x80 : 0) | (ext === 0 ? len : ext === 2 ? 126 : 127);
  if (ext === 2) head.writeUInt16BE(len, 2);
  if (ext === 8) head.writeBigUInt64BE(BigInt(len), 2);
  if (!mask) return Buffer.concat([head, payload]);
  mask.copy(head, 2 + ext);
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i]! ^= mask[i & 3]!;
  return Buffer.concat([head, body]);
}

/** `wire` cut into pieces at random offsets (some 1-byte pieces, so headers split too). */
function cut(wire: Buffer, next: (n: number) => number): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  while (at < wire.length) {
    const n = next(4) === 0 ? 1 + next(3) : 1 + next(70_000);
    // Each piece its own allocation, as socket reads are (a view into one big buffer would hide a bug
    // that reads past a piece's end).
    out.push(Buffer.from(wire.subarray(at, at + n)));
    at += n;
  }
  return out;
}

/** Feed `pieces` and collect what comes out. */
function run(pieces: Buffer[], maxPayload = 32 * 1024 * 1024): { messages: Buffer[][]; passed: Buffer; receiver: FastFrameReceiver } {
  const messages: Buffer[][] = [];
  const passed: Buffer[] = [];
  const receiver = new FastFrameReceiver(maxPayload, {
    message: (parts, length) => {
      expect(parts.reduce((n, p) => n + p.length, 0)).toBe(length);
      expect(parts.every((p) => p.length > 0)).toBe(true);
      messages.push(parts);
    },
    passThrough: (raw) => passed.push(Buffer.from(raw)),
  });
  for (const p of pieces) receiver.push(p);
  return { messages, passed: Buffer.concat(passed), receiver };
}

describe('FastFrameReceiver (pure)', () => {
  it('unmaskInPlace at every phase equals unmasking the whole', () => {
    const data = randomBytes(1000);
    const mask = randomBytes(4);
    const whole = Buffer.from(data);
    for (let i = 0; i < whole.length; i++) whole[i]! ^= mask[i & 3]!;
    for (const at of [0, 1, 2, 3, 5, 31, 32, 33, 999]) {
      const copy = Buffer.from(data);
      unmaskInPlace(copy.subarray(0, at), mask, 0);
      unmaskInPlace(copy.subarray(at), mask, at & 3);
      expect(copy.equals(whole)).toBe(true);
    }
  });

  it.each([1, 2, 3, 4, 5])('binary messages of every length class, split at random (seed %i), arrive byte-exact and in order, pings passed to ws whole', (seed) => {
    const next = rng(seed * 7919);
    const sent: Buffer[] = [];
    const pings: Buffer[] = [];
    const wire: Buffer[] = [];
    const lengths = [0, 1, 2, 125, 126, 127, 65535, 65536, 65537, 32769, 32769, 32769];
    for (let i = 0; i < 60; i++) {
      const len = i < lengths.length ? lengths[i]! : next(5) === 0 ? next(200) : next(140_000);
      const payload = randomBytes(len);
      sent.push(payload);
      wire.push(frame(2, payload));
      if (next(6) === 0) {
        const ping = frame(9, randomBytes(next(126)));
        pings.push(ping);
        wire.push(ping);
      }
    }
    const { messages, passed, receiver } = run(cut(Buffer.concat(wire), next));
    expect(messages.map((m) => Buffer.concat(m).toString('hex'))).toEqual(sent.map((s) => s.toString('hex')));
    expect(passed.equals(Buffer.concat(pings))).toBe(true);
    expect(receiver.fallenBack).toBe(false);
    expect(receiver.midFrame).toBe(false);
  });

  it('hands the pieces on as views of the reads (no copy)', () => {
    const payload = randomBytes(100_000);
    const wire = frame(2, payload);
    const reads = [Buffer.from(wire.subarray(0, 40_000)), Buffer.from(wire.subarray(40_000))];
    const { messages } = run(reads);
    expect(messages).toHaveLength(1);
    expect(messages[0]!).toHaveLength(2);
    expect(messages[0]![0]!.buffer).toBe(reads[0]!.buffer);
    expect(messages[0]![1]!.buffer).toBe(reads[1]!.buffer);
    expect(Buffer.concat(messages[0]!).equals(payload)).toBe(true);
  });

  it.each([
    ['a text frame', frame(1, Buffer.from('hi'))],
    ['a fragmented binary frame', frame(2, Buffer.from([0, 1, 2]), { fin: false })],
    ['a continuation frame', frame(0, Buffer.from([0, 1, 2]))],
    ['an unmasked frame', frame(2, Buffer.from([0, 1, 2]), { mask: null })],
    ['a frame with RSV1 (compressed)', frame(2, Buffer.from([0, 1, 2]), { rsv: 4 })],
    ['a reserved opcode', frame(3, Buffer.from([0]))],
    ['a control frame over 125 bytes', frame(9, randomBytes(126))],
    ['a fragmented ping', frame(9, Buffer.from([1]), { fin: false })],
    ['a close frame', frame(8, Buffer.from([0x03, 0xe8]))],
  ])('from %s on, every byte goes to ws unchanged', (_what, odd) => {
    const before = [frame(2, randomBytes(50_000)), frame(2, randomBytes(10))];
    const after = [frame(2, randomBytes(70_000)), frame(9, Buffer.alloc(0)), frame(2, randomBytes(3))];
    for (let seed = 1; seed <= 4; seed++) {
      const { messages, passed, receiver } = run(cut(Buffer.concat([...before, odd, ...after]), rng(seed)));
      expect(messages).toHaveLength(2);
      expect(passed.equals(Buffer.concat([odd, ...after]))).toBe(true);
      expect(receiver.fallenBack).toBe(true);
    }
  });

  it('a frame above maxPayload goes to ws (which refuses it with 1009)', () => {
    const big = frame(2, randomBytes(1001));
    const { messages, passed } = run([frame(2, randomBytes(1000)), big], 1000);
    expect(messages).toHaveLength(1);
    expect(passed.equals(big)).toBe(true);
  });
});

/** A ChannelWebSocket on a real ws server with a ws client (which masks with a fresh key per frame). */
async function pair(): Promise<{
  server: ChannelWebSocket;
  client: WebSocket;
  inbound: InboundMessage[];
  wait(n: number): Promise<void>;
  waitStdin(bytes: number): Promise<void>;
  /** The server's socket under ws. */
  serverSocket: import('node:net').Socket;
}> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false, maxPayload: 32 * 1024 * 1024 });
  await once(wss, 'listening');
  cleanups.push(() => new Promise<void>((r) => wss.close(() => r())));
  const accepted = once(wss, 'connection') as Promise<[WebSocket]>;
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, { perMessageDeflate: false });
  cleanups.push(() => client.terminate());
  client.on('error', () => {});
  const [[ws]] = await Promise.all([accepted, once(client, 'open')]);
  const server = new ChannelWebSocket(ws, { idleTimeoutMs: 0 });
  cleanups.push(() => server.terminate());
  const inbound: InboundMessage[] = [];
  const waiters: (() => void)[] = [];
  server.on('message', (m: InboundMessage) => {
    inbound.push(m);
    for (const w of waiters.splice(0)) w();
  });
  return {
    serverSocket: (ws as unknown as { _socket: import('node:net').Socket })._socket,
    server,
    client,
    inbound,
    async wait(n: number): Promise<void> {
      while (inbound.length < n) await new Promise<void>((r) => waiters.push(r));
    },
    async waitStdin(bytes: number): Promise<void> {
      while (stdinBytes(inbound).length < bytes) await new Promise<void>((r) => waiters.push(r));
    },
  };
}

/** The stdin bytes of the messages, joined (a `data` message's payload or a `data-parts` message's parts). */
function stdinBytes(messages: InboundMessage[]): Buffer {
  const out: Buffer[] = [];
  for (const m of messages) {
    if (m.kind === 'data-parts') out.push(...m.parts);
    else if (m.kind === 'data' && m.channel === Channel.Stdin) out.push(m.payload);
  }
  return Buffer.concat(out);
}

describe('ChannelWebSocket with the fast receive path', () => {
  it('is installed on a server WebSocket and delivers kubectl-sized stdin messages byte-exact, one message per socket read', async () => {
    const p = await pair();
    expect(p.server.fastReceive).toBe(true);
    const sent: Buffer[] = [];
    for (let i = 0; i < 300; i++) {
      const payload = randomBytes(i % 7 === 0 ? 1 + (i % 100) : 32768);
      sent.push(payload);
      p.client.send(Buffer.concat([Buffer.from([Channel.Stdin]), payload]), { binary: true });
    }
    const total = Buffer.concat(sent);
    await p.waitStdin(total.length);
    expect(p.inbound.every((m) => m.kind === 'data-parts')).toBe(true);
    // The stdin messages of a socket read come as one: fewer messages than were sent.
    expect(p.inbound.length).toBeLessThan(300);
    expect(stdinBytes(p.inbound).equals(total)).toBe(true);
  });

  it('merges a read full of one-byte stdin messages into one message of few pieces (issue 26)', async () => {
    const p = await pair();
    expect(p.server.fastReceive).toBe(true);
    const raw = (p.client as unknown as { _socket: import('node:net').Socket })._socket;
    // 5,000 masked 7-byte frames `[0, x]` in one write: a few socket reads on the server.
    const data = randomBytes(5000);
    raw.write(Buffer.concat(Array.from(data, (x) => frame(2, Buffer.from([Channel.Stdin, x])))));
    await p.waitStdin(data.length);
    expect(stdinBytes(p.inbound).equals(data)).toBe(true);
    expect(p.inbound.length).toBeLessThanOrEqual(10);
    for (const m of p.inbound) if (m.kind === 'data-parts') expect(m.parts.length).toBeLessThanOrEqual(4);
  });

  it('a read of more than MAX_MESSAGES_PER_READ messages pauses the socket until the next turn; a read of kubectl-sized messages does not', async () => {
    const p = await pair();
    let pauses = 0;
    p.serverSocket.on('pause', () => pauses++);
    const raw = (p.client as unknown as { _socket: import('node:net').Socket })._socket;
    const big = randomBytes(5 * 32768);
    for (let at = 0; at < big.length; at += 32768) p.client.send(Buffer.concat([Buffer.from([Channel.Stdin]), big.subarray(at, at + 32768)]), { binary: true });
    await p.waitStdin(big.length);
    expect(pauses).toBe(0);
    const data = randomBytes(3 * MAX_MESSAGES_PER_READ);
    raw.write(Buffer.concat(Array.from(data, (x) => frame(2, Buffer.from([Channel.Stdin, x])))));
    await p.waitStdin(big.length + data.length);
    expect(pauses).toBeGreaterThanOrEqual(1);
    // … and resumed at the next turn.
    await new Promise((r) => setImmediate(r));
    expect(p.serverSocket.isPaused()).toBe(false);
    expect(stdinBytes(p.inbound).subarray(big.length).equals(data)).toBe(true);
  });

  it('leaves pings to ws (answered with a pong), decodes CLOSE and resize messages, and a text message falls back to ws with nothing lost', async () => {
    const p = await pair();
    const pong = once(p.client, 'pong');
    p.client.ping(Buffer.from('are you there'));
    expect((await pong)[0]).toEqual(Buffer.from('are you there'));
    const first = randomBytes(100_000);
    p.client.send(Buffer.concat([Buffer.from([Channel.Stdin]), first]), { binary: true });
    p.client.send(Buffer.from([Channel.Resize, ...Buffer.from('{"Width":80,"Height":24}')]), { binary: true });
    p.client.send(Buffer.from([255, Channel.Resize]), { binary: true });
    await p.wait(3);
    expect(p.inbound[0]!.kind).toBe('data-parts');
    expect(p.server.fastReceive).toBe(true);
    expect(p.inbound[1]).toEqual({ kind: 'data', channel: Channel.Resize, payload: Buffer.from('{"Width":80,"Height":24}') });
    expect(p.inbound[2]).toEqual({ kind: 'close', channel: Channel.Resize });
    // A text frame is ws's to judge (UTF-8); from there on ws reads alone, and reads correctly.
    p.client.send('\u0000text', { binary: false });
    const second = randomBytes(100_000);
    p.client.send(Buffer.concat([Buffer.from([Channel.Stdin]), second]), { binary: true });
    await p.waitStdin(first.length + 4 + second.length);
    expect(p.server.fastReceive).toBe(false);
    expect(stdinBytes(p.inbound).equals(Buffer.concat([first, Buffer.from('text'), second]))).toBe(true);
    const pong2 = once(p.client, 'pong');
    p.client.ping();
    await pong2;
  });

  it('a frame above maxPayload ends the connection with 1009, as ws alone does', async () => {
    const p = await pair();
    const closed = once(p.client, 'close');
    p.client.send(Buffer.alloc(32 * 1024 * 1024 + 1), { binary: true });
    expect((await closed)[0]).toBe(1009);
  });

  it('KSP_WS_FAST_RECEIVE=0 leaves the socket to ws alone, with the same messages', async () => {
    process.env.KSP_WS_FAST_RECEIVE = '0';
    let p: Awaited<ReturnType<typeof pair>>;
    try {
      p = await pair();
    } finally {
      delete process.env.KSP_WS_FAST_RECEIVE;
    }
    expect(p.server.fastReceive).toBe(false);
    const payload = randomBytes(100_000);
    p.client.send(Buffer.concat([Buffer.from([Channel.Stdin]), payload]), { binary: true });
    await p.waitStdin(payload.length);
    expect(p.inbound[0]!.kind).toBe('data-parts');
    expect(stdinBytes(p.inbound).equals(payload)).toBe(true);
  });

  it("the client's close frame closes the session cleanly", async () => {
    const p = await pair();
    const closed = once(p.server, 'close');
    p.client.close(1000);
    expect((await closed)[0]).toBe(1000);
  });
});
