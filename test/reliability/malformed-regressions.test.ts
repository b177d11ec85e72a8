/**
 * Focused regression tests for the bugs the malformed-input catalogue found (docs/reliability.md):
 * - `tty&stderr` alone was upgraded and then refused on channel 3 (H66): now a 400 before the upgrade;
 * - an undecodable error stream of up to 1 MiB was quoted whole in the channel-3 Status (U27);
 * - DATA on a stream the peer had reset got RST_STREAM(STREAM_ALREADY_CLOSED) or silence depending on
 *   when the reset stream finished closing (S20): now always dropped;
 * - every RST_STREAM(CANCEL) on an open stream whose readable side nobody reads added an 'end'
 *   listener (U29, 100 resets: MaxListenersExceededWarning; a storm grew without bound).
 */
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { encodeFrame, FrameParser, HeaderCompressor, SpdyConnection, type SpdyFrame, type SpdyStream } from '../../src/spdy/index.js';
import { decodeErrorStream, MAX_QUOTED_ERROR_STREAM_CHARS } from '../../src/wire/error-stream.js';
import { parseRemoteCommandOptions } from '../../src/wire/remote-command-options.js';
import { socketPair } from '../src/spdy/helpers.js';

describe('remote-command options: stderr is dropped under tty before streams are counted', () => {
  it('tty and stderr only → 400 `you must specify at least 1 of stdin, stdout, stderr`', () => {
    const parsed = parseRemoteCommandOptions(new URLSearchParams('command=cat&tty=true&stderr=true'));
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect(parsed.status.code).toBe(400);
      expect(parsed.status.message).toBe('you must specify at least 1 of stdin, stdout, stderr');
    }
  });
  it('tty, stdout and stderr → stdout only, stderr dropped', () => {
    expect(parseRemoteCommandOptions(new URLSearchParams('tty=1&stdout=1&stderr=1'))).toEqual({
      ok: true,
      value: { stdin: false, stdout: true, stderr: false, tty: true },
    });
  });
});

describe('error stream: what is quoted in the Status is bounded', () => {
  it.each([
    ['v4, not JSON', 'v4.channel.k8s.io', '{'.repeat(1024 * 1024)],
    ['v4, not an object', 'v4.channel.k8s.io', JSON.stringify('x'.repeat(1024 * 1024))],
    ['v3, text', 'v3.channel.k8s.io', 'e'.repeat(1024 * 1024)],
  ])('%s: 1 MiB in, a short message out', (_n, protocol, text) => {
    const outcome = decodeErrorStream(protocol, Buffer.from(text));
    expect(outcome.kind).toBe('error');
    if (outcome.kind === 'error') {
      expect(outcome.message.length).toBeLessThan(3 * MAX_QUOTED_ERROR_STREAM_CHARS);
      expect(outcome.message).toContain(`(${text.length} characters)`);
    }
  });
  it('short content is still quoted whole', () => {
    const outcome = decodeErrorStream('v4.channel.k8s.io', Buffer.from('oops'));
    expect(outcome).toEqual({ kind: 'error', message: expect.stringContaining('in "oops"') as unknown as string });
  });
});

describe('SPDY: DATA on a stream the peer reset', () => {
  it('is dropped while the reset stream is still open (no RST_STREAM back)', async () => {
    const sockets = await socketPair();
    try {
      const server = new SpdyConnection(sockets.server, { isServer: true });
      const accepted: SpdyStream[] = [];
      server.on('stream', (s: SpdyStream) => {
        s.on('error', () => {});
        s.reply();
        accepted.push(s); // never read: the stream stays open after the peer's reset
      });
      const parser = new FrameParser();
      const got: SpdyFrame[] = [];
      const waiters: Array<() => void> = [];
      sockets.client.on('data', (c: Buffer) => {
        got.push(...parser.push(c));
        for (const w of waiters.splice(0)) w();
      });
      const until = async (pred: () => boolean): Promise<void> => {
        while (!pred()) await new Promise<void>((r) => waiters.push(r));
      };
      const compressor = new HeaderCompressor();
      const wire = (...fs: SpdyFrame[]): Buffer => Buffer.concat(fs.flatMap((f) => encodeFrame(f)));
      sockets.client.write(
        wire(
          { type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: compressor.compress({ streamtype: 'x' }) },
          { type: 'data', streamId: 1, fin: false, data: Buffer.from('before') },
        ),
      );
      await until(() => got.some((f) => f.type === 'syn_reply'));
      sockets.client.write(wire({ type: 'rst_stream', streamId: 1, status: 5 }, { type: 'data', streamId: 1, fin: false, data: Buffer.from('stale') }, { type: 'ping', id: 9 }));
      await until(() => got.some((f) => f.type === 'ping'));
      expect(got.map((f) => f.type)).toEqual(['syn_reply', 'ping']);
      expect(accepted[0]!.destroyed).toBe(false);
      server.destroy();
      await once(sockets.client, 'close');
    } finally {
      sockets.close();
    }
  });
});

describe('SPDY: an RST_STREAM storm on one open stream', () => {
  it('adds no listener per reset', async () => {
    const sockets = await socketPair();
    try {
      const server = new SpdyConnection(sockets.server, { isServer: true });
      const accepted: SpdyStream[] = [];
      server.on('stream', (s: SpdyStream) => {
        s.on('error', () => {});
        s.reply();
        accepted.push(s); // never read, so the reset stream waits for its 'end'
      });
      const parser = new FrameParser();
      const got: SpdyFrame[] = [];
      const waiters: Array<() => void> = [];
      sockets.client.on('data', (c: Buffer) => {
        got.push(...parser.push(c));
        for (const w of waiters.splice(0)) w();
      });
      const compressor = new HeaderCompressor();
      const wire = (...fs: SpdyFrame[]): Buffer => Buffer.concat(fs.flatMap((f) => encodeFrame(f)));
      const storm = Array.from({ length: 500 }, (): SpdyFrame => ({ type: 'rst_stream', streamId: 1, status: 5 }));
      sockets.client.write(
        wire(
          { type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: compressor.compress({ streamtype: 'x' }) },
          { type: 'data', streamId: 1, fin: false, data: Buffer.from('unread') },
          ...storm,
          { type: 'ping', id: 9 },
        ),
      );
      while (!got.some((f) => f.type === 'ping')) await new Promise<void>((r) => waiters.push(r));
      expect(accepted[0]!.listenerCount('end')).toBeLessThan(5);
      server.destroy();
    } finally {
      sockets.close();
    }
  });
});
