/**
 * The agent's side of one tunnel stream: the proxy opened it with `:method CONNECT`; the agent
 * dials its own apiserver (never an address the proxy names), answers `:status 200` and relays the
 * stream's bytes both ways (`pipe.ts`), or answers `502` with the dial error when the apiserver
 * cannot be reached. Which apiserver and how it is dialled is the agent's {@link Upstream}.
 */
import { constants as h2, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import type { Upstream } from '../routing/upstream.js';
import type { AgentLogger } from './agent.js';
import { relayTunnelStream } from './pipe.js';

/** What {@link serveTunnelStream} needs from its agent. */
export interface AgentStreamContext {
  /** The cluster's apiserver: every tunnel stream is connected here. */
  upstream: Upstream;
  log: AgentLogger;
}

/** Serve one tunnel stream: connect it to the apiserver and relay until both sides are done. */
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
      stream.off('close', onGone);
      if (stream.closed || stream.destroyed) {
        socket.destroy();
        return;
      }
      socket.on('error', () => {});
      stream.respond({ [h2.HTTP2_HEADER_STATUS]: 200 });
      void relayTunnelStream(stream, socket);
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
