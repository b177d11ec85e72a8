/**
 * A record of every request that reached a dev-cluster listener (API or kubelet, plain or upgrade),
 * taken on arrival before any authentication, so tests can assert on exactly what a proxy sent:
 * headers that must (not) be there, the user the request ended up as, the client certificate.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';

/** One request as it arrived. */
export interface RecordedRequest {
  /** Which listener got it. */
  listener: 'api' | 'kubelet';
  method: string;
  /** The request target (path and query) as sent. */
  url: string;
  /** Header names lower-case, as Node's `IncomingMessage.headers` (repeated values joined). */
  headers: IncomingHttpHeaders;
  /** Names and values as sent, alternating (`IncomingMessage.rawHeaders`). */
  rawHeaders: string[];
  /** True for an `upgrade` request (exec, attach, port-forward). */
  upgrade: boolean;
  /**
   * The effective user once authenticated (after impersonation), set on this same object when
   * known; the client certificate's CN on the kubelet listener. Undefined without authentication
   * or when the request was refused before the user was known.
   */
  user?: string;
  /** The effective user's groups, with {@link user}. */
  groups?: string[];
  /** The verified client certificate's subject, RFC 2253 style (`CN=proxy,O=system:masters`). */
  clientCertSubject?: string;
}

/** Entries kept by default; the oldest are dropped beyond it (a long-running CLI cluster). */
export const DEFAULT_REQUEST_LOG_LIMIT = 10_000;

/**
 * An X.509 subject in RFC 2253 order (most specific first, comma-separated), from Node's
 * one-attribute-per-line `X509Certificate.subject` (which lists the RDNs in certificate order).
 */
export function subjectString(lines: string): string {
  return lines
    .split('\n')
    .filter((l) => l !== '')
    .reverse()
    .map((l) => {
      const eq = l.indexOf('=');
      const value = l.slice(eq + 1).replace(/([,+"\\<>;])/g, '\\$1');
      return `${l.slice(0, eq)}=${value}`;
    })
    .join(',');
}

/** The verified peer certificate's subject of a TLS request, if it has one. */
export function clientCertSubject(req: IncomingMessage): string | undefined {
  const socket = req.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function' || !socket.authorized) return undefined;
  const raw = socket.getPeerCertificate().raw;
  if (!raw || raw.length === 0) return undefined;
  return subjectString(new X509Certificate(raw).subject);
}

/** The log: a live array plus an optional listener called on arrival. */
export class RequestLog {
  /** Every recorded request, oldest first (bounded by the limit). */
  readonly entries: RecordedRequest[] = [];

  constructor(
    private readonly onRequest?: (r: RecordedRequest) => void,
    private readonly limit = DEFAULT_REQUEST_LOG_LIMIT,
  ) {}

  /** Record `req` as it arrived at `listener`; the returned entry is updated with the user later. */
  record(listener: RecordedRequest['listener'], req: IncomingMessage, upgrade: boolean): RecordedRequest {
    const entry: RecordedRequest = {
      listener,
      method: req.method ?? '',
      url: req.url ?? '',
      headers: { ...req.headers },
      rawHeaders: [...req.rawHeaders],
      upgrade,
    };
    const subject = clientCertSubject(req);
    if (subject !== undefined) entry.clientCertSubject = subject;
    this.entries.push(entry);
    if (this.entries.length > this.limit) this.entries.splice(0, this.entries.length - this.limit);
    this.onRequest?.(entry);
    return entry;
  }
}
