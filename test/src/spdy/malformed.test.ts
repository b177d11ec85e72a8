import { once } from 'node:events';
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  encodeFrame,
  FrameParser,
  GoAwayStatus,
  HeaderCompressor,
  RstStatus,
  SpdyConnection,
  type SpdyFrame,
  type SpdyStream,
} from '../../../src/spdy/index.js';
import { captureLogs, socketPair } from './helpers.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const wire = (...fs: SpdyFrame[]): Buffer => Buffer.concat(fs.flatMap((f) => encodeFrame(f)));

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** A server SpdyConnection driven by a raw client socket that reads frames back. */
async function rawServer(head?: Buffer) {
  const sockets = await socketPair();
  cleanups.push(() => sockets.close());
  const logs = captureLogs();
  const server = new SpdyConnection(sockets.server, { isServer: true, logger: logs.logger, ...(head ? { head } : {}) });
  const streams: SpdyStream[] = [];
  server.on('stream', (s: SpdyStream) => {
    s.on('error', () => {});
    streams.push(s);
    s.reply();
  });
  const raw: net.Socket = sockets.client;
  const parser = new FrameParser();
  const frames: SpdyFrame[] = [];
  const waiters: (() => void)[] = [];
  raw.on('data', (c: Buffer) => {
    frames.push(...parser.push(c));
    for (const w of waiters.splice(0)) w();
  });
  const ended = once(raw, 'end');
  const compressor = new HeaderCompressor();
  return {
    server,
    raw,
    logs,
    streams,
    ended,
    syn: (streamId: number, fin = false): SpdyFrame => ({
      type: 'syn_stream', streamId, associatedStreamId: 0, priority: 0, fin, unidirectional: false,
      headerBlock: compressor.compress({ streamtype: 'data' }),
    }),
    /** Resolves with the next frame the server sends. */
    async next(): Promise<SpdyFrame> {
      while (frames.length === 0) await new Promise<void>((r) => waiters.push(r));
      return frames.shift()!;
    },
    /** Proves the connection is alive and processed everything before: a PING echo comes back. */
    async alive(id = 101): Promise<void> {
      raw.write(wire({ type: 'ping', id }));
      expect(await this.next()).toEqual({ type: 'ping', id });
    },
  };
}

