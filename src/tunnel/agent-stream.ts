/**
 * The agent's side of one tunnel stream: the proxy opened it with `:method CONNECT` to carry ONE
 * HTTP/1.1 request. The agent dials its own apiserver (never an address the proxy names) and answers
 * `:status 200` (or `502` with the dial error), then reads the request head (`agent-request.ts`):
 * a bad head gets a 400 Status and a path outside the Kubernetes API a 403 Status, both written back
 * on the stream and logged. Otherwise it writes the rewritten head (the apiserver's `Host`,
 * `Connection: close`, its own credentials in `--access-as impersonate`) and:
 *
 * - a plain request: exactly its body goes to the apiserver (bytes after it are dropped, never
 *   served), and the apiserver's answer comes back verbatim until it closes;
 * - an upgrade: nothing after the head is sent until the apiserver has answered; after a `101` both
 *   directions are relayed raw (`pipe.ts`: half-close and reset carried); any other answer is
 *   relayed verbatim and the stream ends after it (the 101 check, as the UpgradeAwareProxy does).
 */
import { constants as h2, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { Transform, type Duplex } from 'node:stream';
import { relayErrorResponse } from '../wire/relay-error-response.js';
import { readResponseHead } from '../wire/response-head.js';
import { closeAfterAnswer } from '../wire/close-after-answer.js';
import { UpstreamClosedError } from '../errors.js';
import type { Upstream } from '../routing/upstream.js';
import { errorStatus, type V1Status } from '../status.js';
import type { AgentLogger } from './agent-logger.js';
import {
  apiPathRefusal,
  BodyFramer,
  bodyFraming,
  isUpgradeRequest,
  MAX_REQUEST_HEAD_BYTES,
  parseRequestHead,
  rewriteRequestHead,
  type AccessAs,
  type RequestHead,
  type RequestHeadParse,
} from './agent-request.js';
import { relayTunnelStream } from './pipe.js';

/**
 * How long the proxy may take to send the request head after the agent's `200`: the proxy writes
 * it at once; a stream that stays silent this long holds an apiserver connection for nothing.
 */
export const REQUEST_HEAD_TIMEOUT_MS = 60_000;

/** What {@link serveTunnelStream} needs from its agent. */
export interface AgentStreamContext {
  /** The cluster's apiserver: every tunnel stream is connected here. */
  upstream: Upstream;
  /** The cluster's name, for Status messages and logs. */
  clusterName: string;
  /** `--access-as`: passthrough (the caller's credentials) or impersonate (the agent's). */
  accessAs: AccessAs;
  log: AgentLogger;
}

/** Serve one tunnel stream: connect it to the apiserver and serve its one request. */
export function serveTunnelStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, ctx: AgentStreamContext): void {
  stream.on('error', () => {});
  if (headers[h2.HTTP2_HEADER_METHOD] !== h2.HTTP2_METHOD_CONNECT) {
    stream.respond({ [h2.HTTP2_HEADER_STATUS]: 405 });
    stream.end('the agent tunnel carries CONNECT streams only\n');
    return;
  }
  const controller = new AbortController();
  const onGone = (): void => controller.abort(new Error('tunnel stream closed'));
  stream.once('close', onGone);
  ctx.upstream.dial(controller.signal).then(
    (socket: Duplex) => {
      if (stream.closed || stream.destroyed) {
        socket.destroy();
        return;
      }
      socket.on('error', () => {});
      stream.respond({ [h2.HTTP2_HEADER_STATUS]: 200 });
      serveRequest(stream, socket, ctx, controller.signal).catch((e: Error) => {
        ctx.log.warn({ err: e.message }, 'tunnel stream failed');
        socket.destroy();
        if (!stream.closed) stream.close(h2.NGHTTP2_INTERNAL_ERROR);
      });
    },
    (err: Error) => {
      stream.off('close', onGone);
      if (stream.closed || stream.destroyed) return;
      ctx.log.warn({ upstream: ctx.upstream.url.origin, err: err.message }, 'dialing the apiserver failed');
      stream.respond({ [h2.HTTP2_HEADER_STATUS]: 502 });
      stream.end(`${err.message}\n`);
    },
  );
}

