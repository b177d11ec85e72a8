/**
 * The plain responses still being written on each client connection, so that an upgrade request
 * pipelined behind them waits its turn. Node hands an upgrade to `server.on('upgrade')` as soon as
 * its parser reaches it, even while the answers to the requests before it on the same connection
 * are still being written (or not yet started). Answering the upgrade then would interleave its
 * bytes with theirs, and binding a `ServerResponse` to the socket throws `ERR_HTTP_SOCKET_ASSIGNED`
 * (an uncaught exception: one pipelined request took the proxy down). Go's net/http serves pipelined
 * requests strictly one after the other; this restores that order for upgrades.
 *
 * It also knows the connections that end after an answer (`markClosing`): a request that asked for
 * `Connection: close` or came as HTTP/1.0 without keep-alive, one refused with `Connection: close`
 * because its body cannot be framed. Go reads no request after such a one; Node parses and dispatches
 * the requests pipelined behind it at once, and their answers would never be written — but their work
 * upstream (on the caller's or the proxy's credentials) would be done. The server drops them unserved.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** Tracks responses per connection; one instance per server. */
export class InFlightResponses {
  readonly #bySocket = new WeakMap<Duplex, Set<ServerResponse>>();
  readonly #waiters = new WeakMap<Duplex, Array<() => void>>();
  readonly #closing = new WeakSet<Duplex>();

  /** Nothing after the request being read on `socket` is served: its answer ends the connection. */
  markClosing(socket: Duplex): void {
    this.#closing.add(socket);
  }

  /** True when a request before this one on `socket` ends the connection (see {@link markClosing}). */
  isClosing(socket: Duplex): boolean {
    return this.#closing.has(socket);
  }

  /** Record `res` (the answer to `req`) until it has been written or its connection closed. */
  track(req: IncomingMessage, res: ServerResponse): void {
    const socket = req.socket;
    let open = this.#bySocket.get(socket);
    if (!open) this.#bySocket.set(socket, (open = new Set()));
    open.add(res);
    const done = (): void => {
      if (!open.delete(res) || open.size > 0) return;
      this.#bySocket.delete(socket);
      const waiters = this.#waiters.get(socket) ?? [];
      this.#waiters.delete(socket);
      for (const w of waiters) w();
    };
    res.once('finish', done);
    res.once('close', done);
  }

  /**
   * Call `next` once every response tracked on `socket` is done: at once when there is none, never
   * when the connection closes first.
   */
  whenIdle(socket: Duplex, next: () => void): void {
    if (!this.#bySocket.has(socket)) return next();
    const waiters = this.#waiters.get(socket) ?? [];
    this.#waiters.set(socket, waiters);
    waiters.push(() => {
      if (socket.destroyed) return;
      // Node's keep-alive timer, armed when the last answer finished, is not the upgrade's business.
      (socket as Partial<{ setTimeout(ms: number): void }>).setTimeout?.(0);
      next();
    });
  }
}
