/**
 * The legacy channel framing of Kubernetes WebSockets (apimachinery `wsstream`): every message is a
 * channel byte plus payload. Binary protocols send binary frames; the base64 variants send text
 * frames whose first character is the ASCII digit of the channel and the rest StdEncoding base64.
 */
import { Writable } from 'node:stream';
import type { WebSocket } from 'ws';

/** One decoded inbound message. */
export interface ChannelMessage {
  channel: number;
  payload: Buffer;
}

/** Bytes queued in ws beyond which a channel writer waits for the socket to flush. */
export const WS_HIGH_WATER_MARK = 1024 * 1024;

/** Encode one outbound message: `[channel] + payload`, or `'0'+channel` + base64 for base64 protocols. */
export function encodeChannelMessage(channel: number, payload: Buffer, base64: boolean): Buffer | string {
  if (base64) return String.fromCharCode(0x30 + channel) + payload.toString('base64');
  const out = Buffer.allocUnsafe(payload.length + 1);
  out[0] = channel;
  payload.copy(out, 1);
  return out;
}

/**
 * Decode one inbound message. Returns undefined for what the kubelet ignores: empty messages and
 * base64 input that does not decode.
 */
export function decodeChannelMessage(data: Buffer, base64: boolean): ChannelMessage | undefined {
  if (data.length === 0) return undefined;
  if (!base64) return { channel: data[0]!, payload: data.subarray(1) };
  const channel = data[0]! - 0x30;
  const text = data.subarray(1).toString('latin1');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
  return { channel, payload: Buffer.from(text, 'base64') };
}

/**
 * Send `payload` on `channel`; `cb` runs once ws handed the frame to the socket (or at once, when the
 * socket is already gone).
 */
export function sendChannel(ws: WebSocket, channel: number, payload: Buffer, base64: boolean, cb?: (err?: Error) => void): void {
  if (ws.readyState !== ws.OPEN) {
    cb?.();
    return;
  }
  ws.send(encodeChannelMessage(channel, payload, base64), { binary: !base64 }, (err) => cb?.(err ?? undefined));
}

/**
 * A Writable that sends every chunk on one channel. It signals backpressure while ws holds more
 * than {@link WS_HIGH_WATER_MARK} unsent bytes; after the socket closed, chunks are dropped and
 * `onDropped` is called (the caller may treat that as SIGPIPE).
 */
export function channelWriter(ws: WebSocket, channel: number, base64: boolean, onDropped?: () => void): Writable {
  return new Writable({
    highWaterMark: 256 * 1024,
    write(chunk: Buffer, _enc, callback) {
      if (ws.readyState !== ws.OPEN) {
        onDropped?.();
        callback();
        return;
      }
      if (chunk.length === 0) {
        callback();
        return;
      }
      let called = false;
      const once = (): void => {
        if (!called) {
          called = true;
          callback();
        }
      };
      sendChannel(ws, channel, chunk, base64, () => once());
      if (ws.bufferedAmount < WS_HIGH_WATER_MARK) once();
    },
  });
}
