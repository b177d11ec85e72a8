/**
 * StreamingSessions: the server's record of every streaming request (pods/exec, attach,
 * portforward) from the moment its route picks a path until it ends. It is the one place where a
 * session's end becomes metrics (outcome counter, duration, active gauge, WebSocket failures, dial
 * errors) and its one audit event, and the handle graceful shutdown uses to wait for sessions and
 * then end the ones that outlive the grace period.
 */
import { performance } from 'node:perf_hooks';
import { UpstreamTimeoutError, UpstreamUnreachableError } from './errors.js';
import { writeAuditEvent, type AuditEvent, type AuditSink, type StreamingFallback } from './audit.js';
import type {
  ClientProtocolLabel,
  DialErrorReason,
  ProxyMetrics,
  SessionOutcome,
  SessionPathLabel,
  SubresourceLabel,
  WebSocketFailureReason,
} from './metrics.js';

/** What is known about a streaming request when its path is chosen. */
export interface SessionFacts {
  subresource: SubresourceLabel;
  protocol: ClientProtocolLabel;
  path: SessionPathLabel;
  namespace: string;
  pod: string;
  container?: string;
  command?: string[];
  ports?: string[];
  sourceIP?: string;
  userAgent?: string;
  /** The verified user (impersonate mode; passthrough: a recorded session's, as the upstream named it). */
  user?: string;
  /** Why a recorded passthrough session names no user. */
  userUnknown?: string;
  /** The session's recording (docs/recording.md): its id, set once the recording has begun. */
  recordingId?: string;
  /**
   * The upstream refused the client's protocol (`from`) before its 101 with `statusCode`, and the
   * session was asked again in `to`, translated here (`path` is then the fallback's).
   */
  fallback?: StreamingFallback;
}

/** How a streaming request ended. */
export interface SessionEnd {
  outcome: SessionOutcome;
  /** The answer to the upgrade request (101 when established). */
  statusCode: number;
  bytes?: { readonly toUpstream: number; readonly toClient: number };
  /** The command's exit code when the proxy saw the Status; null otherwise. */
  exitCode?: number | null;
  /** Why `exitCode` is null (audit only). */
  exitCodeUnknown?: string;
  /** The error or Status message of a failure (audit only). */
  message?: string;
  /** A more precise WebSocket failure reason than the outcome (idle timeout, protocol error). */
  websocketFailure?: WebSocketFailureReason;
  /** The error that ended it, if any: dial failures are counted from it. */
  error?: unknown;
}

/** How a dial error shows in `kube_stream_proxy_upstream_dial_errors_total{reason}`, or undefined. */
export function dialErrorReason(e: unknown): DialErrorReason | undefined {
  if (e instanceof UpstreamUnreachableError) return 'unreachable';
  if (e instanceof UpstreamTimeoutError) return 'timeout';
  return undefined;
}

/** One streaming request. Created by {@link StreamingSessions.begin}; ended exactly once. */
export class StreamingSession {
  readonly facts: SessionFacts;
  readonly #owner: StreamingSessions;
  readonly #audit: AuditSink;
  readonly #startedAt = performance.now();
  #establishedAt: number | undefined;
  #answered = false;
  #subprotocol: string | undefined;
  #stop: (() => void) | undefined;
  #stopped = false;
  #ended = false;

  /** @internal use {@link StreamingSessions.begin}. */
  constructor(owner: StreamingSessions, facts: SessionFacts, audit: AuditSink) {
    this.#owner = owner;
    this.facts = facts;
    this.#audit = audit;
  }

  /** True once {@link end} ran. */
  get ended(): boolean {
    return this.#ended;
  }

