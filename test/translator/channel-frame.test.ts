import { describe, expect, it } from 'vitest';
import {
  Channel,
  ChannelFrameError,
  decodeChannelMessage,
  encodeChannelMessage,
  encodeCloseMessage,
  isChannelId,
  STREAM_CLOSE,
} from '../../translator/channel-frame.js';

describe('v5 channel-frame codec', () => {
  it.each([
    ['stdin', Channel.Stdin],
    ['stdout', Channel.Stdout],
    ['stderr', Channel.Stderr],
    ['error', Channel.Error],
    ['resize', Channel.Resize],
  ])('round-trips a %s message', (_name, channel) => {
    const payload = Buffer.from('payload \x00\xff bytes', 'latin1');
    const encoded = encodeChannelMessage(channel, payload);
    expect(encoded[0]).toBe(channel);
    expect(encoded.subarray(1).equals(payload)).toBe(true);
    expect(decodeChannelMessage(encoded)).toEqual({ kind: 'data', channel, payload });
  });

  it('encodes the initial empty frame as the channel byte alone', () => {
    expect([...encodeChannelMessage(Channel.Stdout)]).toEqual([1]);
    expect(decodeChannelMessage(Buffer.from([1]))).toEqual({ kind: 'data', channel: 1, payload: Buffer.alloc(0) });
  });

  it('treats a zero-length message as empty (ignored)', () => {
    expect(decodeChannelMessage(Buffer.alloc(0))).toEqual({ kind: 'empty' });
  });

  it.each([5, 6, 100, 254])('reports channel %i as unknown (ignored), not an error', (channel) => {
    expect(decodeChannelMessage(Buffer.from([channel, 7]))).toEqual({ kind: 'unknown', channel, payload: Buffer.from([7]) });
  });

  it.each([0, 1, 2, 3, 4] as const)('decodes CLOSE [255, %i]', (channel) => {
    expect(decodeChannelMessage(Buffer.from([STREAM_CLOSE, channel]))).toEqual({ kind: 'close', channel });
    expect([...encodeCloseMessage(channel)]).toEqual([255, channel]);
  });

  it.each([
    ['no channel byte', [255], 'CLOSE_FRAME_LENGTH'],
    ['two channel bytes', [255, 0, 0], 'CLOSE_FRAME_LENGTH'],
    ['a long tail', [255, 0, 1, 2, 3], 'CLOSE_FRAME_LENGTH'],
    ['channel 5', [255, 5], 'CLOSE_FRAME_CHANNEL'],
    ['channel 255', [255, 255], 'CLOSE_FRAME_CHANNEL'],
  ])('rejects a malformed CLOSE (%s)', (_name, bytes, code) => {
    let caught: unknown;
    try {
      decodeChannelMessage(Buffer.from(bytes as number[]));
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ChannelFrameError);
    expect((caught as ChannelFrameError).code).toBe(code);
  });

  it('returns a view of the message, not a copy', () => {
    const msg = Buffer.from([0, 1, 2, 3]);
    const m = decodeChannelMessage(msg);
    expect(m.kind === 'data' && m.payload.buffer === msg.buffer).toBe(true);
  });

  it('knows the valid channel ids', () => {
    expect([0, 1, 2, 3, 4].every(isChannelId)).toBe(true);
    expect([-1, 5, 255, 1.5].some(isChannelId)).toBe(false);
  });
});
