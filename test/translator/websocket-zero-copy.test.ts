/**
 * ChannelWebSocket.send writes `[frame head + channel byte, ...payload buffers]` straight to the
 * socket instead of copying the payload into one message. These tests read the frames back with a
 * real `ws` client and would fail on any corrupted, reordered or mis-sized frame.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { FrameParser, encodeFrame, type SpdyFrame } from '../../src/spdy/index.js';
import { Channel, type ChannelId } from '../../translator/channel-frame.js';
import { ChannelWebSocket } from '../../translator/websocket.js';
import { channelFrameHead } from '../../translator/ws-frame-head.js';
import { pattern, sha } from '../src/spdy/helpers.js';

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Pair {
  server: ChannelWebSocket;
  client: WebSocket;
  /** Every binary message the client received, in order. */
  messages: Buffer[];
  /** Resolves once `n` messages have arrived. */
  received(n: number): Promise<Buffer[]>;
}

/** A ChannelWebSocket on a real ws server and a ws client reading what it sends. */
async function pair(deflate = false): Promise<Pair> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: deflate });
  await once(wss, 'listening');
  cleanups.push(() => new Promise<void>((r) => wss.close(() => r())));
  const accepted = once(wss, 'connection') as Promise<[WebSocket]>;
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, { perMessageDeflate: deflate });
  cleanups.push(() => client.terminate());
  const messages: Buffer[] = [];
  const waiters: (() => void)[] = [];
  client.on('message', (data: Buffer, isBinary: boolean) => {
    expect(isBinary).toBe(true);
    messages.push(data);
    for (const w of waiters.splice(0)) w();
  });
  let closed = false;
  client.on('error', () => {});
  client.once('close', () => {
    closed = true;
    for (const w of waiters.splice(0)) w();
  });
  const [[ws]] = await Promise.all([accepted, once(client, 'open')]);
  const server = new ChannelWebSocket(ws, { idleTimeoutMs: 0 });
  cleanups.push(() => server.terminate());
  return {
    server,
    client,
    messages,
    async received(n: number): Promise<Buffer[]> {
      // A malformed frame makes the client fail the connection, a short one leaves it waiting for
      // bytes that never come: report either instead of waiting for the test timeout.
      const deadline = Date.now() + 10_000;
      while (messages.length < n) {
        if (closed) throw new Error(`client closed after ${messages.length} of ${n} messages`);
        if (Date.now() > deadline) throw new Error(`only ${messages.length} of ${n} messages arrived`);
        await new Promise<void>((r) => {
          const t = setTimeout(r, 250);
          waiters.push(() => (clearTimeout(t), r()));
        });
      }
      return messages;
    },
  };
}

/** The channel message a correct sender produces for `parts`. */
const expected = (channel: ChannelId, parts: readonly Buffer[]): Buffer => Buffer.concat([Buffer.from([channel]), ...parts]);

/** Splits `b` at `cuts` (offsets), keeping empty pieces where cuts repeat. */
function split(b: Buffer, cuts: number[]): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  for (const c of [...cuts].sort((x, y) => x - y)) {
    out.push(b.subarray(at, c));
    at = c;
  }
  out.push(b.subarray(at));
  return out;
}

describe('channelFrameHead', () => {
  it.each([
    [0, '820101'],
    [124, '827d01'],
    [125, '827e007e01'],
    [65534, '827effff01'],
    [65535, '827f000000000001000001'],
    [2 ** 32, '827f000000010000000101'],
  ])('payload %i → head %s (length counts the channel byte)', (n, hex) => {
    expect(channelFrameHead(Channel.Stdout, n).toString('hex')).toBe(hex);
  });
});

