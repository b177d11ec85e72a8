/**
 * The bytes a translated session writes for one server frame itself (the zero-copy send of
 * translator/websocket.ts): the head of an unmasked binary WebSocket frame with the v5 channel byte
 * appended, and, where the payload must be joined, the joined channel message.
 */
import type { ChannelId } from './channel-frame.js';

/** One channel message whose payload is `parts` joined: the channel byte and every part, copied once. */
export function encodeJoined(channel: ChannelId, parts: readonly Buffer[]): Buffer {
  let size = 1;
  for (const p of parts) size += p.length;
  const out = Buffer.allocUnsafe(size);
  out[0] = channel;
  let at = 1;
  for (const p of parts) at += p.copy(out, at);
  return out;
}

/**
 * The head of one unmasked, final, binary WebSocket frame (RFC 6455 §5.2) carrying `payloadLength`
 * bytes after the channel byte, with the channel byte appended: 3, 5 or 11 bytes.
 */
export function channelFrameHead(channel: ChannelId, payloadLength: number): Buffer {
  const length = payloadLength + 1;
  // The same length encoding as ws's Sender.frame: 7 bits up to 125, 16 bits below 65,536, else 64.
  const extended = length >= 65536 ? 8 : length > 125 ? 2 : 0;
  const head = Buffer.allocUnsafe(3 + extended);
  head[0] = 0x82; // FIN, opcode 2 (binary)
  if (extended === 0) {
    head[1] = length;
  } else if (extended === 2) {
    head[1] = 126;
    head.writeUInt16BE(length, 2);
  } else {
    head[1] = 127;
    head.writeUInt32BE(Math.floor(length / 0x100000000), 2);
    head.writeUInt32BE(length >>> 0, 6);
  }
  head[2 + extended] = channel;
  return head;
}