  /** The client got its handshake answer (101 or a refusal): observe the handshake latency once. */
  answered(): void {
    if (this.#answered) return;
    this.#answered = true;
    const { subresource, path } = this.facts;
    this.#owner.metrics.observeHandshakeDuration(subresource, path, (performance.now() - this.#startedAt) / 1000);
  }

  /**
   * The session is established (101 sent). `stop` ends it when the shutdown grace period is over:
   * a translated session writes the shutdown Status, the others close their connections.
   */
  established(stop: () => void, subprotocol?: string): void {
    if (this.#ended || this.#establishedAt !== undefined) return;
    this.answered();
    this.#establishedAt = performance.now();
    this.#subprotocol = subprotocol;
    this.#stop = stop;
    this.#owner.metrics.addActiveSessions(this.facts.subresource, this.facts.path, 1);
    // Established after the grace period ran out: it ends at once like the others.
    if (this.#owner.stopping) this.stop();
  }

  /** End the session now (graceful shutdown after the grace period); no-op before it is established. */
  stop(): void {
    if (this.#ended || this.#stopped || !this.#stop) return;
    this.#stopped = true;
    this.#stop();
  }

  /** Record the end: metrics and the one audit event. Later calls are ignored. */
  end(e: SessionEnd): void {
    if (this.#ended) return;
    this.#ended = true;
    const { metrics } = this.#owner;
    const { subresource, protocol, path } = this.facts;
    const now = performance.now();
    if (e.outcome !== 'client_gone') this.answered();
    if (this.#establishedAt !== undefined) {
      metrics.addActiveSessions(subresource, path, -1);
      metrics.observeSessionDuration(subresource, path, (now - this.#establishedAt) / 1000);
    }
    metrics.incStreamingRequest(subresource, protocol, path, e.outcome);
    if (protocol !== 'spdy' && e.outcome !== 'success' && e.outcome !== 'nonzero_exit') {
      metrics.incWebSocketFailure(e.websocketFailure ?? e.outcome);
    }
    const dial = dialErrorReason(e.error);
    if (dial) metrics.incUpstreamDialError(path, dial);
    const f = this.facts;
    const event: AuditEvent = {
      audit: true,
      namespace: f.namespace,
      pod: f.pod,
      subresource,
      ...(f.container !== undefined ? { container: f.container } : {}),
      ...(f.command !== undefined ? { command: f.command } : {}),
      ...(f.ports !== undefined ? { ports: f.ports } : {}),
      clientProtocol: protocol,
      ...(this.#subprotocol !== undefined ? { subprotocol: this.#subprotocol } : {}),
      path,
      ...(f.fallback !== undefined ? { fallback: f.fallback } : {}),
      ...(f.sourceIP !== undefined ? { sourceIP: f.sourceIP } : {}),
      ...(f.user !== undefined ? { user: f.user } : {}),
      ...(f.userUnknown !== undefined ? { userUnknown: f.userUnknown } : {}),
      ...(f.userAgent !== undefined ? { userAgent: f.userAgent } : {}),
      statusCode: e.statusCode,
      bytesToUpstream: e.bytes?.toUpstream ?? 0,
      bytesToClient: e.bytes?.toClient ?? 0,
      exitCode: e.exitCode ?? null,
      ...(e.exitCode === undefined || e.exitCode === null ? { exitCodeUnknown: e.exitCodeUnknown ?? `no exit status (${e.outcome})` } : {}),
      durationMs: Math.round(now - this.#startedAt),
      outcome: e.outcome,
      ...(e.message !== undefined ? { message: e.message } : {}),
      ...(f.recordingId !== undefined ? { recordingId: f.recordingId } : {}),
    };
    writeAuditEvent(this.#audit, event);
    this.#owner.release(this);
  }
}

/** Every open streaming request of one server. */
export class StreamingSessions {
  readonly metrics: ProxyMetrics;
  readonly #open = new Set<StreamingSession>();
  readonly #idleWaiters: Array<() => void> = [];
  #draining = false;
  #stopping = false;

  constructor(metrics: ProxyMetrics) {
    this.metrics = metrics;
  }

  /** True once shutdown began: new streaming requests are refused and `/readyz` fails. */
  get draining(): boolean {
    return this.#draining;
  }

  /** True once the grace period is over: sessions established from now on are stopped at once. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** Streaming requests not yet ended (handshakes in progress included). */
  get size(): number {
    return this.#open.size;
  }

  /** Start recording a streaming request; its audit event goes to `audit` (the request's logger). */
  begin(facts: SessionFacts, audit: AuditSink): StreamingSession {
    const session = new StreamingSession(this, facts, audit);
    this.#open.add(session);
    return session;
  }

  /** @internal called by {@link StreamingSession.end}. */
  release(session: StreamingSession): void {
    this.#open.delete(session);
    if (this.#open.size === 0) for (const w of this.#idleWaiters.splice(0)) w();
  }

  /** Mark the server as draining. */
  startDraining(): void {
    this.#draining = true;
  }

  /** Resolves once no streaming request is open. */
  whenIdle(): Promise<void> {
    if (this.#open.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
  }

  /** The grace period is over: stop every session, now and as they get established. Returns how many were open. */
  stopAll(): number {
    this.#stopping = true;
    const n = this.#open.size;
    for (const s of [...this.#open]) s.stop();
    return n;
  }
}
