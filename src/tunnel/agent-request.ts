/**
 * The agent's codec for the one HTTP/1.1 request a tunnel stream carries, pure (no sockets): read the
 * request head under a byte cap ({@link parseRequestHead}), decide whether its path is inside the
 * Kubernetes API the agent fronts ({@link apiPathRefusal}), find where its body ends
 * ({@link bodyFraming}, {@link BodyFramer}) and write the head the agent sends its apiserver
 * ({@link rewriteRequestHead}): the apiserver's `Host`, `Connection: close` (or `Upgrade`), and in
 * `--access-as impersonate` the agent's own credentials instead of any `Authorization`.
 *
 * Bad input is answered with a Kubernetes Status, never a throw: every function here returns one.
 */
import { errorStatus, type V1Status } from '../status.js';
import type { HeaderPair } from '../wire/forwarded-headers.js';
import { requestHeadBytes } from '../wire/request-head.js';
import type { AuthHeaders } from '../routing/upstream.js';

/**
 * Cap on a request head: 64 KiB. kubectl's heads are a few hundred bytes (a bearer token and a
 * handful of `Impersonate-*` lines make them a few KiB); Node's own server default is 16 KiB and Go's
 * 1 MiB. The same cap as the proxy's on response heads (`src/wire/response-head.ts`).
 */
export const MAX_REQUEST_HEAD_BYTES = 64 * 1024;

/** `agent --access-as`: how the agent presents requests to its apiserver (GitLab's `access_as`). */
export type AccessAs = 'passthrough' | 'impersonate';

/** A parsed request head. */
export interface RequestHead {
  method: string;
  /** The request-target as sent (origin-form: path and query). */
  target: string;
  /** `HTTP/1.1` or `HTTP/1.0`. */
  httpVersion: string;
  /** `[name, value]` in arrival order, values trimmed. */
  headers: [string, string][];
}

/** The outcome of {@link parseRequestHead}. */
export type RequestHeadParse =
  | { kind: 'incomplete' }
  | { kind: 'complete'; head: RequestHead; /** Bytes of the head, blank line included. */ length: number }
  | { kind: 'invalid'; status: V1Status };

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (\S+) (HTTP\/1\.[01])$/;
/** Field values: visible ASCII, obs-text, space and tab (RFC 9110 §5.5); no NUL, CR, LF or other controls. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

function bad(message: string): { kind: 'invalid'; status: V1Status } {
  return { kind: 'invalid', status: errorStatus(400, `bad request from the proxy: ${message}`, 'BadRequest') };
}

/** The end of the head in `buf` (index after the blank line), or -1. Accepts CRLF and bare LF. */
function headEnd(buf: Buffer, limit: number): number {
  const n = Math.min(buf.length, limit);
  for (let i = buf.indexOf(0x0a); i >= 0 && i < n; i = buf.indexOf(0x0a, i + 1)) {
    if (buf[i + 1] === 0x0a) return i + 2;
    if (buf[i + 1] === 0x0d && buf[i + 2] === 0x0a) return i + 3;
  }
  return -1;
}

/**
 * Parse the request head at the start of `buf` (everything received so far). `incomplete` until the
 * blank line has arrived; `invalid` (a 400 Status) past `maxBytes` or on bad syntax: a request line
 * that is not `METHOD /origin-form HTTP/1.x`, a header line without a token name and a colon,
 * obsolete line folding, control bytes in a value.
 */
