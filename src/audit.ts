/**
 * Audit events: exactly one structured log line per streaming request (pods/exec, attach,
 * portforward), written when it ends, whatever happened. The line carries `audit: true` so a log
 * pipeline can route it apart from the operational logs; pino adds the request id (`reqId`).
 *
 * `user` is present only when it was verified: by the proxy (`--authn=impersonate`), or, for a
 * recorded passthrough session, by the upstream — the name its SelfSubjectReview answered with the
 * caller's own credentials (`src/recording/caller-identity.ts`). Otherwise a bearer token is opaque to
 * the proxy, and an unverified name would be worse than none; a recorded session then says why
 * (`userUnknown`).
 */
import type { ClientProtocolLabel, SessionOutcome, SessionPathLabel, StreamingProtocolLabel, SubresourceLabel } from './metrics.js';

/** A fallback before the 101 (handlers/stream-path.ts): the client's protocol refused with `statusCode`, asked again in `to`. */
export interface StreamingFallback {
  from: StreamingProtocolLabel;
  to: StreamingProtocolLabel;
  statusCode: number;
}

/** Message of every audit line, so it can be grepped as well as filtered on `audit`. */
export const AUDIT_MESSAGE = 'streaming session';

/** Why a passthrough session has no exit code: the proxy relays its bytes without parsing them. */
export const PASSTHROUGH_EXIT_CODE_UNKNOWN = 'unknown: passthrough relays the upstream protocol without parsing it';

/** One audit event. */
export interface AuditEvent {
  audit: true;
  /**
   * The verified user: `--authn=impersonate`; in passthrough, recorded sessions only, as the upstream's
   * SelfSubjectReview named the caller. Absent for other passthrough sessions.
   */
  user?: string;
  /** A recorded passthrough session whose caller the upstream could not be asked about: why. */
  userUnknown?: string;
  namespace: string;
  pod: string;
  subresource: SubresourceLabel;
  /** `container` query parameter, when given. */
  container?: string;
  /** exec: the `command` query parameters, one argv element each. */
  command?: string[];
  /** portforward: the `ports` query parameters, when given (the tunnel and SPDY carry them per stream). */
  ports?: string[];
  /** What the client spoke. */
  clientProtocol: ClientProtocolLabel;
  /** The negotiated subprotocol (`v5.channel.k8s.io`, `v4.channel.k8s.io`, `SPDY/3.1+portforward.k8s.io`…), when known. */
  subprotocol?: string;
  /**
   * How the proxy served it: `passthrough` (bytes relayed unchanged), `translated` (v5 → SPDY),
   * `tunnel` (the port-forward tunnel unwrapped), `reverse_translated` (SPDY → v5), `reverse_tunnel`
   * (SPDY port-forward wrapped into the tunnel). After a fallback, the fallback's path.
   */
  path: SessionPathLabel;
  /**
   * Present when the upstream refused the client's own protocol before its 101 and the session was
   * asked again in the other one: `{from, to, statusCode}` (protocols `websocket` or `spdy`).
   */
  fallback?: StreamingFallback;
  /** The client's address (logs only, never a metric label). */
  sourceIP?: string;
  userAgent?: string;
  /** The answer to the upgrade request: 101, the upstream's code, or ours. */
  statusCode: number;
  /** Payload bytes from the client to the upstream. */
  bytesToUpstream: number;
  /** Payload bytes from the upstream to the client. */
  bytesToClient: number;
  /** The command's exit code: from the Status on the error stream (translated exec/attach), else null. */
  exitCode: number | null;
  /** Why `exitCode` is null. */
  exitCodeUnknown?: string;
  /** From the request reaching its route to the end of the session, in milliseconds. */
  durationMs: number;
  outcome: SessionOutcome;
  /** The error or Status message, for failed outcomes. */
  message?: string;
  /** The session's recording id (its `.cast` file name without the extension; `sessions play ID`), when recorded. */
  recordingId?: string;
}

/** Where audit events go: a pino logger (Fastify's request logger). */
export interface AuditSink {
  info(obj: object, msg: string): void;
}

/** Write one audit event. */
export function writeAuditEvent(sink: AuditSink, event: AuditEvent): void {
  sink.info(event, AUDIT_MESSAGE);
}
