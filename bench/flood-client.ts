/**
 * A raw WebSocket v5 exec client for the flood benchmark (bench/flood.ts), cheap enough per frame to
 * out-send the proxy on the same machine: it writes one precomputed block of masked client frames
 * again and again (the TCP socket's backpressure is the only pacing), and reads the server's frames
 * with a small state machine, checking the echo on channel 1 against the byte pattern it sent
 * (stdin byte k is `k % 251`) with native compares.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

/** The stdin byte pattern's period (prime, so no frame size lines up with it by accident). */
export const PATTERN_PERIOD = 251;

/** The pattern, long enough that any piece of up to 64 KiB compares against one slice of it. */
const REFERENCE = Buffer.from(Array.from({ length: 65536 + PATTERN_PERIOD }, (_, i) => i % PATTERN_PERIOD));

/**
 * A block of `frames` masked binary client frames, each `[0 (stdin), …payloadBytes of pattern]`,
 * with the pattern continuing from frame to frame. `frames × payloadBytes` must be a multiple of
 * {@link PATTERN_PERIOD}, so that the block can be sent back to back forever.
 */
export function floodBlock(frames: number, payloadBytes: number): Buffer {
  if ((frames * payloadBytes) % PATTERN_PERIOD !== 0) throw new Error(`floodBlock: ${frames} × ${payloadBytes} is not a multiple of ${PATTERN_PERIOD}`);
  const length = payloadBytes + 1;
  const headLen = 2 + (length > 65535 ? 8 : length > 125 ? 2 : 0) + 4;
  const out = Buffer.allocUnsafe(frames * (headLen + length));
  const masks = randomBytes(frames * 4);
  let at = 0;
  let k = 0;
  for (let f = 0; f < frames; f++) {
    out[at++] = 0x82;
    if (length <= 125) out[at++] = 0x80 | length;
    else if (length <= 65535) {
      out[at++] = 0x80 | 126;
      out.writeUInt16BE(length, at);
      at += 2;
    } else {
      out[at++] = 0x80 | 127;
      out.writeBigUInt64BE(BigInt(length), at);
      at += 8;
    }
    const m = masks.subarray(f * 4, f * 4 + 4);
    m.copy(out, at);
    at += 4;
    out[at] = 0 ^ m[0]!;
    for (let i = 1; i < length; i++) out[at + i] = (k++ % PATTERN_PERIOD) ^ m[i & 3]!;
    at += length;
  }
  return out;
}

/** One masked client frame (close of stdin `[255, 0]`, or a close frame). */
function clientFrame(opcode: number, payload: Buffer): Buffer {
  const head = Buffer.from([0x80 | opcode, 0x80 | payload.length, 0, 0, 0, 0]); // mask key 0: payload as is
  return Buffer.concat([head, payload]);
}

/** What one flood session saw. */
export interface FloodSessionResult {
  /** stdin payload bytes sent (channel byte not counted). */
  sent: number;
  /** Client frames sent. */
  frames: number;
  /** stdout bytes received. */
  echoed: number;
  /** The echo matched the pattern byte for byte, and all of it came back. */
  echoOk: boolean;
  /** The channel-3 Status text. */
  status: string;
  /** The server's close code (0: none). */
  closeCode: number;
}

/** A running flood session. */
export interface FloodSession {
  /** stdin bytes sent so far. */
  readonly sent: number;
  /** Stop flooding, close stdin, wait for the whole echo, the Status and the close. */
  stop(timeoutMs: number): Promise<FloodSessionResult>;
  destroy(): void;
}

/**
 * Open a v5 exec at `host:port` + `path` and flood it with `block` (from {@link floodBlock}) until
 * {@link FloodSession.stop}. Resolves once the 101 arrived.
 */