describe('malformed input to a server SpdyConnection', { timeout: 20_000 }, () => {
  it.each([
    ['bad version', hex('8002 0006 00 000004 00000001')],
    ['bad PING length', hex('8003 0006 00 000005 00000001 00')],
    ['RST_STREAM with length 4', hex('8003 0003 00 000004 00000001')],
    ['header block that fails to inflate', wire({ type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: hex('78f9e3c6a7c2 ffffffff00') })],
    ['header block with the wrong dictionary id', wire({ type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: hex('78bb 12345678 0000ffff') })],
  ])('%s → GOAWAY(PROTOCOL_ERROR), socket ended, one warn line', async (_n, bytes) => {
    const t = await rawServer();
    const closed = once(t.server, 'close');
    t.raw.write(bytes);
    expect(await t.next()).toEqual({ type: 'goaway', lastGoodStreamId: 0, status: GoAwayStatus.PROTOCOL_ERROR });
    await t.ended;
    t.raw.end();
    await closed;
    expect(t.logs.warn).toHaveLength(1);
    expect(t.logs.warn[0]).toMatch(/GOAWAY status 1/);
  });

  it('truncated frame then close: connection closes, warn logged, nothing sent', async () => {
    const t = await rawServer();
    const closed = once(t.server, 'close');
    t.raw.end(hex('8003 0006 00 000004 0000')); // PING cut in the middle
    await closed;
    expect(t.logs.warn).toEqual([expect.stringMatching(/mid-frame/)]);
  });

  it('reused stream id → RST_STREAM(PROTOCOL_ERROR); connection stays up', async () => {
    const t = await rawServer();
    t.raw.write(wire(t.syn(1)));
    expect(await t.next()).toMatchObject({ type: 'syn_reply', streamId: 1 });
    t.raw.write(wire(t.syn(1)));
    expect(await t.next()).toEqual({ type: 'rst_stream', streamId: 1, status: RstStatus.PROTOCOL_ERROR });
    await t.alive();
    expect(t.logs.warn).toEqual([expect.stringMatching(/reuses id 1/)]);
    expect(t.streams).toHaveLength(1);
  });

  it('even stream id from a client → RST_STREAM(PROTOCOL_ERROR)', async () => {
    const t = await rawServer();
    t.raw.write(wire(t.syn(2)));
    expect(await t.next()).toEqual({ type: 'rst_stream', streamId: 2, status: RstStatus.PROTOCOL_ERROR });
    await t.alive();
    expect(t.logs.warn).toHaveLength(1);
    expect(t.streams).toHaveLength(0);
  });

  it('DATA on an unknown stream → RST_STREAM(INVALID_STREAM)', async () => {
    const t = await rawServer();
    t.raw.write(wire({ type: 'data', streamId: 5, fin: false, data: Buffer.from('x') }));
    expect(await t.next()).toEqual({ type: 'rst_stream', streamId: 5, status: RstStatus.INVALID_STREAM });
    await t.alive();
    expect(t.logs.warn).toEqual([expect.stringMatching(/unknown stream 5/)]);
  });

  it('DATA on an unknown stream arriving in several socket reads → one RST_STREAM', async () => {
    const t = await rawServer();
    const bytes = wire({ type: 'data', streamId: 5, fin: false, data: Buffer.alloc(3000, 7) });
    for (let at = 0; at < bytes.length; at += 1000) {
      t.raw.write(bytes.subarray(at, at + 1000));
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(await t.next()).toEqual({ type: 'rst_stream', streamId: 5, status: RstStatus.INVALID_STREAM });
    await t.alive();
    expect(t.logs.warn).toEqual([expect.stringMatching(/unknown stream 5/)]);
  });

  it('a DATA frame arriving in several socket reads reaches the stream intact', async () => {
    const t = await rawServer();
    t.raw.write(wire(t.syn(1)));
    expect(await t.next()).toMatchObject({ type: 'syn_reply', streamId: 1 });
    const payload = Buffer.alloc(3000);
    for (let i = 0; i < payload.length; i++) payload[i] = i & 0xff;
    const bytes = wire({ type: 'data', streamId: 1, fin: true, data: payload });
    for (let at = 0; at < bytes.length; at += 1000) {
      t.raw.write(bytes.subarray(at, at + 1000));
      await new Promise((r) => setTimeout(r, 5));
    }
    const chunks: Buffer[] = [];
    const stream = t.streams[0]!;
    stream.on('data', (c: Buffer) => chunks.push(c));
    await once(stream, 'end');
    expect(Buffer.concat(chunks).equals(payload)).toBe(true);
    await t.alive();
    expect(t.logs.warn).toEqual([]);
  });

  it('DATA after FIN → RST_STREAM(STREAM_ALREADY_CLOSED)', async () => {
    const t = await rawServer();
    t.raw.write(wire(t.syn(1), { type: 'data', streamId: 1, fin: true, data: Buffer.from('a') }));
    expect(await t.next()).toMatchObject({ type: 'syn_reply', streamId: 1 });
    t.raw.write(wire({ type: 'data', streamId: 1, fin: false, data: Buffer.from('b') }));
    expect(await t.next()).toEqual({ type: 'rst_stream', streamId: 1, status: RstStatus.STREAM_ALREADY_CLOSED });
    await t.alive();
    expect(t.logs.warn).toHaveLength(1);
  });

  it('SETTINGS, WINDOW_UPDATE and unknown control frames are ignored silently', async () => {
    const t = await rawServer();
    t.raw.write(wire({ type: 'settings', clearSettings: false, entries: [{ flags: 0, id: 7, value: 1 }] }, { type: 'window_update', streamId: 0, delta: 100 }));
    t.raw.write(hex('8003 00ff 00 000002 abcd'));
    await t.alive();
    expect(t.logs.warn).toEqual([]);
  });

  it('head bytes are parsed first; DATA right behind a SYN_STREAM waits for its header block', async () => {
    const compressor = new HeaderCompressor();
    const syn = (id: number): SpdyFrame => ({ type: 'syn_stream', streamId: id, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: compressor.compress({ streamtype: 'stdin', n: id }) });
    const head = wire(syn(1), { type: 'data', streamId: 1, fin: false, data: Buffer.from('one') }, syn(3));
    const t = await rawServer(head);
    t.raw.write(wire({ type: 'data', streamId: 3, fin: true, data: Buffer.from('three') }, { type: 'data', streamId: 1, fin: true, data: Buffer.from('!') }));
    const replies = [await t.next(), await t.next()];
    expect(replies.map((f) => f.type)).toEqual(['syn_reply', 'syn_reply']);
    const texts = await Promise.all(t.streams.map(async (s) => {
      const parts: Buffer[] = [];
      for await (const c of s) parts.push(c as Buffer);
      return Buffer.concat(parts).toString();
    }));
    expect(texts).toEqual(['one!', 'three']);
    expect(t.streams.map((s) => s.headers['n'])).toEqual([['1'], ['3']]);
    expect(t.logs.warn).toEqual([]);
  });

  it('pings with the peer parity are echoed; stray echoes of ours are ignored', async () => {
    const t = await rawServer();
    t.raw.write(wire({ type: 'ping', id: 2 })); // our (server) parity, nothing pending: ignored
    await t.alive(7);
  });
});
