/**
 * How a caller's request body is framed on its way upstream. The proxy's upstream connections are
 * kept alive and carry the proxy's own credentials, so a body that goes up unframed (Node writes the
 * body of a GET, DELETE or OPTIONS raw when the request has neither `Content-Length` nor
 * `Transfer-Encoding`) is read by the upstream as the next request: a smuggled request on the
 * proxy's identity. The rule, after Go's ReverseProxy and stricter where Node is lax:
 *
 * - the body is framed exactly as Node's parser read it: `Content-Length: N` (N as a plain decimal)
 *   or `Transfer-Encoding: chunked` (re-chunked by Node), decided here from the parsed request and
 *   set by the proxy, never from lines the client could have asked `Connection` to remove;
 * - a transfer coding other than `chunked` alone (`gzip, chunked`: Node removes only the chunking)
 *   is refused with 501, as Go's net/http server refuses it;
 * - a request without a body has none upstream: nothing is written after its head.
 *
 * Pure: parsed headers in, header lines out.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { errorStatus, type V1Status } from '../status.js';
import type { HeaderPair } from './forwarded-headers.js';

/** A request body's framing. */
export type RequestFraming =
  /** No body: nothing after the head. */
  | { kind: 'none' }
  /** Exactly `length` bytes. */
  | { kind: 'content-length'; length: number }
  /** A body of unknown length, sent chunked. */
  | { kind: 'chunked' };

/** The framing of a request Node's parser accepted, or the Status refusing it. */
export function requestFraming(headers: IncomingHttpHeaders): RequestFraming | { refuse: V1Status } {
  const te = headers['transfer-encoding'];
  if (te !== undefined) {
    // Node's parser refuses Transfer-Encoding together with Content-Length and any coding list whose
    // last entry is not chunked; what is left is chunked, possibly after other codings.
    if (te.trim().toLowerCase() !== 'chunked') {
      return { refuse: errorStatus(501, `unsupported transfer encoding: ${JSON.stringify(te)}`, 'NotImplemented') };
    }
    return { kind: 'chunked' };
  }
  const cl = headers['content-length'];
  if (cl !== undefined) {
    // Node accepts one Content-Length line of digits only (leading zeros included).
    if (!/^\d+$/.test(cl) || !Number.isSafeInteger(Number(cl))) return { refuse: errorStatus(400, `invalid Content-Length ${JSON.stringify(cl)}`, 'BadRequest') };
    const length = Number(cl);
    return length === 0 ? { kind: 'none' } : { kind: 'content-length', length };
  }
  return { kind: 'none' };
}

/** Methods whose requests carry a body by definition: an empty one goes up as `Content-Length: 0`, as Go sends it. */
const BODY_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH']);

/**
 * The framing lines the proxy sets on the upstream request (after every caller line named
 * `Content-Length` or `Transfer-Encoding` has been removed).
 */
export function framingHeaders(framing: RequestFraming, method: string): HeaderPair[] {
  switch (framing.kind) {
    case 'content-length':
      return [['Content-Length', String(framing.length)]];
    case 'chunked':
      return [['Transfer-Encoding', 'chunked']];
    case 'none':
      return BODY_METHODS.has(method.toUpperCase()) ? [['Content-Length', '0']] : [];
  }
}