export function startFloodSession(host: string, port: number, path: string, block: Buffer, framesPerBlock: number, payloadPerBlock: number): Promise<FloodSession> {
  return new Promise((resolveOpen, rejectOpen) => {
    const socket: Socket = connect({ host, port });
    socket.setNoDelay(true);
    let head: Buffer = Buffer.alloc(0);
    let upgraded = false;
    let flooding = true;
    let sent = 0;
    let frames = 0;
    let echoed = 0;
    let echoOk = true;
    let status = '';
    let closeCode = 0;
    let ended = false;
    const waiters: Array<() => void> = [];
    const wake = (): void => {
      for (const w of waiters.splice(0)) w();
    };
    // ---- server frames ----
    let need = 2;
    let hdr: Buffer = Buffer.alloc(0);
    let inPayload = false;
    let remaining = 0;
    let opcode = 0;
    let first = true; // next payload byte is the channel byte
    let channel = -1;
    let control: Buffer[] = [];
    const onPayload = (piece: Buffer): void => {
      if (piece.length === 0) return;
      if (opcode === 0x8) return void control.push(piece);
      let p = piece;
      if (first) {
        channel = p[0]!;
        first = false;
        p = p.subarray(1);
      }
      if (channel === 1) {
        for (let at = 0; at < p.length; at += 65536) {
          const part = p.subarray(at, at + 65536);
          const phase = (echoed % PATTERN_PERIOD);
          if (echoOk && !part.equals(REFERENCE.subarray(phase, phase + part.length))) echoOk = false;
          echoed += part.length;
        }
        wake();
      } else if (channel === 3) status += p.toString('utf8');
    };
    const parse = (chunk: Buffer): void => {
      let at = 0;
      while (at < chunk.length) {
        if (inPayload) {
          const n = Math.min(remaining, chunk.length - at);
          onPayload(chunk.subarray(at, at + n));
          remaining -= n;
          at += n;
          if (remaining === 0) endFrame();
          continue;
        }
        const take = Math.min(need - hdr.length, chunk.length - at);
        hdr = hdr.length === 0 && take === need ? chunk.subarray(at, at + take) : Buffer.concat([hdr, chunk.subarray(at, at + take)]);
        at += take;
        if (hdr.length < need) continue;
        const len7 = hdr[1]! & 0x7f;
        const full = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0);
        if (hdr.length < full) {
          need = full;
          continue;
        }
        opcode = hdr[0]! & 0x0f;
        remaining = len7 === 126 ? hdr.readUInt16BE(2) : len7 === 127 ? Number(hdr.readBigUInt64BE(2)) : len7;
        if (opcode !== 0) first = true;
        hdr = Buffer.alloc(0);
        need = 2;
        inPayload = true;
        if (remaining === 0) endFrame();
      }
    };
    const endFrame = (): void => {
      inPayload = false;
      if (opcode === 0x8) {
        const p = Buffer.concat(control);
        control = [];
        closeCode = p.length >= 2 ? p.readUInt16BE(0) : 1005;
        if (!socket.destroyed) socket.end(clientFrame(0x8, p.subarray(0, 2)));
        wake();
      }
    };
    // ---- the flood ----
    const pump = (): void => {
      while (flooding) {
        sent += payloadPerBlock;
        frames += framesPerBlock;
        if (!socket.write(block)) {
          socket.once('drain', pump);
          return;
        }
      }
    };
    socket.on('data', (chunk: Buffer) => {
      if (upgraded) return parse(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      const statusLine = head.toString('latin1', 0, head.indexOf('\r\n'));
      if (!/^HTTP\/1\.1 101 /.test(statusLine)) {
        socket.destroy();
        return rejectOpen(new Error(`flood session: ${statusLine}`));
      }
      upgraded = true;
      const rest = head.subarray(end + 4);
      head = Buffer.alloc(0);
      if (rest.length > 0) parse(rest);
      resolveOpen(session);
      pump();
    });
    socket.on('error', (err) => {
      if (!upgraded) rejectOpen(err);
    });
    socket.on('close', () => {
      ended = true;
      flooding = false;
      wake();
    });
    /** Resolves with `pred()` once it holds, the socket closed, or `deadline` passed. */
    const waitUntil = (pred: () => boolean, deadline: number): Promise<boolean> =>
      new Promise((resolve) => {
        const timer = setInterval(wake, 100);
        const check = (): void => {
          if (pred() || ended || Date.now() > deadline) {
            clearInterval(timer);
            return resolve(pred());
          }
          waiters.push(check);
        };
        check();
      });
    const session: FloodSession = {
      get sent() {
        return sent;
      },
      stop: async (timeoutMs) => {
        flooding = false;
        socket.off('drain', pump);
        const deadline = Date.now() + timeoutMs;
        // Everything sent is in the socket's queue; the close of stdin follows it.
        socket.write(clientFrame(0x2, Buffer.from([255, 0])));
        await waitUntil(() => closeCode !== 0, deadline);
        socket.destroy();
        return { sent, frames, echoed, echoOk: echoOk && echoed === sent, status, closeCode };
      },
      destroy: () => socket.destroy(),
    };
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n`,
    );
  });
}
