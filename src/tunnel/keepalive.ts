/**
 * HTTP/2 PINGs on a tunnel session, from both ends: they keep load balancers' idle timers from
 * firing and find a dead peer (a half-open TCP connection never errors by itself). A PING not
 * acknowledged within the timeout destroys the session, which removes it from the registry
 * (proxy) or starts a reconnect (agent).
 */
import type { Http2Session } from 'node:http2';
import { TUNNEL_PING_INTERVAL_MS, TUNNEL_PING_TIMEOUT_MS } from './protocol.js';

/** Options of {@link keepTunnelAlive}. */
export interface KeepAliveOptions {
  intervalMs?: number;
  timeoutMs?: number;
  /** Called once when the peer failed to answer, just before the session is destroyed. */
  onDead?: (reason: string) => void;
}

/** Ping `session` every interval until it closes. */
export function keepTunnelAlive(session: Http2Session, o: KeepAliveOptions = {}): void {
  const intervalMs = o.intervalMs ?? TUNNEL_PING_INTERVAL_MS;
  const timeoutMs = o.timeoutMs ?? TUNNEL_PING_TIMEOUT_MS;
  let deadline: NodeJS.Timeout | undefined;
  const dead = (reason: string): void => {
    stop();
    o.onDead?.(reason);
    session.destroy();
  };
  const timer = setInterval(() => {
    if (session.closed || session.destroyed || deadline) return;
    deadline = setTimeout(() => dead(`no PING acknowledgement within ${timeoutMs} ms`), timeoutMs);
    deadline.unref();
    const sent = session.ping((err) => {
      clearTimeout(deadline);
      deadline = undefined;
      if (err && !session.destroyed) dead(`PING failed: ${err.message}`);
    });
    if (!sent) {
      clearTimeout(deadline);
      deadline = undefined;
    }
  }, intervalMs);
  timer.unref();
  const stop = (): void => {
    clearInterval(timer);
    clearTimeout(deadline);
  };
  session.once('close', stop);
}