describe('ChannelWebSocket zero-copy send', { timeout: 30_000 }, () => {
  it('uses the direct path with the installed ws (a ws upgrade that breaks it fails here)', async () => {
    const p = await pair();
    expect(p.server.zeroCopy).toBe(true);
  });

  // Frame lengths (payload + channel byte) on both sides of the 7/16/64-bit length boundaries.
  const sizes = [0, 1, 2, 124, 125, 126, 127, 65533, 65534, 65535, 65536, 70_000, 1 << 20, 5 * (1 << 20) + 3];

  it.each(sizes)('a single %i-byte payload arrives byte-exact', async (n) => {
    const p = await pair();
    const payload = pattern(n, n + 11);
    p.server.send(Channel.Stdout, payload);
    p.server.send(Channel.Stderr, payload.subarray(0, Math.min(n, 3)));
    const [a, b] = await p.received(2);
    expect(a!.length).toBe(n + 1);
    expect(sha(a!)).toBe(sha(expected(Channel.Stdout, [payload])));
    expect(b).toEqual(expected(Channel.Stderr, [payload.subarray(0, Math.min(n, 3))]));
  });

  it.each(sizes)('a %i-byte payload in several parts (empty ones included) is one message, in order', async (n) => {
    const p = await pair();
    const payload = pattern(n, n + 5);
    const parts = split(payload, [0, Math.floor(n / 3), Math.floor(n / 3), Math.floor(n / 2), n]);
    p.server.send(Channel.Stdout, parts);
    p.server.send(Channel.Stdout, [Buffer.alloc(0), Buffer.alloc(0)]);
    const [m, empty] = await p.received(2);
    expect(sha(m!)).toBe(sha(expected(Channel.Stdout, [payload])));
    expect(empty).toEqual(Buffer.from([Channel.Stdout]));
  });

  it('frames written directly and frames ws writes itself (initial frame, pongs, status, close) stay in order', async () => {
    const p = await pair();
    const closed = once(p.client, 'close');
    p.server.sendInitialFrame(true, true);
    const sent: Buffer[] = [expected(Channel.Stdout, [])];
    for (let i = 0; i < 200; i++) {
      if (i % 7 === 0) p.client.ping(); // the server's pong is written by ws, between our frames
      const parts = [pattern(i * 97, i), pattern(i % 5, i + 1000)];
      const channel = i % 3 === 0 ? Channel.Stderr : Channel.Stdout;
      p.server.send(channel, i % 2 === 0 ? parts : Buffer.concat(parts));
      sent.push(expected(channel, parts));
    }
    void p.server.finish({ status: 'Success', metadata: {} });
    const [code] = (await closed) as [number];
    expect(code).toBe(1000);
    expect(p.messages).toHaveLength(sent.length + 1);
    p.messages.slice(0, -1).forEach((m, i) => expect(m.equals(sent[i]!), `message ${i}`).toBe(true));
    expect(p.messages.at(-1)![0]).toBe(Channel.Error);
    expect(JSON.parse(p.messages.at(-1)!.subarray(1).toString())).toMatchObject({ status: 'Success' });
  });

  it('the same buffer (and overlapping views of one buffer) can be sent in several messages', async () => {
    const p = await pair();
    const shared = pattern(100_000, 3);
    p.server.send(Channel.Stdout, shared);
    p.server.send(Channel.Stderr, shared);
    p.server.send(Channel.Stdout, [shared.subarray(10, 20), shared.subarray(0, 50_000), shared.subarray(15, 16)]);
    p.server.send(Channel.Stdout, shared.subarray(1));
    const got = await p.received(4);
    expect(got[0]!.equals(expected(Channel.Stdout, [shared]))).toBe(true);
    expect(got[1]!.equals(expected(Channel.Stderr, [shared]))).toBe(true);
    expect(got[2]!.equals(expected(Channel.Stdout, [shared.subarray(10, 20), shared.subarray(0, 50_000), shared.subarray(15, 16)]))).toBe(true);
    expect(got[3]!.equals(expected(Channel.Stdout, [shared.subarray(1)]))).toBe(true);
    expect(shared.equals(pattern(100_000, 3))).toBe(true); // the sender never writes into payloads
  });

  it('counts queued bytes (frame heads included), asks for a pause above the high-water mark and drains to 0', async () => {
    const p = await pair();
    p.client.pause(); // stop reading: the server's socket queue fills
    let ok = true;
    let sent = 0;
    while (ok && sent < 1000) {
      ok = p.server.send(Channel.Stdout, [pattern(1 << 16, sent), Buffer.from('x')]);
      sent++;
    }
    expect(ok).toBe(false);
    expect(p.server.queuedBytes).toBeGreaterThan(1024 * 1024);
    const drained = once(p.server, 'drain');
    p.client.resume();
    await drained;
    await p.received(sent);
    expect(p.server.queuedBytes).toBe(0);
    p.messages.forEach((m, i) => expect(m.equals(expected(Channel.Stdout, [pattern(1 << 16, i), Buffer.from('x')]))).toBe(true));
  });

  it('falls back to ws.send (copying) when permessage-deflate was negotiated, with the same messages', async () => {
    const p = await pair(true);
    expect(p.server.zeroCopy).toBe(false);
    const parts = [pattern(70_000, 1), Buffer.alloc(0), pattern(5, 2)];
    p.server.send(Channel.Stdout, parts);
    p.server.send(Channel.Stderr, parts[0]!);
    const [a, b] = await p.received(2);
    expect(a!.equals(expected(Channel.Stdout, parts))).toBe(true);
    expect(b!.equals(expected(Channel.Stderr, [parts[0]!]))).toBe(true);
  });
});

