/**
 * Bytes through the tunnel, counted on the proxy's side of each tunnel stream for
 * `kube_stream_proxy_tunnel_bytes_total{cluster,direction}`.
 *
 * An Http2Stream has no byte counters of its own (Node 20.20: no `bytesRead`/`bytesWritten`, and
 * the carrier socket's counters include every stream's HTTP/2 framing, PINGs and window updates).
 * So the stream's own entry points are wrapped: `_write`/`_writev` (everything handed to the
 * stream for the agent) and `push` (everything Node's http2 delivers from the agent). Each adds the
 * chunk's length to a plain number per cluster and direction — no event listener, no timer, no
 * Prometheus call per chunk; `src/metrics.ts` moves the numbers into the counter when `/metrics`
 * is scraped, so a long stream shows up as it runs, not only at its close. A 16 KiB DATA frame
 * costs one closure call and one addition on top of nghttp2's own work for it.
 */
import type { Duplex } from 'node:stream';

/** Running byte totals of one cluster's tunnel streams (added to by the relay, read at scrape). */
export interface TunnelByteTotals {
  /** Bytes the proxy wrote into tunnel streams (requests, stdin, port-forward uploads). */
  toCluster: number;
  /** Bytes the proxy read from tunnel streams (responses, stdout/stderr, port-forward downloads). */
  fromCluster: number;
}

type WriteChunk = { chunk: unknown; encoding: BufferEncoding };
type CountedInternals = {
  _write(chunk: unknown, encoding: BufferEncoding, cb: (e?: Error | null) => void): void;
  _writev?(chunks: WriteChunk[], cb: (e?: Error | null) => void): void;
  push(chunk: unknown, encoding?: BufferEncoding): boolean;
};

/** Length in bytes of a chunk handed to a stream (a Buffer or Uint8Array, or a string in `encoding`). */
function chunkBytes(chunk: unknown, encoding: BufferEncoding | undefined): number {
  if (typeof chunk === 'string') return Buffer.byteLength(chunk, encoding === ('buffer' as BufferEncoding) ? 'utf8' : encoding);
  if (chunk instanceof Uint8Array) return chunk.byteLength;
  return 0;
}

/**
 * Count every byte written to and read from `stream` into `totals` from now on. Apply it once per
 * stream, after any other wrapper of its `_write` (`bufferStringWrites`): the count is taken on
 * the chunk as the relay handed it.
 */
export function countTunnelBytes(stream: Duplex, totals: TunnelByteTotals): void {
  const s = stream as unknown as CountedInternals;
  const write = s._write;
  const writev = s._writev;
  const push = s.push;
  s._write = function (chunk, encoding, cb) {
    totals.toCluster += chunkBytes(chunk, encoding);
    write.call(this, chunk, encoding, cb);
  };
  if (writev) {
    s._writev = function (chunks, cb) {
      for (const c of chunks) totals.toCluster += chunkBytes(c.chunk, c.encoding);
      writev.call(this, chunks, cb);
    };
  }
  s.push = function (chunk, encoding) {
    if (chunk !== null && chunk !== undefined) totals.fromCluster += chunkBytes(chunk, encoding);
    return push.call(this, chunk, encoding);
  };
}
