/**
 * A strict, incremental HTTP/1.1 request parser for the smuggling tests: it reads requests off one
 * connection's bytes the way Go's net/http server does (request line, header lines, then a body framed
 * by `Transfer-Encoding: chunked` or `Content-Length`, none otherwise), so a test upstream built on it
 * sees pipelined requests exactly as kube-apiserver or the kubelet would. Anything ambiguous (both
 * framings, a bad length, a bad chunk) is an anomaly: the connection is unusable from there on.
 * Pure: bytes in, requests out.
 *
 * Head lines are read as Go's `textproto.Reader` reads them: a line ends at LF, a CR before it is
 * dropped, so a bare LF inside a value starts a new header line; a value is trimmed of spaces and
 * tabs and must pass `httpguts.ValidHeaderFieldValue` (no byte below 0x20 but HTAB, no DEL), else the
 * request is refused (an anomaly), as Go answers 400. Values are byte strings (latin1), as Go's
 * strings hold bytes: decode identity values with `Buffer.from(v, 'latin1').toString('utf8')`.
 */

/** One request as read off the wire. */
export interface ParsedRequest {
  method: string;
  /** The request-target as sent. */
  target: string;
  /** Header lines in order, names as sent. */
  headers: Array<[string, string]>;
  body: Buffer;
  framing: 'none' | 'content-length' | 'chunked';
  /** `Connection: upgrade` + `Upgrade` present: the bytes after this request may belong to another protocol. */
  upgrade: boolean;
}

/** The value of the first header `name` (case-insensitive), or undefined. */
export function headerOf(r: Pick<ParsedRequest, 'headers'>, name: string): string | undefined {
  const lower = name.toLowerCase();
  return r.headers.find(([n]) => n.toLowerCase() === lower)?.[1];
}

