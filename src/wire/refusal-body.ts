/**
 * The body of an upstream's refusal of an upgrade (an answer before any 101), read whole before the
 * answer is relayed or dropped, so that the one place that decides a fallback
 * (handlers/stream-path.ts) can tell a Kubernetes verdict on the caller or the request (a `Status`
 * with reason `Forbidden` or `NotFound`, as kube-apiserver's authorizer and registry write them) from
 * a refusal of the protocol (OpenShift's empty 403 from the kubelet's WebSocket handshake, a gateway's
 * text). Bounded: only a `Content-Length` body of at most {@link MAX_REFUSAL_BODY_BYTES}, within
 * {@link REFUSAL_BODY_DEADLINE_MS}; anything else is left unread and reported as no Status.
 */
import type { Duplex } from 'node:stream';
import { isStatus, type V1Status } from '../status.js';
import type { CompleteResponseHead } from './response-head.js';

/** The largest refusal body read before deciding; kube-apiserver's Status bodies are a few hundred bytes. */
export const MAX_REFUSAL_BODY_BYTES = 64 * 1024;

/** How long the rest of a refusal body may take once the head is in. */
export const REFUSAL_BODY_DEADLINE_MS = 2_000;

/** An upstream's refusal before its 101, as the fallback decision reads it. */
export interface UpstreamRefusal {
  statusCode: number;
  /** The body when it is a Kubernetes `Status` (JSON, `kind: Status`); else undefined. */
  status?: V1Status;
}

/** What {@link readRefusalBody} leaves: the response with every body byte it read in `rest`. */
export interface ReadRefusal {
  response: CompleteResponseHead;
  refusal: UpstreamRefusal;
}

/** The body length a refusal declares when it can be read whole here; else undefined. */
function readableLength(response: CompleteResponseHead): number | undefined {
  const { headers } = response.head;
  if (headers.tokens('transfer-encoding').length > 0) return undefined;
  const length = headers.get('content-length');
  if (length === undefined || !/^\d{1,6}$/.test(length)) return undefined;
  const n = Number(length);
  return n <= MAX_REFUSAL_BODY_BYTES ? n : undefined;
}

/** Decode `body` as a Kubernetes Status, or undefined. */
export function statusOfBody(contentType: string | undefined, body: Buffer): V1Status | undefined {
  if (!contentType || !/^application\/json\b/i.test(contentType.trim())) return undefined;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return isStatus(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Read the rest of a refusal's body from `upstream` (paused, as the exchange leaves it) when it is
 * small and framed by Content-Length, and decode it. The socket is paused again afterwards; `rest` of
 * the returned response holds every body byte read, so a relay of it writes nothing twice.
 */
export async function readRefusalBody(upstream: Duplex, response: CompleteResponseHead, deadlineMs = REFUSAL_BODY_DEADLINE_MS): Promise<ReadRefusal> {
  const statusCode = response.head.statusCode;
  const length = readableLength(response);
  if (length === undefined) return { response, refusal: { statusCode } };
  const chunks: Buffer[] = [response.rest];
  let have = response.rest.length;
  if (have < length && !upstream.destroyed) {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        upstream.off('data', onData);
        upstream.off('end', done);
        upstream.off('close', done);
        upstream.off('error', done);
        upstream.pause();
        resolve();
      };
      const onData = (chunk: Buffer): void => {
        const part = chunk.length > length - have ? chunk.subarray(0, length - have) : chunk;
        chunks.push(part);
        have += part.length;
        if (have < length) return;
        done();
        // What came after the body is not the refusal's: it stays in the socket.
        if (part.length < chunk.length) upstream.unshift(chunk.subarray(part.length));
      };
      const timer = setTimeout(done, deadlineMs);
      timer.unref();
      upstream.on('data', onData);
      upstream.once('end', done);
      upstream.once('close', done);
      upstream.once('error', done);
      upstream.resume();
    });
  }
  const rest = chunks.length === 1 ? response.rest : Buffer.concat(chunks);
  const whole = rest.length >= length;
  const status = whole ? statusOfBody(response.head.headers.get('content-type'), rest.subarray(0, length)) : undefined;
  return { response: { ...response, rest }, refusal: { statusCode, ...(status ? { status } : {}) } };
}
