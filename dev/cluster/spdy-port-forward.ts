/**
 * pods/portforward over SPDY/3.1, served as a kubelet serves it
 * (kubelet `pkg/cri/streaming/portforward/httpstream.go`): protocol `portforward.k8s.io`; for each
 * forwarded TCP connection the client opens an `error` and a `data` stream with the same `port` and
 * `requestID` headers; once both exist the data stream is joined to 127.0.0.1:<port>.
 */
import { connect, type Socket } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { headerValue, RstStatus, type SpdyStream } from '../../src/spdy/index.js';
import { PortForwardProtocolV1Name } from '../../src/stream-protocol.js';
import { acceptSpdyUpgrade } from './spdy-handshake.js';
import type { DevClusterRuntime } from './cluster-runtime.js';
import type { Pod } from './pod.js';

/** Everything a port-forward handler needs once the request was validated. */
export interface PortForwardContext {
  pod: Pod;
  /** From `ports=` (may be empty for SPDY: the ports then come with each stream). */
  ports: number[];
  /** Close-tracking: `cluster.track(socket)`, `cluster.sessionSignal(own)`, `cluster.trackTask(p)`. */
  cluster: DevClusterRuntime;
  logger?: { warn(msg: string, ...args: unknown[]): void };
}

/** How long the kubelet waits for the second stream of a pair. */
export const STREAM_PAIR_TIMEOUT_MS = 30_000;

interface StreamPair {
  port: number;
  error?: SpdyStream;
  data?: SpdyStream;
  timer?: NodeJS.Timeout;
}

/** Serve one port-forward upgrade request over SPDY on `socket`. Never throws. */
export function serveSpdyPortForward(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  ctx: PortForwardContext,
): void {
  const accepted = acceptSpdyUpgrade(req, socket, head, [PortForwardProtocolV1Name], ctx.logger);
  if (!accepted) return;
  const { connection } = accepted;
  const pairs = new Map<string, StreamPair>();
  const dials = new Set<Socket>();
  const closeAll = (): void => {
    for (const pair of pairs.values()) clearTimeout(pair.timer);
    pairs.clear();
    for (const s of dials) s.destroy();
  };
  // The cluster's shutdown ends the connection; the listener goes with the connection, not with the cluster.
  const onAbort = (): void => connection.destroy();
  ctx.cluster.signal.addEventListener('abort', onAbort, { once: true });
  connection.on('close', () => {
    ctx.cluster.signal.removeEventListener('abort', onAbort);
    closeAll();
  });

  connection.on('stream', (stream: SpdyStream) => {
    // A vanished client destroys every stream with an error; each pair cleans up through 'close'.
    stream.on('error', () => undefined);
    const type = headerValue(stream.headers, 'streamtype');
    const portHeader = headerValue(stream.headers, 'port');
    const port = portHeader !== undefined && /^\d{1,5}$/.test(portHeader) ? Number(portHeader) : NaN;
    if ((type !== 'error' && type !== 'data') || !(port >= 1 && port <= 65535)) {
      ctx.logger?.warn(`portforward: rejecting stream: streamType=${type} port=${portHeader}`);
      stream.reset(RstStatus.REFUSED_STREAM);
      return;
    }
    stream.reply();
    // Clients before requestID pair the data stream (id-2) with the error stream (id).
    const requestID =
      headerValue(stream.headers, 'requestid') ?? String(type === 'error' ? stream.id : stream.id + 2);
    let pair = pairs.get(requestID);
    if (!pair) {
      pair = { port };
      pairs.set(requestID, pair);
      const created = pair;
      created.timer = setTimeout(() => {
        pairs.delete(requestID);
        created.error?.end('timed out waiting for streams');
        created.data?.reset();
      }, STREAM_PAIR_TIMEOUT_MS);
      created.timer.unref();
    }
    if (pair[type]) {
      ctx.logger?.warn(`portforward: duplicate ${type} stream for request ${requestID}`);
      stream.reset(RstStatus.PROTOCOL_ERROR);
      return;
    }
    pair[type] = stream;
    if (type === 'error') stream.resume(); // the client half-closes it at once; drain it
    if (pair.error && pair.data) {
      clearTimeout(pair.timer);
      pairs.delete(requestID);
      forward(pair.error, pair.data, pair.port, ctx, dials);
    }
  });
}

function forward(error: SpdyStream, data: SpdyStream, port: number, ctx: PortForwardContext, dials: Set<Socket>): void {
  const target = connect({ host: '127.0.0.1', port, noDelay: true });
  dials.add(target);
  let connected = false;
  target.once('connect', () => {
    connected = true;
    data.pipe(target);
  });
  target.pipe(data);
  target.on('end', () => error.end());
  target.on('error', (err) => {
    if (!connected) {
      error.end(`error forwarding port ${port} to pod ${ctx.pod.name}, uid : ${err.message}`);
      data.reset();
    } else {
      data.reset();
      error.end();
    }
  });
  target.once('close', () => dials.delete(target));
  data.on('reset', () => target.destroy());
  data.on('error', () => target.destroy());
}