/** Every value of header `name`. */
export function headersOf(r: Pick<ParsedRequest, 'headers'>, name: string): string[] {
  const lower = name.toLowerCase();
  return r.headers.filter(([n]) => n.toLowerCase() === lower).map(([, v]) => v);
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Options of {@link Http1RequestParser}. */
export interface Http1RequestParserOptions {
  /**
   * Frame a body whose transfer codings end in `chunked` (`gzip, chunked`, two lines) as chunked, as
   * Node's parser does; by default only `chunked` alone is accepted, as Go's server does.
   */
  codingsEndingInChunked?: boolean;
}

/** Reads requests from a byte stream. After an anomaly it yields nothing more. */
export class Http1RequestParser {
  #buf: Buffer = Buffer.alloc(0);
  #anomaly: string | undefined;
  readonly #o: Http1RequestParserOptions;

  constructor(o: Http1RequestParserOptions = {}) {
    this.#o = o;
  }

  /** Why parsing stopped, if it did. */
  get anomaly(): string | undefined {
    return this.#anomaly;
  }

  /** Bytes received and not yet part of a complete request. */
  get pending(): Buffer {
    return this.#buf;
  }

  /** Take the bytes not yet parsed (after an upgrade: they belong to the new protocol). */
  takePending(): Buffer {
    const b = this.#buf;
    this.#buf = Buffer.alloc(0);
    return b;
  }

  /** Add bytes. */
  push(chunk: Buffer): void {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
  }

  /** The next complete request, or undefined (incomplete, or an anomaly: see {@link anomaly}). */
  next(): ParsedRequest | undefined {
    if (this.#anomaly !== undefined) return undefined;
    const buf = this.#buf;
    // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before a request line (Node's
    // parser skips any CR and LF there).
    let start = 0;
    while (start < buf.length && (buf[start] === 0x0d || buf[start] === 0x0a)) start++;
    // The head ends at the first empty line: LF, optionally CR, LF (textproto.ReadMIMEHeader).
    let end = -1;
    let headEnd = -1;
    for (let lf = buf.indexOf(0x0a, start); lf >= 0; lf = buf.indexOf(0x0a, lf + 1)) {
      if (buf[lf + 1] === 0x0a) {
        end = lf;
        headEnd = lf + 2;
        break;
      }
      if (buf[lf + 1] === 0x0d && buf[lf + 2] === 0x0a) {
        end = lf;
        headEnd = lf + 3;
        break;
      }
    }
    if (end < 0) {
      if (buf.length - start > 1 << 20) this.#fail('request head over 1 MiB');
      return undefined;
    }
    const lines = buf.toString('latin1', start, end).split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
    const m = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/1\.[01]$/.exec(lines[0] ?? '');
    if (!m) return this.#fail(`bad request line ${JSON.stringify(lines[0])}`);
    const headers: Array<[string, string]> = [];
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0 || !TOKEN.test(line.slice(0, colon))) return this.#fail(`bad header line ${JSON.stringify(line)}`);
      const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
      // eslint-disable-next-line no-control-regex
      if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) return this.#fail(`invalid header field value for ${JSON.stringify(line.slice(0, colon))}`);
      headers.push([line.slice(0, colon), value]);
    }
    const head = { headers };
    const te = headersOf(head, 'transfer-encoding');
    const cl = headersOf(head, 'content-length');
    let framing: ParsedRequest['framing'] = 'none';
    const bodyStart = headEnd;
    let body: Buffer;
    let consumed: number;
    if (te.length > 0 && cl.length > 0) return this.#fail('both Transfer-Encoding and Content-Length');
    if (te.length > 0) {
      const codings = te.join(',').split(',').map((c) => c.trim().toLowerCase());
      const chunkedOnly = te.length === 1 && codings.length === 1 && codings[0] === 'chunked';
      if (!chunkedOnly && !(this.#o.codingsEndingInChunked && codings[codings.length - 1] === 'chunked')) return this.#fail(`unsupported Transfer-Encoding ${JSON.stringify(te)}`);
      framing = 'chunked';
      const chunked = this.#chunked(buf, bodyStart);
      if (chunked === 'anomaly') return undefined;
      if (chunked === undefined) return undefined;
      ({ body, consumed } = chunked);
    } else if (cl.length > 0) {
      if (!cl.every((v) => v === cl[0]) || !/^\d{1,15}$/.test(cl[0]!)) return this.#fail(`bad Content-Length ${JSON.stringify(cl)}`);
      framing = 'content-length';
      const n = Number(cl[0]);
      if (buf.length < bodyStart + n) return undefined;
      body = buf.subarray(bodyStart, bodyStart + n);
      consumed = bodyStart + n;
    } else {
      body = Buffer.alloc(0);
      consumed = bodyStart;
    }
    this.#buf = buf.subarray(consumed);
    const connection = headersOf(head, 'connection').join(',').toLowerCase().split(',').map((t) => t.trim());
    const upgrade = connection.includes('upgrade') && headerOf(head, 'upgrade') !== undefined;
    return { method: m[1]!, target: m[2]!, headers, body: Buffer.from(body), framing, upgrade };
  }

  /** A chunked body from `at`: the decoded bytes and where it ends, undefined when incomplete. */
  #chunked(buf: Buffer, at: number): { body: Buffer; consumed: number } | undefined | 'anomaly' {
    const parts: Buffer[] = [];
    let pos = at;
    for (;;) {
      const eol = buf.indexOf('\r\n', pos);
      if (eol < 0) return undefined;
      const sizeLine = buf.toString('latin1', pos, eol);
      const sm = /^([0-9a-fA-F]{1,8})(;[^\r\n]*)?$/.exec(sizeLine);
      if (!sm) {
        this.#fail(`bad chunk size line ${JSON.stringify(sizeLine)}`);
        return 'anomaly';
      }
      const size = parseInt(sm[1]!, 16);
      pos = eol + 2;
      if (size === 0) {
        // Trailer section: header lines until an empty line.
        for (;;) {
          const tEol = buf.indexOf('\r\n', pos);
          if (tEol < 0) return undefined;
          const line = buf.toString('latin1', pos, tEol);
          pos = tEol + 2;
          if (line === '') return { body: Buffer.concat(parts), consumed: pos };
          if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+:/.test(line)) {
            this.#fail(`bad trailer line ${JSON.stringify(line)}`);
            return 'anomaly';
          }
        }
      }
      if (buf.length < pos + size + 2) return undefined;
      parts.push(buf.subarray(pos, pos + size));
      if (buf[pos + size] !== 0x0d || buf[pos + size + 1] !== 0x0a) {
        this.#fail('chunk data not followed by CRLF');
        return 'anomaly';
      }
      pos += size + 2;
    }
  }

  #fail(why: string): undefined {
    this.#anomaly = why;
    return undefined;
  }
}
