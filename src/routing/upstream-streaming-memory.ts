/**
 * Which streaming protocol an upstream took after it refused the other one, remembered per upstream
 * (the route's name: `upstream`, `cluster/<name>`, `apiservice/<name>`) for a few minutes, so a
 * WebSocket-less upstream (OpenShift's 403) or a SPDY-less gateway is not asked in the protocol it
 * refuses once per session. An entry is written only when a fallback attempt got its 101; a fallback
 * that was refused too changes nothing. Entries expire, so an upstream that learns the other protocol
 * is asked again within {@link UPSTREAM_STREAMING_MEMORY_TTL_MS}, and their number is bounded.
 */

/** The streaming protocol spoken to an upstream. */
export type UpstreamStreamingProtocol = 'websocket' | 'spdy';

/**
 * How long a fallback is remembered: long enough that a burst of sessions (`kubectl cp`, a CI job)
 * pays for one refused upgrade, short enough that an upgraded upstream is used as such within minutes.
 */
export const UPSTREAM_STREAMING_MEMORY_TTL_MS = 5 * 60_000;

/**
 * At most this many upstreams are remembered; the oldest entry goes first. Route names come from
 * configuration (the primary upstream, agent token files, APIServices), not from callers.
 */
export const UPSTREAM_STREAMING_MEMORY_MAX_ENTRIES = 1_024;

/** Knobs for tests. */
export interface UpstreamStreamingMemoryOptions {
  ttlMs?: number;
  maxEntries?: number;
  /** The clock, in ms; `Date.now` by default. */
  now?: () => number;
}

/** The per-upstream memory of one server. */
export class UpstreamStreamingMemory {
  readonly #entries = new Map<string, { protocol: UpstreamStreamingProtocol; at: number }>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;

  constructor(o: UpstreamStreamingMemoryOptions = {}) {
    this.#ttlMs = o.ttlMs ?? UPSTREAM_STREAMING_MEMORY_TTL_MS;
    this.#maxEntries = o.maxEntries ?? UPSTREAM_STREAMING_MEMORY_MAX_ENTRIES;
    this.#now = o.now ?? Date.now;
  }

  /** The protocol `upstream` took after refusing the other, while remembered; else undefined. */
  preferred(upstream: string): UpstreamStreamingProtocol | undefined {
    const entry = this.#entries.get(upstream);
    if (!entry) return undefined;
    if (this.#now() - entry.at < this.#ttlMs) return entry.protocol;
    this.#entries.delete(upstream);
    return undefined;
  }

  /** `upstream` refused the other protocol before its 101 and answered `protocol` with 101. */
  remember(upstream: string, protocol: UpstreamStreamingProtocol): void {
    this.#entries.delete(upstream);
    if (this.#entries.size >= this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(upstream, { protocol, at: this.#now() });
  }

  /** How many upstreams are remembered (expired entries included until read). */
  get size(): number {
    return this.#entries.size;
  }
}
