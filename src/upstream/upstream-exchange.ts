/**
 * One upgrade request → response-head exchange with the upstream, shared by the passthrough
 * (UpgradeAwareProxy), the port-forward tunnel and the translator (`src/upstream/upstream-spdy.ts`): dial
 * (TLS/ALPN and credentials from `Upstream`), write the request head, read the response head with
 * every byte kept, all under one deadline, and abandoned as soon as the client goes away (its socket
 * closes: a reset, or a FIN once the paused socket is read).
 */
import type { Duplex } from 'node:stream';
import { UpstreamTimeoutError } from '../errors.js';
import type { Route } from '../routing/route.js';
import type { AuthHeaders } from '../routing/upstream.js';
import type { CompleteResponseHead } from '../wire/response-head.js';
import { readResponseHead } from '../wire/response-head.js';

/** What {@link exchangeUpgradeHead} needs. */
export interface UpgradeExchange {
  upstream: Route;
  /** The hijacked client socket: its 'close' abandons the exchange. Left paused by the caller. */
  clientSocket: Duplex;
  /** Deadline for dial + complete response head, in ms (`--upgrade-response-timeout`). */
  timeoutMs: number;
  /** Cap on the response head's bytes. */
  maxHeadBytes?: number;
  /**
   * The request head to send, given the upstream's auth headers: the head only, never bytes the client
   * sent after it (those wait for the 101; see `UpgradeAwareProxy`).
   */
  request(auth: AuthHeaders): Buffer;
}

/** How the exchange ended. */
export type UpgradeExchangeResult =
  /** The upstream answered; the caller owns `upstreamSocket` (paused) and decides what to do. */
  | { kind: 'answered'; upstreamSocket: Duplex; response: CompleteResponseHead }
  /** The client left first; everything is cleaned up. */
  | { kind: 'client-gone' }
  /** Dial, write, timeout or head error; the upstream socket is destroyed. Answer a Status. */
  | { kind: 'failed'; error: unknown };

/** Run the exchange. Never throws. */
export async function exchangeUpgradeHead(o: UpgradeExchange): Promise<UpgradeExchangeResult> {
  const controller = new AbortController();
  const onClientGone = (): void => controller.abort(new Error('client closed the connection'));
  o.clientSocket.once('close', onClientGone);
  const timer = setTimeout(() => controller.abort(new UpstreamTimeoutError(o.timeoutMs)), o.timeoutMs);
  let upstreamSocket: Duplex | undefined;
  try {
    const auth = await o.upstream.callerAuthHeaders();
    const requestBytes = o.request(auth);
    upstreamSocket = await o.upstream.dial(controller.signal);
    // Errors are also observed by the head reader and later by the relay; this keeps a late reset
    // from becoming an uncaught 'error'.
    // A shared no-op: a closure here would keep this call's scope (its AbortController, the request
    // options and header lines) alive as long as the socket (docs/benchmarks.md, "Idle sessions").
    upstreamSocket.on('error', ignoreError);
    upstreamSocket.write(requestBytes);
    const response = await readResponseHead(upstreamSocket, controller.signal, o.maxHeadBytes);
    if (o.clientSocket.destroyed) {
      upstreamSocket.destroy();
      return { kind: 'client-gone' };
    }
    return { kind: 'answered', upstreamSocket, response };
  } catch (error) {
    upstreamSocket?.destroy();
    return o.clientSocket.destroyed ? { kind: 'client-gone' } : { kind: 'failed', error };
  } finally {
    clearTimeout(timer);
    o.clientSocket.off('close', onClientGone);
  }
}

/** The upstream socket's 'error' listener of last resort (errors are handled where they matter). */
function ignoreError(): void {}