/** Answer the request with `status` on the stream (then end it) and close the apiserver connection. */
function refuse(stream: ServerHttp2Stream, socket: Duplex, status: V1Status): void {
  socket.destroy();
  closeAfterAnswer(stream, status);
}

async function serveRequest(stream: ServerHttp2Stream, socket: Duplex, ctx: AgentStreamContext, signal: AbortSignal): Promise<void> {
  // The apiserver closing (or resetting) its connection before the request arrived resets the stream.
  const onSocketClose = (): void => {
    if (!stream.closed) stream.close(h2.NGHTTP2_CANCEL);
  };
  socket.once('close', onSocketClose);
  const read = await readRequestHead(stream, signal);
  socket.off('close', onSocketClose);
  if (socket.destroyed) return;
  if (read === undefined) {
    // The proxy closed the stream before sending a request (its client went away).
    socket.destroy();
    return;
  }
  const { parse, buffered } = read;
  if (parse.kind !== 'complete') {
    const status = parse.kind === 'invalid' ? parse.status : errorStatus(408, `no request head within ${REQUEST_HEAD_TIMEOUT_MS} ms`, 'Timeout');
    ctx.log.warn({ cluster: ctx.clusterName, code: status.code, why: status.message }, 'bad request from the proxy refused');
    return refuse(stream, socket, status);
  }
  const { head } = parse;
  const rest = buffered.subarray(parse.length);
  const refusal = apiPathRefusal(head.target, ctx.clusterName);
  if (refusal) {
    ctx.log.warn({ cluster: ctx.clusterName, method: head.method, path: head.target.split('?')[0], code: refusal.code }, 'request outside the Kubernetes API refused');
    return refuse(stream, socket, refusal);
  }
  const framing = bodyFraming(head);
  const upgrade = isUpgradeRequest(head);
  if (framing.kind === 'invalid' || (upgrade && framing.kind !== 'none')) {
    const status = framing.kind === 'invalid' ? framing.status : errorStatus(400, 'bad request from the proxy: an upgrade request carries no body', 'BadRequest');
    ctx.log.warn({ cluster: ctx.clusterName, method: head.method, path: head.target.split('?')[0], why: status.message }, 'bad request from the proxy refused');
    return refuse(stream, socket, status);
  }
  let credentials = {};
  if (ctx.accessAs === 'impersonate') {
    try {
      credentials = await ctx.upstream.authHeaders();
    } catch (e) {
      ctx.log.warn({ cluster: ctx.clusterName, err: (e as Error).message }, 'the agent could not load its credentials');
      return refuse(stream, socket, errorStatus(503, `the agent for cluster "${ctx.clusterName}" could not load its credentials: ${(e as Error).message}`, 'ServiceUnavailable'));
    }
  }
  let upstreamHead: Buffer;
  try {
    upstreamHead = rewriteRequestHead(head, { host: ctx.upstream.host, target: ctx.upstream.target(head.target), accessAs: ctx.accessAs, credentials });
  } catch (e) {
    const status = errorStatus(400, `bad request from the proxy: ${(e as Error).message}`, 'BadRequest');
    ctx.log.warn({ cluster: ctx.clusterName, method: head.method, path: head.target.split('?')[0], why: status.message }, 'bad request from the proxy refused');
    return refuse(stream, socket, status);
  }
  socket.write(upstreamHead);
  if (!upgrade) {
    if (rest.length > 0) stream.unshift(rest);
    void relayTunnelStream(stream, socket, bodyOnly(new BodyFramer(framing), head, ctx));
    return;
  }
  await serveUpgrade(stream, socket, head, rest, signal, ctx);
}

