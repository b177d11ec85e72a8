/**
 * UpstreamProbe: is the upstream reachable? One TCP (and TLS, for https) dial with a short timeout,
 * the cheapest check that works for both a kube-apiserver and a kubelet (a kubelet's `/healthz`
 * needs credentials we may not have). `/readyz` asks on demand; the answer is cached for a few
 * seconds and concurrent asks share one dial, so probes and scrapes never pile dials up.
 */
import { performance } from 'node:perf_hooks';
import { UpstreamTimeoutError } from './errors.js';
import type { DialErrorReason } from './metrics.js';
import type { Upstream } from './routing/upstream.js';

/** How long a probe result is reused: kubelet probes every 10 s by default, two replicas scrape too. */
export const UPSTREAM_PROBE_CACHE_MS = 3_000;

/** Dial deadline: under the 5 s readiness probe timeout the manifests set. */
export const UPSTREAM_PROBE_TIMEOUT_MS = 2_000;

/** One probe result. */
export interface ProbeResult {
  ok: boolean;
  /** Why it failed (the dial error's message): `/readyz` logs it and answers `reason withheld`. */
  message?: string;
}

/** Options of {@link UpstreamProbe}. */
export interface UpstreamProbeOptions {
  cacheMs?: number;
  timeoutMs?: number;
  /** Called for each failed dial (the `readiness` dial-error counter). */
  onDialError?: (reason: DialErrorReason) => void;
}

/** Cached reachability of one upstream. */
export class UpstreamProbe {
  readonly #upstream: Pick<Upstream, 'dial'>;
  readonly #cacheMs: number;
  readonly #timeoutMs: number;
  readonly #onDialError: ((reason: DialErrorReason) => void) | undefined;
  #last: { at: number; result: ProbeResult } | undefined;
  #inFlight: Promise<ProbeResult> | undefined;

  constructor(upstream: Pick<Upstream, 'dial'>, options: UpstreamProbeOptions = {}) {
    this.#upstream = upstream;
    this.#cacheMs = options.cacheMs ?? UPSTREAM_PROBE_CACHE_MS;
    this.#timeoutMs = options.timeoutMs ?? UPSTREAM_PROBE_TIMEOUT_MS;
    this.#onDialError = options.onDialError;
  }

  /** The cached result if fresh, else a new dial's. Never rejects. */
  check(): Promise<ProbeResult> {
    if (this.#last && performance.now() - this.#last.at < this.#cacheMs) return Promise.resolve(this.#last.result);
    this.#inFlight ??= this.#dial().then((result) => {
      this.#last = { at: performance.now(), result };
      this.#inFlight = undefined;
      return result;
    });
    return this.#inFlight;
  }

  async #dial(): Promise<ProbeResult> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new UpstreamTimeoutError(this.#timeoutMs)), this.#timeoutMs);
    try {
      const socket = await this.#upstream.dial(controller.signal);
      socket.destroy();
      return { ok: true };
    } catch (e) {
      this.#onDialError?.(e instanceof UpstreamTimeoutError ? 'timeout' : 'unreachable');
      return { ok: false, message: e instanceof Error ? e.message : String(e) };
    } finally {
      clearTimeout(timer);
    }
  }
}
