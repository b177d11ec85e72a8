/**
 * What every streaming session of the dev cluster registers with, so that `close()` can end them:
 * an AbortSignal that fires when the cluster closes, socket tracking, and in-flight tasks to await.
 */
import type { Duplex } from 'node:stream';

/**
 * Close-tracking shared by the HTTP server, the WebSocket handlers and the SPDY handlers.
 * Handlers call {@link DevClusterRuntime.track} on every socket they own and combine
 * {@link DevClusterRuntime.signal} with their own per-session abort.
 */
export class DevClusterRuntime {
  readonly #abort = new AbortController();
  readonly #sockets = new Set<Duplex>();
  readonly #tasks = new Set<Promise<unknown>>();

  /** Fires once, when the cluster starts closing. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** True once {@link shutdown} was called. */
  get closing(): boolean {
    return this.#abort.signal.aborted;
  }

  /** Destroy `socket` when the cluster closes (it is forgotten once it closes by itself). */
  track(socket: Duplex): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    if (this.#sockets.has(socket)) return;
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  /** Make {@link shutdown} wait for `task` (its rejection is ignored). */
  trackTask<T>(task: Promise<T>): Promise<T> {
    const settled = task.then(
      () => undefined,
      () => undefined,
    );
    this.#tasks.add(settled);
    void settled.then(() => this.#tasks.delete(settled));
    return task;
  }

  /** A signal that fires when the cluster closes or `own` fires. */
  sessionSignal(own: AbortSignal): AbortSignal {
    return AbortSignal.any([this.#abort.signal, own]);
  }

  /** Abort every session, destroy every tracked socket and wait for the tracked tasks. */
  async shutdown(): Promise<void> {
    this.#abort.abort(new Error('dev cluster is closing'));
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    while (this.#tasks.size > 0) await Promise.all([...this.#tasks]);
  }
}
