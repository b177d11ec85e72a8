/**
 * PING bookkeeping for one connection: ids of our parity, pending round trips, RTT measurement.
 */
import { performance } from 'node:perf_hooks';

interface PendingPing {
  start: number;
  resolve(ms: number): void;
  reject(e: Error): void;
}

/** Tracks our outstanding PINGs (odd ids for clients, even for servers, as SPDY/3 requires). */
export class PingTracker {
  private nextId: number;
  private readonly pending = new Map<number, PendingPing>();

  /** @param isServer server role uses even ids, client role odd ones. */
  constructor(private readonly isServer: boolean) {
    this.nextId = isServer ? 2 : 1;
  }

  /** True when `id` has our parity (an echo of one of ours, not a ping to answer). */
  isOurs(id: number): boolean {
    return (id % 2 === 0) === this.isServer;
  }

  /** Allocates an id and a promise of the RTT in ms; the caller sends the PING frame. */
  start(): { id: number; rtt: Promise<number> } {
    const id = this.nextId;
    this.nextId = (this.nextId + 2) % 0x100000000 || (this.isServer ? 2 : 1);
    const rtt = new Promise<number>((resolve, reject) => {
      this.pending.set(id, { start: performance.now(), resolve, reject });
    });
    return { id, rtt };
  }

  /** An echo of ours arrived; unknown ids are ignored. */
  echoed(id: number): void {
    const p = this.pending.get(id);
    if (p === undefined) return;
    this.pending.delete(id);
    p.resolve(performance.now() - p.start);
  }

  /** Rejects every outstanding ping. */
  rejectAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
