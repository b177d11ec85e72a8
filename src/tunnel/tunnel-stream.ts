/**
 * One tunnel stream: an HTTP/2 `CONNECT` stream the proxy opens on an agent's session, which the
 * agent connects to its apiserver. Once the agent answers `:status 200` the stream is a plain byte
 * Duplex carrying HTTP/1.1: END_STREAM is a half-close (`end()`), RST_STREAM a reset (`destroy()`).
 */
import { constants as h2, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import { UpstreamUnreachableError } from '../errors.js';
import { TUNNEL_AUTHORITY } from './protocol.js';

/** Longest agent refusal text read into the error message. */
const MAX_REFUSAL_TEXT = 1024;

type WriteChunk = { chunk: unknown; encoding: BufferEncoding };
type WritableInternals = {
  _write(chunk: unknown, encoding: BufferEncoding, cb: (e?: Error | null) => void): void;
  _writev(chunks: WriteChunk[], cb: (e?: Error | null) => void): void;
};

/**
 * Make every write to an Http2Stream a Buffer write. Node 20's Http2Stream corrupts string chunks
 * written with an encoding in a corked batch: Node's HTTP/1.1 client (`http.request` over the
 * stream) writes its request line as a latin1 string and the agent received garbage in its place
 * (measured, Node 20.20: the first 16 bytes replaced). Converting here costs one copy of the
 * request head only; Buffer writes (every byte relay) pass through untouched.
 */
export function bufferStringWrites(stream: Duplex): void {
  const s = stream as unknown as WritableInternals;
  const write = s._write;
  const writev = s._writev;
  s._write = function (chunk, encoding, cb) {
    write.call(this, typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk, 'buffer' as BufferEncoding, cb);
  };
  s._writev = function (chunks, cb) {
    writev.call(
      this,
      chunks.map((c) => (typeof c.chunk === 'string' ? { chunk: Buffer.from(c.chunk, c.encoding), encoding: 'buffer' as BufferEncoding } : c)),
      cb,
    );
  };
}

/**
 * Open a CONNECT stream on `session` and wait for the agent's `200`. Rejects with
 * UpstreamUnreachableError naming `target` (the agent could not reach its apiserver, the tunnel
 * went away) or with the signal's reason.
 */
export function openTunnelStream(session: ClientHttp2Session, target: string, signal?: AbortSignal): Promise<ClientHttp2Stream> {
  return new Promise<ClientHttp2Stream>((resolve, reject) => {
    const fail = (message: string): void => reject(new UpstreamUnreachableError(target, new Error(message)));
    if (session.closed || session.destroyed) return fail('error dialing backend: the agent tunnel is closed');
    let stream: ClientHttp2Stream;
    try {
      stream = session.request({ [h2.HTTP2_HEADER_METHOD]: h2.HTTP2_METHOD_CONNECT, [h2.HTTP2_HEADER_AUTHORITY]: TUNNEL_AUTHORITY });
    } catch (e) {
      return fail(`error dialing backend: ${(e as Error).message}`);
    }
    let settled = false;
    const cleanup = (): void => {
      settled = true;
      stream.off('response', onResponse);
      stream.off('error', onError);
      stream.off('close', onClose);
      signal?.removeEventListener('abort', onAbort);
    };
    const onResponse = (headers: Record<string, unknown>): void => {
      const status = Number(headers[h2.HTTP2_HEADER_STATUS]);
      if (status === 200) {
        cleanup();
        bufferStringWrites(stream);
        resolve(stream);
        return;
      }
      // The agent's refusal: a short text body, then END_STREAM.
      let text = '';
      stream.setEncoding('utf8');
      stream.on('data', (d: string) => {
        if (text.length < MAX_REFUSAL_TEXT) text += d;
      });
      stream.once('end', () => {
        if (settled) return;
        cleanup();
        stream.destroy();
        fail(`error dialing backend: agent answered ${status}: ${text.slice(0, MAX_REFUSAL_TEXT).trim()}`);
      });
    };
    const onError = (err: Error): void => {
      cleanup();
      stream.destroy();
      fail(`error dialing backend: ${err.message}`);
    };
    const onClose = (): void => {
      if (settled) return;
      cleanup();
      fail(`error dialing backend: the agent closed the tunnel stream (code ${stream.rstCode ?? 'none'})`);
    };
    const onAbort = (): void => {
      cleanup();
      stream.close(h2.NGHTTP2_CANCEL);
      reject(signal?.reason ?? new Error('aborted'));
    };
    stream.on('response', onResponse);
    stream.on('error', onError);
    stream.on('close', onClose);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
  });
}
