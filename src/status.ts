/**
 * Kubernetes `metav1.Status` objects, built in one place.
 *
 * Streaming protocols carry a Status on the error channel (v4/v5, without kind/apiVersion) and plain
 * HTTP answers carry one as the JSON body (with kind/apiVersion). Key names follow the Go JSON tags:
 * `StatusCause.Type` is serialised as `reason`.
 */

/** One entry of `details.causes`. */
export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

/** The subset of metav1.Status that the streaming protocols use. */
export interface V1Status {
  kind?: 'Status';
  apiVersion?: 'v1';
  metadata: Record<string, never> | { [k: string]: unknown };
  status: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  details?: { name?: string; group?: string; kind?: string; causes?: StatusCause[] };
  code?: number;
}

/** `{"metadata":{},"status":"Success"}`: what the kubelet writes on the error stream when a command exits 0. */
export function successStatus(): V1Status {
  return { metadata: {}, status: 'Success' };
}

/**
 * The Status for a command that exited non-zero. kubectl reads the exit code from the `ExitCode`
 * cause (`ParseUint(msg, 10, 8)`) and exits with it.
 */
export function nonZeroExitStatus(exitCode: number): V1Status {
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: error executing command [exit ${exitCode}], exit code ${exitCode}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(exitCode) }] },
  };
}

/** `NewInternalError`: code 500, reason InternalError. */
export function internalErrorStatus(message: string): V1Status {
  return {
    metadata: {},
    status: 'Failure',
    message: `Internal error occurred: ${message}`,
    reason: 'InternalError',
    details: { causes: [{ message }] },
    code: 500,
  };
}

const REASON_BY_CODE: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'AlreadyExists',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** A Status for an HTTP error answer, with kind/apiVersion as the apiserver writes it. */
export function errorStatus(code: number, message: string, reason?: string, details?: V1Status['details']): V1Status {
  const s: V1Status = {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: reason ?? REASON_BY_CODE[code] ?? '',
    code,
  };
  if (details) s.details = details;
  return s;
}

/** `pods "NAME" not found`, as the apiserver answers a missing pod. */
export function notFoundStatus(resource: string, name: string): V1Status {
  return errorStatus(404, `${resource} "${name}" not found`, 'NotFound', { name, kind: resource });
}

/** Serialise a Status as one compact JSON document (what goes on a channel or in a body). */
export function encodeStatus(status: V1Status): Buffer {
  return Buffer.from(JSON.stringify(status));
}

/** True when the value looks like a metav1.Status (used when decoding upstream bodies). */
export function isStatus(v: unknown): v is V1Status {
  return typeof v === 'object' && v !== null && (v as { kind?: unknown }).kind === 'Status' &&
    typeof (v as { status?: unknown }).status === 'string';
}
