/**
 * The proxy's error catalogue: one class per failure, each with a literal `code` (so a `switch` on
 * `code` narrows), a default message, typed fields and the Kubernetes Status it is answered with.
 *
 * Status codes follow what kube-apiserver answers for the same failure (`ErrorToAPIStatus` turns a
 * plain Go error into 500 with an empty reason), except where the brief asks for a more precise code:
 * an unreachable upstream is 503 `error trying to reach service: …` (apimachinery `proxy/transport.go`)
 * on both the plain and the upgrade path, and a silent upstream is 504.
 */
import { errorStatus, type V1Status } from './status.js';

/** Every stable error code, one literal per class. */
export type ProxyErrorCode =
  | 'KSP_ERR_CONFIG'
  | 'KSP_ERR_UPSTREAM_UNREACHABLE'
  | 'KSP_ERR_UPSTREAM_TIMEOUT'
  | 'KSP_ERR_UPSTREAM_CLOSED'
  | 'KSP_ERR_RESPONSE_HEAD_TOO_LARGE'
  | 'KSP_ERR_MALFORMED_RESPONSE_HEAD'
  | 'KSP_ERR_INVALID_UPGRADE_RESPONSE'
  | 'KSP_ERR_UPGRADE_MISMATCH'
  | 'KSP_ERR_UPGRADE_REQUIRED'
  | 'KSP_ERR_INVALID_NAME'
  | 'KSP_ERR_INVALID_REQUEST_HEAD';

/** Base class: a stable `code` and the Status the client gets for it. */
export abstract class ProxyError extends Error {
  abstract readonly code: ProxyErrorCode;
  /** The Kubernetes Status written as the HTTP answer for this error. */
  abstract toStatus(): V1Status;
}

/** A Status like `ErrorToAPIStatus` builds for a plain Go error: 500 and no reason. */
function unknownErrorStatus(message: string): V1Status {
  const s = errorStatus(500, message, '');
  delete s.reason;
  return s;
}

/** Invalid command line or configuration; reported at start-up, never to a client. */
export class ConfigError extends ProxyError {
  override readonly name = 'ConfigError';
  readonly code = 'KSP_ERR_CONFIG' as const;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
  toStatus(): V1Status {
    return unknownErrorStatus(this.message);
  }
}