export function parseRequestHead(buf: Buffer, maxBytes = MAX_REQUEST_HEAD_BYTES): RequestHeadParse {
  const end = headEnd(buf, maxBytes);
  if (end < 0) {
    return buf.length >= maxBytes ? bad(`request head larger than ${maxBytes} bytes`) : { kind: 'incomplete' };
  }
  const lines = buf.toString('latin1', 0, end).split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  // The last two entries are the blank line and what follows its LF.
  lines.splice(-2, 2);
  const first = lines.shift() ?? '';
  const m = REQUEST_LINE.exec(first);
  if (!m) return bad(`malformed request line ${JSON.stringify(first.slice(0, 200))}`);
  const [, method, target, httpVersion] = m as unknown as [string, string, string, string];
  if (!target.startsWith('/')) return bad(`request-target ${JSON.stringify(target.slice(0, 200))} is not a path (origin-form)`);
  const headers: [string, string][] = [];
  for (const line of lines) {
    if (line.startsWith(' ') || line.startsWith('\t')) return bad('obsolete line folding in the request head');
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon) : '';
    if (!TOKEN.test(name)) return bad(`malformed header line ${JSON.stringify(line.slice(0, 200))}`);
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    if (!FIELD_VALUE.test(value)) return bad(`header ${JSON.stringify(name)}: invalid characters in the value`);
    headers.push([name, value]);
  }
  return { kind: 'complete', head: { method, target, httpVersion, headers }, length: end };
}

/** Every value of header `name` (case-insensitive). */
export function headerValues(head: RequestHead, name: string): string[] {
  const lower = name.toLowerCase();
  return head.headers.filter(([n]) => n.toLowerCase() === lower).map(([, v]) => v);
}

/** The comma-separated tokens of header `name`, trimmed and lower-case. */
function headerTokens(head: RequestHead, name: string): string[] {
  return headerValues(head, name)
    .flatMap((v) => v.split(','))
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '');
}

/** True for an upgrade request (`Connection: upgrade` and an `Upgrade` header; httpstream.IsUpgradeRequest). */
export function isUpgradeRequest(head: RequestHead): boolean {
  return headerTokens(head, 'connection').includes('upgrade') && headerValues(head, 'upgrade').some((v) => v.trim() !== '');
}

/** Where the request body ends. */
export type BodyFraming = { kind: 'none' } | { kind: 'length'; bytes: number } | { kind: 'chunked' };

/**
 * The body framing of `head` (RFC 9112 §6.3), or a 400 Status for the ambiguous cases a request
 * smuggler relies on: `Transfer-Encoding` other than exactly `chunked`, `Transfer-Encoding` together
 * with `Content-Length`, differing or malformed `Content-Length` values.
 */
export function bodyFraming(head: RequestHead): BodyFraming | { kind: 'invalid'; status: V1Status } {
  const te = headerTokens(head, 'transfer-encoding');
  const cl = headerValues(head, 'content-length').flatMap((v) => v.split(',')).map((v) => v.trim());
  if (te.length > 0) {
    if (te.length !== 1 || te[0] !== 'chunked') return bad(`unsupported Transfer-Encoding ${JSON.stringify(te.join(', '))}`);
    if (cl.length > 0) return bad('both Transfer-Encoding and Content-Length');
    return { kind: 'chunked' };
  }
  if (cl.length === 0) return { kind: 'none' };
  if (!cl.every((v) => /^\d{1,15}$/.test(v)) || new Set(cl).size !== 1) return bad(`invalid Content-Length ${JSON.stringify(cl.join(', '))}`);
  const bytes = Number(cl[0]);
  return bytes === 0 ? { kind: 'none' } : { kind: 'length', bytes };
}

/** Chunked-body scanner states. */
type ChunkState = 'size' | 'ext' | 'sizeLf' | 'data' | 'dataCr' | 'dataLf' | 'trailer' | 'trailerLf' | 'trailerLine' | 'trailerLineLf' | 'done';

/** Longest chunk-size line or trailer line tolerated (bytes). */
const MAX_CHUNK_LINE = 4096;

/**
 * Finds the end of one request body in the bytes that follow the head, so the agent forwards exactly
 * that body and nothing after it (a second request on the same stream is never served). `take()`
 * returns the part of a chunk that belongs to the body; once `done`, everything else is surplus.
 * A malformed chunked body sets `error` (the agent then resets the exchange).
 */
export class BodyFramer {
  #remaining: number;
  readonly #chunked: boolean;
  #state: ChunkState = 'size';
  #size = 0;
  #lineBytes = 0;
  #sizeDigits = 0;
  /** Set when a chunked body is malformed. */
  error: string | undefined;

