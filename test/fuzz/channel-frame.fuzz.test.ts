/**
 * Property-based fuzz tests for the v5.channel.k8s.io message codec (translator/channel-frame.ts).
 *
 * Runs scale with the FUZZ_RUNS environment variable (a multiplier, default 1).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  CHANNEL_COUNT,
  ChannelFrameError,
  STREAM_CLOSE,
  decodeChannelMessage,
  encodeChannelMessage,
  encodeCloseMessage,
  type ChannelId,
} from '../../translator/channel-frame.js';

const MULT = Number(process.env.FUZZ_RUNS ?? '1') || 1;
const runs = (n: number): number => Math.max(1, Math.round(n * MULT));
const timeout = (ms: number): number => Math.min(2 ** 31 - 1, Math.max(ms, ms * MULT));

const channelArb = fc.integer({ min: 0, max: CHANNEL_COUNT - 1 }) as fc.Arbitrary<ChannelId>;
const bytes = (maxLength: number) => fc.uint8Array({ maxLength }).map((a) => Buffer.from(a));

describe('fuzz: v5 channel message codec', () => {
  it(
    'data messages round-trip (payload is a view, not a copy, of the message)',
    () => {
      fc.assert(
        fc.property(channelArb, fc.option(bytes(2048)), (channel, payload) => {
          const wire = payload === null ? encodeChannelMessage(channel) : encodeChannelMessage(channel, payload);
          expect(wire.length).toBe(1 + (payload?.length ?? 0));
          const m = decodeChannelMessage(wire);
          expect(m.kind).toBe('data');
          if (m.kind !== 'data') return;
          expect(m.channel).toBe(channel);
          expect(m.payload.equals(payload ?? Buffer.alloc(0))).toBe(true);
          expect(m.payload.buffer).toBe(wire.buffer);
        }),
        { numRuns: runs(4000) },
      );
    },
    timeout(120_000),
  );

  it(
    'close messages round-trip',
    () => {
      fc.assert(
        fc.property(channelArb, (channel) => {
          expect(decodeChannelMessage(encodeCloseMessage(channel))).toEqual({ kind: 'close', channel });
        }),
        { numRuns: runs(1000) },
      );
    },
    timeout(120_000),
  );

  it(
    'arbitrary bytes decode to a well-formed message or a ChannelFrameError, never anything else',
    () => {
      const interesting = fc.oneof(
        bytes(64),
        bytes(3).map((b) => Buffer.concat([Buffer.from([STREAM_CLOSE]), b])),
        fc.tuple(fc.integer({ min: 0, max: 255 }), bytes(16)).map(([c, b]) => Buffer.concat([Buffer.from([c]), b])),
      );
      fc.assert(
        fc.property(interesting, (msg) => {
          let m;
          try {
            m = decodeChannelMessage(msg);
          } catch (e) {
            expect(e).toBeInstanceOf(ChannelFrameError);
            const err = e as ChannelFrameError;
            expect(msg[0]).toBe(STREAM_CLOSE);
            if (msg.length !== 2) expect(err.code).toBe('CLOSE_FRAME_LENGTH');
            else {
              expect(err.code).toBe('CLOSE_FRAME_CHANNEL');
              expect(msg[1]!).toBeGreaterThanOrEqual(CHANNEL_COUNT);
            }
            return;
          }
          switch (m.kind) {
            case 'empty':
              expect(msg.length).toBe(0);
              break;
            case 'close':
              expect([...msg]).toEqual([STREAM_CLOSE, m.channel]);
              expect(encodeCloseMessage(m.channel).equals(msg)).toBe(true);
              break;
            case 'data':
              expect(m.channel).toBe(msg[0]);
              expect(m.channel).toBeLessThan(CHANNEL_COUNT);
              expect(encodeChannelMessage(m.channel, m.payload).equals(msg)).toBe(true);
              break;
            case 'unknown':
              expect(m.channel).toBe(msg[0]);
              expect(m.channel).toBeGreaterThanOrEqual(CHANNEL_COUNT);
              expect(m.channel).toBeLessThan(STREAM_CLOSE);
              expect(m.payload.equals(msg.subarray(1))).toBe(true);
              break;
            default:
              throw new Error(`unexpected message ${JSON.stringify(m)}`);
          }
        }),
        { numRuns: runs(5000) },
      );
    },
    timeout(120_000),
  );
});
