/**
 * The frames a client-role WebSocket writes itself (RFC 6455 §5.2, §5.3): one final binary frame,
 * masked with a fresh key from a cryptographically strong pool, its payload an optional prefix byte
 * (the v5 channel) and the given pieces, masked IN PLACE. The pieces are not joined or copied: the
 * frame is the head (with the masked prefix) followed by the pieces themselves, so a relayed chunk
 * costs a head of at most 15 bytes, as the forward translator's server frames do
 * (translator/ws-frame-head.ts). `ws`'s Sender would copy every Buffer it masks (it treats them as
 * read-only); a relay owns the chunks it hands on, so masking them where they lie is safe.
 */
import { randomFillSync } from 'node:crypto';
import { unmaskInPlace } from './ws-fast-receiver.js';

/** Random bytes drawn per refill (what `ws`'s Sender pools for its masks). */
const MASK_POOL_BYTES = 8 * 1024;
let pool: Buffer | undefined;
let poolAt = MASK_POOL_BYTES;

/** Copy the next four pool bytes into `target` at `offset` (refilling the pool when spent). */
function nextMask(target: Buffer, offset: number): void {
  if (poolAt === MASK_POOL_BYTES) {
    pool ??= Buffer.alloc(MASK_POOL_BYTES);
    randomFillSync(pool);
    poolAt = 0;
  }
  pool!.copy(target, offset, poolAt, poolAt + 4);
  poolAt += 4;
}

/**
 * One masked, final, binary frame carrying `prefix` (when given) followed by `parts`: returns the
 * head (2–14 bytes, plus the masked prefix byte) and then the non-empty `parts`, each masked in place.
 * Write them in order, with nothing between them.
 */
export function maskedBinaryFrame(prefix: number | undefined, parts: readonly Buffer[]): Buffer[] {
  let length = prefix === undefined ? 0 : 1;
  for (const p of parts) length += p.length;
  // The same length encoding as ws's Sender.frame: 7 bits up to 125, 16 bits below 65,536, else 64.
  const extended = length >= 65536 ? 8 : length > 125 ? 2 : 0;
  const maskAt = 2 + extended;
  const head = Buffer.allocUnsafe(maskAt + 4 + (prefix === undefined ? 0 : 1));
  head[0] = 0x82; // FIN, opcode 2 (binary)
  if (extended === 0) {
    head[1] = 0x80 | length;
  } else if (extended === 2) {
    head[1] = 0x80 | 126;
    head.writeUInt16BE(length, 2);
  } else {
    head[1] = 0x80 | 127;
    head.writeUInt32BE(Math.floor(length / 0x100000000), 2);
    head.writeUInt32BE(length >>> 0, 6);
  }
  nextMask(head, maskAt);
  const mask = head.subarray(maskAt, maskAt + 4);
  let phase = 0;
  if (prefix !== undefined) {
    head[maskAt + 4] = prefix ^ mask[0]!;
    phase = 1;
  }
  const out: Buffer[] = [head];
  for (const p of parts) {
    if (p.length === 0) continue;
    // XOR with the key is its own inverse: unmasking code masks.
    unmaskInPlace(p, mask, phase & 3);
    phase += p.length;
    out.push(p);
  }
  return out;
}