/** A Transform passing exactly one request body; bytes after it are dropped (logged once). */
function bodyOnly(framer: BodyFramer, head: RequestHead, ctx: AgentStreamContext): Transform {
  let warned = false;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      const body = framer.take(chunk);
      if (framer.error !== undefined) {
        ctx.log.warn({ cluster: ctx.clusterName, method: head.method, path: head.target.split('?')[0], why: framer.error }, 'bad request body from the proxy');
        callback(new Error(framer.error));
        return;
      }
      if (body.length < chunk.length && !warned) {
        warned = true;
        ctx.log.warn({ cluster: ctx.clusterName, method: head.method, path: head.target.split('?')[0], bytes: chunk.length - body.length }, 'bytes after the request dropped: one request per tunnel stream');
      }
      callback(null, body.length > 0 ? body : undefined);
    },
  });
}

/** The 101 check: relay raw after a `101`, else relay the answer verbatim and end the stream. */
async function serveUpgrade(stream: ServerHttp2Stream, socket: Duplex, head: RequestHead, early: Buffer, signal: AbortSignal, ctx: AgentStreamContext): Promise<void> {
  let response;
  try {
    response = await readResponseHead(socket, signal);
  } catch (e) {
    socket.destroy();
    if (stream.closed) return;
    // A clean close without an answer ends the stream (the proxy reports the closed upstream);
    // anything else resets it.
    if (e instanceof UpstreamClosedError && e.cause === undefined) closeAfterAnswer(stream);
    else stream.close(h2.NGHTTP2_CANCEL);
    return;
  }
  const raw = response.rest.length > 0 ? Buffer.concat([response.headBytes, response.rest]) : response.headBytes;
  if (response.head.statusCode === 101) {
    stream.write(raw);
    if (early.length > 0) stream.unshift(early);
    void relayTunnelStream(stream, socket);
    return;
  }
  ctx.log.info({ cluster: ctx.clusterName, method: head.method, path: head.target.split('?')[0], code: response.head.statusCode }, 'upgrade not switched by the apiserver: answer relayed, stream ended');
  relayErrorResponse(stream, socket, raw, response, head.method === 'HEAD');
}

/**
 * Read the stream until the request head is complete (or invalid); the stream is left paused with
 * every byte read returned in `buffered`. Undefined when the stream ends or closes first with no
 * bytes; a `timeout` parse after REQUEST_HEAD_TIMEOUT_MS.
 */
function readRequestHead(
  stream: ServerHttp2Stream,
  signal: AbortSignal,
): Promise<{ parse: RequestHeadParse | { kind: 'timeout' }; buffered: Buffer } | undefined> {
  return new Promise((resolve) => {
    let buffered: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => done({ parse: { kind: 'timeout' }, buffered }), REQUEST_HEAD_TIMEOUT_MS);
    function done(result: { parse: RequestHeadParse | { kind: 'timeout' }; buffered: Buffer } | undefined): void {
      clearTimeout(timer);
      stream.pause();
      stream.off('data', onData);
      stream.off('end', onEnd);
      signal.removeEventListener('abort', onEnd);
      resolve(result);
    }
    const onData = (chunk: Buffer): void => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      const parse = parseRequestHead(buffered, MAX_REQUEST_HEAD_BYTES);
      if (parse.kind !== 'incomplete') done({ parse, buffered });
    };
    const onEnd = (): void => {
      if (buffered.length === 0) return done(undefined);
      // Complete heads were taken in onData: what is left ended inside the head.
      done({ parse: { kind: 'invalid', status: errorStatus(400, 'bad request from the proxy: the stream ended inside the request head', 'BadRequest') }, buffered });
    };
    stream.on('data', onData);
    stream.once('end', onEnd);
    if (signal.aborted) onEnd();
    else signal.addEventListener('abort', onEnd, { once: true });
  });
}
