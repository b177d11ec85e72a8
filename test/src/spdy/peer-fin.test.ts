/**
 * The peer's FIN must not overtake frames we already read. Node emits a socket's 'end' as soon as
 * its own buffer is empty, even while frames of that last read still wait in the intake behind a full
 * stream; those frames (the tail of stdout, the exit status on the error stream) must still arrive.
 * This was the translator's "error reading from error stream: the upstream connection was closed".
 */
import { createHash, randomBytes } from 'node:crypto';
import { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { encodeFrame, HeaderCompressor, SpdyConnection, type SpdyFrame } from '../../../src/spdy/index.js';
import { digest } from './helpers.js';

/** A socket whose input we script: everything the peer sends, then EOF, in one go. */
function scriptedSocket(): Duplex & { feed(bytes: Buffer): void } {
  const socket = new Duplex({
    allowHalfOpen: true,
    read() {},
    write(_chunk, _enc, cb) {
      cb(); // what we send is not looked at
    },
  }) as Duplex & { feed(bytes: Buffer): void };
  socket.feed = (bytes) => {
    socket.push(bytes);
    socket.push(null);
  };
  return socket;
}

describe('peer FIN after the last frames', { timeout: 10_000 }, () => {
  it('delivers DATA queued behind a full stream, and the other stream\'s status, after the socket ended', async () => {
    const stdout = randomBytes(3 * 1024 * 1024); // three times the stream's buffer
    const compressor = new HeaderCompressor();
    const frames: SpdyFrame[] = [
      { type: 'syn_reply', streamId: 1, fin: false, headerBlock: compressor.compress({}) },
      { type: 'syn_reply', streamId: 3, fin: false, headerBlock: compressor.compress({}) },
      ...Array.from({ length: 48 }, (_, i): SpdyFrame => ({
        type: 'data',
        streamId: 1,
        fin: false,
        data: stdout.subarray(i * 65536, (i + 1) * 65536),
      })),
      { type: 'data', streamId: 1, fin: true, data: Buffer.alloc(0) },
      { type: 'data', streamId: 3, fin: true, data: Buffer.from('{"metadata":{},"status":"Success"}') },
      { type: 'goaway', lastGoodStreamId: 0, status: 0 },
    ];
    const socket = scriptedSocket();
    const conn = new SpdyConnection(socket, { isServer: false });
    const out = conn.openStream({ streamtype: 'stdout' });
    const err = conn.openStream({ streamtype: 'error' });
    const ended = new Promise<void>((resolve) => socket.once('end', resolve));
    socket.feed(Buffer.concat(frames.flatMap((f) => encodeFrame(f))));
    const [o, e] = await Promise.all([out, err]);
    const errors: Error[] = [];
    o.on('error', (x) => errors.push(x));
    e.on('error', (x) => errors.push(x));
    // Let the socket's 'end' happen while stdout is still full and unread.
    await ended;
    const [gotOut, gotErr] = await Promise.all([digest(o), digest(e)]);
    expect(gotOut).toEqual({ bytes: stdout.length, sha256: createHash('sha256').update(stdout).digest('hex') });
    expect(gotErr.bytes).toBe(34);
    expect(errors).toEqual([]);
  });
});