/** The upstream could not be dialled (refused, DNS, TLS handshake). 503 like apimachinery's transport. */
export class UpstreamUnreachableError extends ProxyError {
  override readonly name = 'UpstreamUnreachableError';
  readonly code = 'KSP_ERR_UPSTREAM_UNREACHABLE' as const;
  constructor(readonly target: string, cause: unknown) {
    super(`error trying to reach service: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
  toStatus(): V1Status {
    return errorStatus(503, this.message, 'ServiceUnavailable');
  }
}

/** No complete upgrade response head arrived within the configured timeout. 504. */
export class UpstreamTimeoutError extends ProxyError {
  override readonly name = 'UpstreamTimeoutError';
  readonly code = 'KSP_ERR_UPSTREAM_TIMEOUT' as const;
  constructor(readonly timeoutMs: number) {
    super(`timed out after ${timeoutMs}ms waiting for the upstream's upgrade response`);
  }
  toStatus(): V1Status {
    return errorStatus(504, this.message, 'Timeout');
  }
}

/** The upstream closed (or reset) the connection before its response head was complete. */
export class UpstreamClosedError extends ProxyError {
  override readonly name = 'UpstreamClosedError';
  readonly code = 'KSP_ERR_UPSTREAM_CLOSED' as const;
  constructor(readonly bytesRead: number, cause?: unknown) {
    super(`error reading upgrade response: upstream closed the connection after ${bytesRead} bytes, before the end of the response head`, { cause });
  }
  toStatus(): V1Status {
    return unknownErrorStatus(this.message);
  }
}

/** The upstream's response head exceeded the byte cap (see `src/wire/response-head.ts`). */
export class ResponseHeadTooLargeError extends ProxyError {
  override readonly name = 'ResponseHeadTooLargeError';
  readonly code = 'KSP_ERR_RESPONSE_HEAD_TOO_LARGE' as const;
  constructor(readonly limit: number) {
    super(`error reading upgrade response: response head exceeds ${limit} bytes`);
  }
  toStatus(): V1Status {
    return unknownErrorStatus(this.message);
  }
}

/** The upstream's response head is not HTTP/1.x (bad status line, header line without a colon). */
export class MalformedResponseHeadError extends ProxyError {
  override readonly name = 'MalformedResponseHeadError';
  readonly code = 'KSP_ERR_MALFORMED_RESPONSE_HEAD' as const;
  constructor(detail: string) {
    super(`error reading upgrade response: malformed HTTP response: ${detail}`);
  }
  toStatus(): V1Status {
    return unknownErrorStatus(this.message);
  }
}

/** A non-101 answer below 400 to an upgrade request (apiserver: `invalid upgrade response: status code N`). */
export class InvalidUpgradeResponseError extends ProxyError {
  override readonly name = 'InvalidUpgradeResponseError';
  readonly code = 'KSP_ERR_INVALID_UPGRADE_RESPONSE' as const;
  constructor(readonly statusCode: number) {
    super(`invalid upgrade response: status code ${statusCode}`);
  }
  toStatus(): V1Status {
    return unknownErrorStatus(this.message);
  }
}

/** A 101 whose Connection/Upgrade headers do not match the protocol that was asked for. 500. */
export class UpgradeMismatchError extends ProxyError {
  override readonly name = 'UpgradeMismatchError';
  readonly code = 'KSP_ERR_UPGRADE_MISMATCH' as const;
  constructor(readonly requested: string, readonly received: string) {
    super(`unable to upgrade: upstream switched to ${JSON.stringify(received)}, requested ${JSON.stringify(requested)}`);
  }
  toStatus(): V1Status {
    return errorStatus(500, `Internal error occurred: ${this.message}`, 'InternalError');
  }
}

/** exec/attach/portforward reached without an upgrade (apiserver's `UpgradeRequired` answer). */
export class UpgradeRequiredError extends ProxyError {
  override readonly name = 'UpgradeRequiredError';
  readonly code = 'KSP_ERR_UPGRADE_REQUIRED' as const;
  constructor() {
    super('Upgrade request required');
  }
  toStatus(): V1Status {
    return errorStatus(400, this.message, 'BadRequest');
  }
}

/** A namespace or pod name in the URL that is not a valid DNS label/subdomain. 400. */
export class InvalidNameError extends ProxyError {
  override readonly name = 'InvalidNameError';
  readonly code = 'KSP_ERR_INVALID_NAME' as const;
  constructor(readonly field: 'namespace' | 'name', readonly value: string, reason: string) {
    super(`invalid ${field} ${JSON.stringify(value)}: ${reason}`);
  }
  toStatus(): V1Status {
    return errorStatus(400, this.message, 'BadRequest', {
      causes: [{ reason: 'FieldValueInvalid', message: this.message, field: this.field }],
    });
  }
}

/** The Status for any thrown value: a ProxyError's own, else a 500 `Internal error occurred`. */
export function statusForError(e: unknown): V1Status {
  if (e instanceof ProxyError) return e.toStatus();
  const message = e instanceof Error ? e.message : String(e);
  return errorStatus(500, `Internal error occurred: ${message}`, 'InternalError');
}

/**
 * A request head the proxy would write upstream failed its check after encoding
 * (`src/wire/request-head.ts`): a value that is not a byte string, a control byte, a bad name or
 * target. Nothing was written. A caller's own lines were already checked by Node's parser and every
 * identity at authentication, so this is a defect: 500, as kube-apiserver answers an internal error.
 */
export class InvalidRequestHeadError extends ProxyError {
  override readonly name = 'InvalidRequestHeadError';
  readonly code = 'KSP_ERR_INVALID_REQUEST_HEAD' as const;
  constructor(reason: string) {
    super(`refusing to write an invalid request head upstream: ${reason}`);
  }
  toStatus(): V1Status {
    return errorStatus(500, this.message, 'InternalError');
  }
}

/**
 * The upstream answered a SPDY upgrade with something other than 101 (client-go's `UpgradeFailureError`
 * path): `status` is its body when that decodes as a metav1.Status, else an `unable to upgrade
 * connection: <body>` Status with the response's code. Not a ProxyError: it carries the upstream's
 * own answer, which the translator reports on channel 3 and counts under the upstream's code.
 */
export class UpstreamUpgradeRefusedError extends Error {
  override readonly name = 'UpstreamUpgradeRefusedError';
  readonly code = 'KSP_ERR_UPSTREAM_UPGRADE_REFUSED' as const;
  constructor(
    readonly statusCode: number,
    readonly status: V1Status,
    /** True when `status` is the upstream's body decoded as a metav1.Status (kube-apiserver's StatusError case). */
    readonly isUpstreamStatus: boolean,
  ) {
    super(status.message ?? `unable to upgrade connection: status code ${statusCode}`);
  }
  /** The Status to report: the upstream's own, or the `unable to upgrade connection` one. */
  toStatus(): V1Status {
    return this.status;
  }
}

/**
 * A WebSocket port-forward request reached the tunnel without offering any `SPDY/3.1+….k8s.io`
 * subprotocol (apiserver `streamtunnel.go`: 400 `unable to upgrade: no tunneling spdy protocols
 * provided`). Not a ProxyError, so the catalogue's code union stays untouched by parallel work.
 */
export class NoTunnelingProtocolError extends Error {
  override readonly name = 'NoTunnelingProtocolError';
  readonly code = 'KSP_ERR_NO_TUNNELING_PROTOCOL' as const;
  constructor() {
    super('unable to upgrade: no tunneling spdy protocols provided');
  }
  /** 400 BadRequest with the apiserver's message. */
  toStatus(): V1Status {
    return errorStatus(400, this.message, 'BadRequest');
  }
}

/**
 * The proxy is shutting down (SIGTERM) and the session outlived `--shutdown-grace-period`. Reported
 * as 503 ServiceUnavailable: on channel 3 of a translated session, or as the HTTP answer to a
 * streaming request that arrives while draining. Not a ProxyError, for the same reason as above.
 */
export class ShuttingDownError extends Error {
  override readonly name = 'ShuttingDownError';
  readonly code = 'KSP_ERR_SHUTTING_DOWN' as const;
  constructor() {
    super('proxy shutting down');
  }
  /** 503 ServiceUnavailable, `proxy shutting down`. */
  toStatus(): V1Status {
    return errorStatus(503, this.message, 'ServiceUnavailable');
  }
}
