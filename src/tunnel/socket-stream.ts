/**
 * A plain JavaScript Duplex in front of a TLS socket, handed to `http2` instead of the socket.
 *
 * Given a `tls.TLSSocket`, Node's http2 consumes the TLS stream natively (TLSWrap → Http2Session),
 * and Node 20.20 aborts the process (`Assertion failed: is_write_in_progress()` in
 * `Http2Session::OnStreamAfterWrite`, from `TLSWrap::InvokeQueued`) on tunnel connections that had
 * their HTTP/1.1 handshake read from JavaScript first — reproduced by test/tunnel/tunnel-stream.test.ts
 * with TLS on both ends; the same assertion is reported as nodejs/node#61304 and #55804. Through a
 * JavaScript Duplex, http2 takes its generic stream path (JSStreamSocket) instead. Plain TCP
 * sockets do not need this.
 */
import { Duplex } from 'node:stream';

/** Wrap `socket` (see the file comment); bytes, backpressure, end and destroy pass through. */
export function jsStreamOver(socket: Duplex): Duplex {
  const wrapper = new Duplex({
    allowHalfOpen: false,
    read() {
      socket.resume();
    },
    write(chunk: Buffer, encoding, callback) {
      socket.write(chunk, encoding, callback);
    },
    final(callback) {
      socket.end(callback);
    },
    destroy(err, callback) {
      socket.destroy();
      callback(err);
    },
  });
  socket.on('data', (d: Buffer) => {
    if (!wrapper.push(d)) socket.pause();
  });
  socket.once('end', () => wrapper.push(null));
  socket.on('error', (e) => wrapper.destroy(e));
  socket.once('close', () => wrapper.destroy());
  return wrapper;
}