describe('SPDY DATA pieces → WebSocket messages, byte-exact', { timeout: 60_000 }, () => {
  /** Deterministic PRNG. */
  function rng(seed: number): () => number {
    let x = seed >>> 0 || 1;
    return () => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return (x >>> 0) / 0x100000000;
    };
  }

  it.each([1, 2, 3, 4, 5, 6])('seed %i: random frames, random chunk splits, piecewise DATA, batched like the translator', async (seed) => {
    const rand = rng(seed);
    // Two streams (stdout 1, stderr 3) of DATA frames of random sizes (0 to 200 KiB), some empty.
    const wanted: Record<number, Buffer[]> = { 1: [], 3: [] };
    const frames: SpdyFrame[] = [];
    for (let i = 0; i < 120; i++) {
      const streamId = rand() < 0.7 ? 1 : 3;
      const size = rand() < 0.1 ? 0 : Math.floor(rand() ** 3 * 200_000);
      const data = pattern(size, seed * 1000 + i);
      wanted[streamId]!.push(data);
      frames.push({ type: 'data', streamId, fin: false, data });
    }
    const bytes = Buffer.concat(frames.flatMap((f) => encodeFrame(f)));
    // Socket reads of random sizes, 1 byte to 128 KiB (headers split across reads included).
    const chunks: Buffer[] = [];
    for (let at = 0; at < bytes.length; ) {
      const n = Math.max(1, Math.floor(rand() ** 2 * 128 * 1024));
      // A fresh buffer per read, as a socket delivers them.
      chunks.push(Buffer.from(bytes.subarray(at, at + n)));
      at += n;
    }
    const p = await pair();
    const parser = new FrameParser({ streamData: true });
    const channelOf = (id: number): ChannelId => (id === 1 ? Channel.Stdout : Channel.Stderr);
    let sentMessages = 0;
    // One "turn" = a few reads; pieces of one channel run are sent as one message (an array), a
    // single piece as a Buffer, as translator-session.ts does.
    for (let i = 0; i < chunks.length; ) {
      const turn = chunks.slice(i, i + 1 + Math.floor(rand() * 4));
      i += turn.length;
      let run: Buffer[] = [];
      let runChannel: ChannelId = Channel.Stdout;
      const flush = (): void => {
        if (run.length === 0) return;
        p.server.send(runChannel, run.length === 1 ? run[0]! : run);
        sentMessages++;
        run = [];
      };
      for (const c of turn) {
        for (const f of parser.push(c)) {
          if (f.type !== 'data' || f.data.length === 0) continue;
          if (channelOf(f.streamId) !== runChannel) flush();
          runChannel = channelOf(f.streamId);
          run.push(f.data);
        }
      }
      flush();
    }
    const got = await p.received(sentMessages);
    const out: Record<number, Buffer[]> = { [Channel.Stdout]: [], [Channel.Stderr]: [] };
    for (const m of got) out[m[0]!]!.push(m.subarray(1));
    expect(sha(Buffer.concat(out[Channel.Stdout]!))).toBe(sha(Buffer.concat(wanted[1]!)));
    expect(sha(Buffer.concat(out[Channel.Stderr]!))).toBe(sha(Buffer.concat(wanted[3]!)));
    // The input reads were never written into (the parser's view of them stays intact).
    expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
  });
});