  constructor(framing: BodyFraming) {
    this.#chunked = framing.kind === 'chunked';
    this.#remaining = framing.kind === 'length' ? framing.bytes : 0;
    if (framing.kind === 'none') this.#state = 'done';
  }

  /** True once the whole body has been taken. */
  get done(): boolean {
    return this.#chunked ? this.#state === 'done' : this.#remaining === 0;
  }

  /** The body part of `chunk` (a prefix of it); empty once done or after an error. */
  take(chunk: Buffer): Buffer {
    if (this.done || this.error !== undefined) return chunk.subarray(0, 0);
    if (!this.#chunked) {
      const n = Math.min(this.#remaining, chunk.length);
      this.#remaining -= n;
      return chunk.subarray(0, n);
    }
    let i = 0;
    while (i < chunk.length && this.#state !== 'done') {
      if (this.#state === 'data') {
        const n = Math.min(this.#size, chunk.length - i);
        this.#size -= n;
        i += n;
        if (this.#size === 0) this.#state = 'dataCr';
        continue;
      }
      const b = chunk[i++]!;
      if (!this.#step(b)) return chunk.subarray(0, 0);
    }
    return chunk.subarray(0, i);
  }

  #fail(why: string): false {
    this.error = `malformed chunked body: ${why}`;
    return false;
  }

  #line(): boolean {
    return ++this.#lineBytes <= MAX_CHUNK_LINE || this.#fail('line too long');
  }

  /** One byte outside chunk data. */
  #step(b: number): boolean {
    switch (this.#state) {
      case 'size': {
        const d = b >= 0x30 && b <= 0x39 ? b - 0x30 : b >= 0x61 && b <= 0x66 ? b - 0x57 : b >= 0x41 && b <= 0x46 ? b - 0x37 : -1;
        if (d >= 0) {
          if (++this.#sizeDigits > 12) return this.#fail('chunk size too large');
          this.#size = this.#size * 16 + d;
          return this.#line();
        }
        if (this.#sizeDigits === 0) return this.#fail('no chunk size');
        if (b === 0x3b || b === 0x20 || b === 0x09) {
          this.#state = 'ext';
          return this.#line();
        }
        if (b === 0x0d) {
          this.#state = 'sizeLf';
          return true;
        }
        if (b === 0x0a) return this.#endSizeLine();
        return this.#fail('bad chunk size');
      }
      case 'ext':
        if (b === 0x0d) this.#state = 'sizeLf';
        else if (b === 0x0a) return this.#endSizeLine();
        else if (b < 0x20 && b !== 0x09) return this.#fail('control byte in a chunk extension');
        return this.#line();
      case 'sizeLf':
        return b === 0x0a ? this.#endSizeLine() : this.#fail('CR without LF');
      case 'dataCr':
        if (b === 0x0d) this.#state = 'dataLf';
        else if (b === 0x0a) this.#nextChunk();
        else return this.#fail('chunk data longer than its size');
        return true;
      case 'dataLf':
        if (b !== 0x0a) return this.#fail('CR without LF');
        this.#nextChunk();
        return true;
      case 'trailer':
        // Start of a trailer line, or the final blank line.
        if (b === 0x0d) this.#state = 'trailerLf';
        else if (b === 0x0a) this.#state = 'done';
        else {
          this.#state = 'trailerLine';
          this.#lineBytes = 1;
        }
        return true;
      case 'trailerLf':
        if (b !== 0x0a) return this.#fail('CR without LF');
        this.#state = 'done';
        return true;
      case 'trailerLine':
        if (b === 0x0d) this.#state = 'trailerLineLf';
        else if (b === 0x0a) this.#state = 'trailer';
        return b === 0x0d || b === 0x0a || this.#line();
      case 'trailerLineLf':
        if (b !== 0x0a) return this.#fail('CR without LF');
        this.#state = 'trailer';
        return true;
      default:
        return true;
    }
  }

  #endSizeLine(): boolean {
    this.#lineBytes = 0;
    this.#sizeDigits = 0;
    this.#state = this.#size === 0 ? 'trailer' : 'data';
    return true;
  }

  #nextChunk(): void {
    this.#state = 'size';
    this.#size = 0;
    this.#lineBytes = 0;
  }
}

/**
 * The Kubernetes API paths the agent serves (each with its sub-paths): the resource APIs, discovery,
 * version, OpenAPI and the health endpoints. Everything else an apiserver serves (`/metrics`,
 * `/logs/`, `/debug/`, `/ui`, …) is refused at the agent.
 */
export const AGENT_API_PATHS: readonly string[] = ['/api', '/apis', '/version', '/openapi', '/healthz', '/livez', '/readyz'];

/**
 * Why the agent refuses the request-target `target`, as a Status, or undefined when it is inside the
 * Kubernetes API ({@link AGENT_API_PATHS}). Paths the apiserver could read differently from this
 * check are refused with 400: dot segments, empty segments, backslashes and percent-encoded `/`,
 * `\` or `.`. `/openapi` alone is not a document (only `/openapi/v2`, `/openapi/v3…`).
 */
export function apiPathRefusal(target: string, cluster: string): V1Status | undefined {
  const path = target.split('?')[0]!;
  if (/%(2f|5c|2e)/i.test(path) || path.includes('\\') || /\/\.{1,2}(\/|$)/.test(path) || path.slice(1).includes('//')) {
    return errorStatus(400, `the agent for cluster "${cluster}" refuses path ${JSON.stringify(path.slice(0, 200))}: not a normalised path`, 'BadRequest');
  }
  const allowed = AGENT_API_PATHS.some((p) => (p === '/openapi' ? path.startsWith('/openapi/') : path === p || path.startsWith(`${p}/`)));
  if (allowed) return undefined;
  return errorStatus(
    403,
    `forbidden: the agent for cluster "${cluster}" serves only the Kubernetes API (${AGENT_API_PATHS.join(', ')}), not path ${JSON.stringify(path.slice(0, 200))}`,
    'Forbidden',
  );
}

/** Hop-by-hop lines the agent replaces with its own `Connection`. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'host']);

/** Options of {@link rewriteRequestHead}. */
export interface RewriteOptions {
  /** The apiserver's `Host`. */
  host: string;
  /** The request-target toward the apiserver (its path prefix joined in front of the caller's). */
  target: string;
  accessAs: AccessAs;
  /** impersonate: the agent's own credentials (`Authorization`), set after every caller `Authorization` is removed. */
  credentials: AuthHeaders;
}

/**
 * The head the agent writes to its apiserver for `head`: the same request line (with the agent's
 * request-target), `Host` of the apiserver, the caller's lines minus `Connection`, `Keep-Alive` and
 * `Proxy-Connection`, then `Connection: Upgrade` for an upgrade or `Connection: close` for anything
 * else (so the apiserver serves this one request only). In impersonate mode every `Authorization`
 * line is dropped and the agent's credentials are added; the proxy's `Impersonate-*` lines pass.
 * In passthrough nothing is added or removed beyond the hop-by-hop lines.
 */
export function rewriteRequestHead(head: RequestHead, o: RewriteOptions): Buffer {
  const upgrade = isUpgradeRequest(head);
  const pairs: HeaderPair[] = [['Host', o.host]];
  for (const [name, value] of head.headers) {
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower)) continue;
    if (o.accessAs === 'impersonate' && lower === 'authorization') continue;
    pairs.push([name, value]);
  }
  if (o.accessAs === 'impersonate') {
    for (const [name, value] of Object.entries(o.credentials)) {
      for (const v of typeof value === 'string' ? [value] : value) pairs.push([name, v]);
    }
  }
  pairs.push(['Connection', upgrade ? 'Upgrade' : 'close']);
  // The one serializer of upstream heads: the caller's byte strings written back as the very bytes
  // they were read from, checked after encoding.
  return requestHeadBytes(head.method, o.target, pairs, head.httpVersion);
}
