/**
 * The `v5.channel.k8s.io` WebSocket message codec, pure (no socket): each binary message is one
 * channel byte followed by the payload. Channels 0 stdin, 1 stdout, 2 stderr, 3 error (Status),
 * 4 resize. v5 adds the CLOSE signal `[255, id]`, which half-closes channel `id` (k/k#89899).
 *
 * Decoding follows apimachinery `wsstream/conn.go`: empty messages and unknown channels are ignored;
 * a 255 message that is not exactly two bytes, or names a channel that does not exist, is a protocol
 * error that drops the connection.
 */

/** The five remote-command channels. */
export const Channel = {
  Stdin: 0,
  Stdout: 1,
  Stderr: 2,
  Error: 3,
  Resize: 4,
} as const;

/** A remote-command channel id (0–4). */
export type ChannelId = (typeof Channel)[keyof typeof Channel];

/** Number of channels that always exist, requested or not. */
export const CHANNEL_COUNT = 5;

/** The v5 CLOSE signal's first byte (`remotecommand.StreamClose`). */
export const STREAM_CLOSE = 255;

/** One decoded client message. */
export type ChannelMessage =
  /** Data for a channel 0–4 (payload may be empty only if the message was just the channel byte). */
  | { kind: 'data'; channel: ChannelId; payload: Buffer }
  /** `[255, id]`: half-close channel `id`. */
  | { kind: 'close'; channel: ChannelId }
  /** A zero-length message: ignored by the server. */
  | { kind: 'empty' }
  /** A channel byte 5–254: ignored by the server. */
  | { kind: 'unknown'; channel: number; payload: Buffer };

/** Why a CLOSE message was rejected. */
export type ChannelFrameErrorCode = 'CLOSE_FRAME_LENGTH' | 'CLOSE_FRAME_CHANNEL';

/** A malformed v5 CLOSE message; the connection must be dropped. */
export class ChannelFrameError extends Error {
  override readonly name = 'ChannelFrameError';
  constructor(
    readonly code: ChannelFrameErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** True for 0–4. */
export function isChannelId(n: number): n is ChannelId {
  return Number.isInteger(n) && n >= 0 && n < CHANNEL_COUNT;
}

/**
 * Decode one client message. Throws {@link ChannelFrameError} for a malformed CLOSE. The payload of
 * a data message is a view into `message` (no copy).
 */
export function decodeChannelMessage(message: Buffer): ChannelMessage {
  if (message.length === 0) return { kind: 'empty' };
  const channel = message[0]!;
  if (channel === STREAM_CLOSE) {
    if (message.length !== 2) {
      throw new ChannelFrameError(
        'CLOSE_FRAME_LENGTH',
        `single channel byte should follow close signal, got ${message.length - 1} bytes`,
      );
    }
    const target = message[1]!;
    if (!isChannelId(target)) {
      throw new ChannelFrameError('CLOSE_FRAME_CHANNEL', `close is targeted for a channel ${target} that is not valid`);
    }
    return { kind: 'close', channel: target };
  }
  const payload = message.subarray(1);
  if (isChannelId(channel)) return { kind: 'data', channel, payload };
  return { kind: 'unknown', channel, payload };
}

/** Encode a data message: the channel byte, then `payload` (copied once). */
export function encodeChannelMessage(channel: ChannelId, payload: Buffer = Buffer.alloc(0)): Buffer {
  const out = Buffer.allocUnsafe(payload.length + 1);
  out[0] = channel;
  payload.copy(out, 1);
  return out;
}

/** Encode the v5 CLOSE signal for `channel` (clients send it; the server never does). */
export function encodeCloseMessage(channel: ChannelId): Buffer {
  return Buffer.from([STREAM_CLOSE, channel]);
}
