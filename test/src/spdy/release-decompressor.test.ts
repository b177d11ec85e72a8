/**
 * Releasing the inbound header decompressor (`SpdyConnection.releaseHeaderDecompressor`): the zlib
 * context is closed and dropped, and any later header block is a connection error.
 */
import { once } from 'node:events';
import type net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import type zlib from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import {
  encodeFrame,
  FrameParser,
  GoAwayStatus,
  HeaderCompressor,
  HeaderDecompressor,
  RstStatus,
  SpdyConnection,
  SpdyProtocolError,
  type SpdyFrame,
  type SpdyStream,
} from '../../../src/spdy/index.js';
import { captureLogs, digest, sha, socketPair } from './helpers.js';

const wire = (...fs: SpdyFrame[]): Buffer => Buffer.concat(fs.flatMap((f) => encodeFrame(f)));

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** The zlib stream inside a decompressor (private; for proving it is closed and collectable). */
const inflateOf = (d: HeaderDecompressor): zlib.Inflate | undefined => (d as unknown as { inflate?: zlib.Inflate }).inflate;

/** A full, synchronous garbage collection (exposes `gc` for this process if needed). */
function collectGarbage(): void {
  v8.setFlagsFromString('--expose-gc');
  (vm.runInNewContext('gc') as () => void)();
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('HeaderDecompressor.release', () => {
  it('creates its zlib context on the first block only', async () => {
    const d = new HeaderDecompressor();
    expect(d.hasContext).toBe(false);
    expect(await d.decompress(new HeaderCompressor().compress({ streamtype: 'error' }), 1)).toEqual({ streamtype: ['error'] });
    expect(d.hasContext).toBe(true);
    d.close();
    expect(d.hasContext).toBe(false);
  });

  it('closes the inflate, drops every reference to it, and refuses later blocks connection-scoped', async () => {
    const c = new HeaderCompressor();
    const d = new HeaderDecompressor();
    expect(await d.decompress(c.compress({ streamtype: 'error' }), 1)).toEqual({ streamtype: ['error'] });
    // Only a weak reference: a local would keep the Inflate alive for this whole function.
    const ref = new WeakRef(inflateOf(d)!);
    d.release();
    expect(d.isReleased).toBe(true);
    await tick();
    expect(d.hasContext).toBe(false);
    // Node's zlib drops its native handle (inflateEnd: the window is freed) on close.
    expect((ref.deref() as unknown as { _handle: unknown })._handle).toBeNull();
    const refused = d.decompress(c.compress({ streamtype: 'stdout' }), 3);
    await expect(refused).rejects.toBeInstanceOf(SpdyProtocolError);
    await expect(refused).rejects.toMatchObject({ code: 'SPDY_UNEXPECTED_HEADERS', streamId: undefined, status: GoAwayStatus.PROTOCOL_ERROR });
    // Nothing keeps the Inflate object alive any more (its JS output buffer goes with it).
    for (let i = 0; i < 5 && ref.deref() !== undefined; i++) {
      await tick();
      collectGarbage();
    }
    expect(ref.deref()).toBeUndefined();
    d.release(); // idempotent
    d.close();
  });

  it('still inflates the blocks handed in before release, in order, then drops the context', async () => {
    const c = new HeaderCompressor();
    const d = new HeaderDecompressor();
    const first = d.decompress(c.compress({ streamtype: 'error' }), 1);
    const second = d.decompress(c.compress({ streamtype: 'stdout', big: 'x'.repeat(100_000) }), 3);
    d.release();
    const late = d.decompress(c.compress({ streamtype: 'stderr' }), 5);
    expect(await first).toEqual({ streamtype: ['error'] });
    expect(await second).toEqual({ streamtype: ['stdout'], big: ['x'.repeat(100_000)] });
    await expect(late).rejects.toMatchObject({ code: 'SPDY_UNEXPECTED_HEADERS' });
    expect(d.hasContext).toBe(false);
  });

  it('close() while a block is inflating settles it (rejects) instead of leaving it pending', async () => {
    const d = new HeaderDecompressor();
    const pending = d.decompress(new HeaderCompressor().compress({ big: 'y'.repeat(500_000) }), 1);
    await Promise.resolve();
    await Promise.resolve();
    d.close();
    const outcome = await pending.then(
      () => 'resolved',
      (e: unknown) => (e as SpdyProtocolError).code,
    );
    // Either the block finished before close() got to it, or it was refused: never left hanging.
    expect(['resolved', 'SPDY_UNEXPECTED_HEADERS']).toContain(outcome);
    expect(d.hasContext).toBe(false);
  });

  it('a release before any block never creates a context', async () => {
    const d = new HeaderDecompressor();
    d.release();
    await expect(d.decompress(new HeaderCompressor().compress({ a: 'b' }))).rejects.toMatchObject({ code: 'SPDY_UNEXPECTED_HEADERS' });
    expect(d.hasContext).toBe(false);
  });
});

/**
 * Our client-role SpdyConnection (as the translator uses it) against a raw server peer that answers
 * each SYN_STREAM with a SYN_REPLY and can send any frame afterwards.
 */
async function rawPeer() {
  const sockets = await socketPair();
  cleanups.push(() => sockets.close());
  const logs = captureLogs();
  const client = new SpdyConnection(sockets.client, { isServer: false, logger: logs.logger });
  const raw: net.Socket = sockets.server;
  const parser = new FrameParser();
  const compressor = new HeaderCompressor();
  const frames: SpdyFrame[] = [];
  const waiters: (() => void)[] = [];
  raw.on('data', (c: Buffer) => {
    for (const f of parser.push(c)) {
      if (f.type === 'syn_stream') raw.write(wire({ type: 'syn_reply', streamId: f.streamId, fin: false, headerBlock: compressor.compress({}) }));
      else frames.push(f);
    }
    for (const w of waiters.splice(0)) w();
  });
  return {
    client,
    raw,
    logs,
    compressor,
    /** Resolves with the next frame the client sends other than SYN_STREAM. */
    async next(): Promise<SpdyFrame> {
      while (frames.length === 0) await new Promise<void>((r) => waiters.push(r));
      return frames.shift()!;
    },
  };
}

describe('SpdyConnection.releaseHeaderDecompressor', { timeout: 20_000 }, () => {
  it('after release, DATA, PING and RST_STREAM still work; openStream is refused', async () => {
    const p = await rawPeer();
    const stdout = await p.client.openStream({ streamtype: 'stdout' });
    const error = await p.client.openStream({ streamtype: 'error' });
    p.client.releaseHeaderDecompressor();
    expect(p.client.headerDecompressorReleased).toBe(true);
    await expect(p.client.openStream({ streamtype: 'stderr' })).rejects.toThrow(/decompressor released/);
    const payload = Buffer.alloc(200_000, 7);
    const got = digest(stdout);
    p.raw.write(Buffer.concat([wire({ type: 'data', streamId: stdout.id, fin: false, data: payload }), wire({ type: 'ping', id: 2 })]));
    expect(await p.next()).toEqual({ type: 'ping', id: 2 });
    p.raw.write(wire({ type: 'data', streamId: stdout.id, fin: true, data: Buffer.alloc(0) }));
    expect(await got).toEqual({ bytes: payload.length, sha256: sha(payload) });
    const reset = once(error, 'reset');
    p.raw.write(wire({ type: 'rst_stream', streamId: error.id, status: 5 }));
    expect(await reset).toEqual([5]);
    expect(p.client.closed).toBe(false);
    expect(p.logs.warn).toEqual([]);
  });

  it.each([
    ['HEADERS on an open stream', false, (id: number, c: HeaderCompressor): SpdyFrame => ({ type: 'headers', streamId: id, fin: false, headerBlock: c.compress({ late: 'yes' }) })],
    [
      'a SYN_STREAM that a listener would accept',
      true,
      (_id: number, c: HeaderCompressor): SpdyFrame => ({ type: 'syn_stream', streamId: 2, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: c.compress({ streamtype: 'x' }) }),
    ],
  ])('a header block whose headers would be used (%s) → GOAWAY(PROTOCOL_ERROR), streams failed, connection closed', async (_n, listen, frame) => {
    const p = await rawPeer();
    if (listen) p.client.on('stream', (s: SpdyStream) => s.reply());
    const stdout = await p.client.openStream({ streamtype: 'stdout' });
    stdout.on('error', () => {});
    p.client.releaseHeaderDecompressor();
    const closed = once(p.client, 'close');
    const streamClosed = new Promise<void>((resolve) => stdout.once('close', () => resolve()));
    // DATA before the offending frame is still delivered.
    const chunks: Buffer[] = [];
    stdout.on('data', (c: Buffer) => chunks.push(c));
    p.raw.write(Buffer.concat([wire({ type: 'data', streamId: stdout.id, fin: false, data: Buffer.from('before') }), wire(frame(stdout.id, p.compressor))]));
    expect(await p.next()).toEqual({ type: 'goaway', lastGoodStreamId: listen ? 2 : 0, status: GoAwayStatus.PROTOCOL_ERROR });
    await streamClosed;
    expect(Buffer.concat(chunks).toString()).toBe('before');
    expect(stdout.readableEnded).toBe(false); // failed, not ended
    p.raw.end();
    await closed;
    expect(p.logs.warn).toHaveLength(1);
    expect(p.logs.warn[0]).toMatch(/after the header decompressor was released; sending GOAWAY status 1/);
  });

  it.each([
    ['a duplicate SYN_REPLY', (id: number, c: HeaderCompressor): SpdyFrame => ({ type: 'syn_reply', streamId: id, fin: false, headerBlock: c.compress({}) }), (id: number) => [id, RstStatus.STREAM_IN_USE]],
    ['a SYN_REPLY for a stream never opened', (_id: number, c: HeaderCompressor): SpdyFrame => ({ type: 'syn_reply', streamId: 99, fin: false, headerBlock: c.compress({}) }), () => [99, RstStatus.INVALID_STREAM]],
    ['HEADERS on an unknown stream', (_id: number, c: HeaderCompressor): SpdyFrame => ({ type: 'headers', streamId: 99, fin: false, headerBlock: c.compress({}) }), () => [99, RstStatus.INVALID_STREAM]],
    [
      'a SYN_STREAM nobody listens for',
      (_id: number, c: HeaderCompressor): SpdyFrame => ({ type: 'syn_stream', streamId: 2, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: c.compress({ streamtype: 'x' }) }),
      () => [2, RstStatus.REFUSED_STREAM],
    ],
    [
      'a SYN_STREAM with our parity',
      (_id: number, c: HeaderCompressor): SpdyFrame => ({ type: 'syn_stream', streamId: 9, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: c.compress({ streamtype: 'x' }) }),
      () => [9, RstStatus.PROTOCOL_ERROR],
    ],
    // Not even a valid block: after release it is not read, so it cannot fail to inflate.
    ['a duplicate SYN_REPLY with garbage for a block', (id: number): SpdyFrame => ({ type: 'syn_reply', streamId: id, fin: false, headerBlock: Buffer.from('garbage') }), (id: number) => [id, RstStatus.STREAM_IN_USE]],
  ])('%s after release gets the same stream-scoped answer as before; the connection carries on', async (_n, frame, answer) => {
    const p = await rawPeer();
    const stdout = await p.client.openStream({ streamtype: 'stdout' });
    stdout.on('error', () => {});
    p.client.releaseHeaderDecompressor();
    p.raw.write(wire(frame(stdout.id, p.compressor)));
    const [id, status] = answer(stdout.id);
    expect(await p.next()).toEqual({ type: 'rst_stream', streamId: id, status });
    p.raw.write(wire({ type: 'ping', id: 4 }));
    expect(await p.next()).toEqual({ type: 'ping', id: 4 });
    expect(p.client.closed).toBe(false);
  });

  it('after release, DATA and HEADERS in one read: the DATA is delivered, the HEADERS ends the connection', async () => {
    const p = await rawPeer();
    const s = await p.client.openStream({ streamtype: 'error' });
    p.client.releaseHeaderDecompressor();
    const got: Buffer[] = [];
    s.on('data', (c: Buffer) => got.push(c));
    s.on('error', () => {});
    p.raw.write(Buffer.concat([wire({ type: 'data', streamId: s.id, fin: false, data: Buffer.from('x') }), wire({ type: 'headers', streamId: s.id, fin: false, headerBlock: p.compressor.compress({}) })]));
    expect(await p.next()).toMatchObject({ type: 'goaway', status: GoAwayStatus.PROTOCOL_ERROR });
    expect(Buffer.concat(got).toString()).toBe('x');
  });

  it('releasing while a SYN_REPLY is still inflating lets that reply through', async () => {
    const p = await rawPeer();
    // Release the moment the reply's block is handed to the decompressor, before it is decoded.
    const d = (p.client as unknown as { decompressor: HeaderDecompressor }).decompressor;
    const decompress = d.decompress.bind(d);
    d.decompress = (block, id) => {
      const out = decompress(block, id);
      p.client.releaseHeaderDecompressor();
      return out;
    };
    const s: SpdyStream = await p.client.openStream({ streamtype: 'error' });
    expect(s.replyHeaders).toEqual({});
    expect(p.client.headerDecompressorReleased).toBe(true);
    expect(d.hasContext).toBe(false);
    expect(p.client.closed).toBe(false);
    expect(p.logs.warn).toEqual([]);
  });
});
