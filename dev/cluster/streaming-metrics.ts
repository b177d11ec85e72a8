/**
 * The dev cluster's streaming counters, named as kube-apiserver and the kubelet name them, so a test
 * sees which way a session went inside the dev cluster (kubectl ≥ 1.30 falls back to SPDY silently):
 *
 * - the apiserver look-alike (`/metrics` of the API listener):
 *   `apiserver_websocket_streaming_requests_total{proxy_type, subresource}` (1.36: `proxied_to_kubelet`,
 *   `translated_at_apiserver`, `tunneled_at_apiserver`), `apiserver_stream_translator_requests_total{code}`
 *   and `apiserver_stream_tunnel_requests_total{code}` (sessions translated or tunnelled AT the apiserver);
 * - the kubelet (`/metrics` of the kubelet listener, and `nodes/NODE/proxy/metrics` through the API):
 *   `kubelet_websocket_streaming_requests_total{subresource}`, WebSocket v5 and tunnel sessions only.
 *
 * One deviation, on purpose: kube-apiserver 1.36 counts `apiserver_websocket_streaming_requests_total`
 * in `Connect()`, for every streaming request whatever its protocol (SPDY included); the dev cluster
 * counts only WebSocket v5 and tunnel requests, so a SPDY fallback never looks like a WebSocket
 * session. And it prints each family's HELP and TYPE even before the first sample (a Go registry
 * omits an empty vector), so `grep websocket_streaming` finds the names at once.
 */

/** A streaming subresource. */
export type StreamSubresource = 'exec' | 'attach' | 'portforward';

/** `proxy_type` of `apiserver_websocket_streaming_requests_total`. */
export type WebSocketProxyType = 'proxied_to_kubelet' | 'translated_at_apiserver' | 'tunneled_at_apiserver';

/** One counter family with labels; samples in first-seen order, labels sorted by name as Go prints them. */
class CounterFamily<L extends string> {
  readonly #samples = new Map<string, number>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly L[],
  ) {}

  /** Add one to the sample with these labels. */
  inc(labels: Record<L, string>): void {
    const key = [...this.labelNames].sort().map((n) => `${n}="${escapeLabel(labels[n])}"`).join(',');
    this.#samples.set(key, (this.#samples.get(key) ?? 0) + 1);
  }

  /** The exposition lines: HELP, TYPE, then one line per sample. */
  lines(): string[] {
    const out = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const [key, value] of this.#samples) out.push(`${this.name}{${key}} ${value}`);
    return out;
  }
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/** The apiserver look-alike's counters. */
export class ApiserverStreamingMetrics {
  readonly #websocket = new CounterFamily(
    'apiserver_websocket_streaming_requests_total',
    '[ALPHA] Total number of WebSocket streaming requests (exec/attach/portforward) routed by the API server, labeled by subresource and proxy_type. proxy_type is proxied_to_kubelet when the kubelet handles the request directly; otherwise translated_at_apiserver (exec/attach) or tunneled_at_apiserver (portforward).',
    ['subresource', 'proxy_type'] as const,
  );
  readonly #translator = new CounterFamily(
    'apiserver_stream_translator_requests_total',
    '[ALPHA] Total number of requests that were handled by the StreamTranslatorProxy, which processes streaming RemoteCommand/V5',
    ['code'] as const,
  );
  readonly #tunnel = new CounterFamily(
    'apiserver_stream_tunnel_requests_total',
    '[ALPHA] Total number of requests that were handled by the StreamTunnelProxy, which processes streaming PortForward/V2',
    ['code'] as const,
  );

  /** A WebSocket v5 or tunnel request routed one way (counted before the upgrade, as `Connect()` does). */
  incWebSocketStreaming(subresource: StreamSubresource, proxyType: WebSocketProxyType): void {
    this.#websocket.inc({ subresource, proxy_type: proxyType });
  }

  /** A session the apiserver's StreamTranslatorProxy ended with `code`. */
  incStreamTranslatorRequest(code: number | string): void {
    this.#translator.inc({ code: String(code) });
  }

  /** A session the apiserver's StreamTunnelProxy ended with `code` (101 once tunnelled). */
  incStreamTunnelRequest(code: number | string): void {
    this.#tunnel.inc({ code: String(code) });
  }

  /** Prometheus text. */
  exposition(): string {
    return [...this.#websocket.lines(), ...this.#translator.lines(), ...this.#tunnel.lines()].join('\n') + '\n';
  }
}

/** The kubelet's counter. */
export class KubeletStreamingMetrics {
  readonly #websocket = new CounterFamily(
    'kubelet_websocket_streaming_requests_total',
    '[ALPHA] Total number of WebSocket streaming requests (exec/attach/portforward) received by the kubelet.',
    ['subresource'] as const,
  );

  /** A WebSocket v5 or tunnel session arrived at the kubelet. */
  incWebSocketStreaming(subresource: StreamSubresource): void {
    this.#websocket.inc({ subresource });
  }

  /** Prometheus text. */
  exposition(): string {
    return this.#websocket.lines().join('\n') + '\n';
  }
}
