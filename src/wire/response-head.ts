/**
 * An incremental, socket-free parser for an HTTP/1.x response head (status line + headers), used to
 * read the upstream's answer to an upgrade request. It keeps every byte it is given: after the head
 * is complete, the caller gets the head's exact bytes and the surplus that arrived with it (for a 101,
 * the first frames of the upgraded protocol), so nothing is lost or re-serialised. `readResponseHead`
 * feeds it from a socket.
 */
import type { Duplex } from 'node:stream';
import { MalformedResponseHeadError, ResponseHeadTooLargeError, UpstreamClosedError } from '../errors.js';

/**
 * Cap on the response head. Go's `http.DefaultMaxHeaderBytes` is 1 MiB, but an upgrade answer is a
 * status line and a handful of headers; 64 KiB is generous (Node's own default is 16 KiB) and bounds
 * what a broken upstream can make us hold per connection.
 */
export const MAX_RESPONSE_HEAD_BYTES = 64 * 1024;

const LF = 0x0a;
const CR = 0x0d;

/** Response header lines in arrival order; lookups ignore the case of the name. */
export class HeaderList {
  /** `[name, value]` exactly as received (values with surrounding whitespace trimmed, folds joined). */
  readonly pairs: ReadonlyArray<readonly [string, string]>;

  constructor(pairs: ReadonlyArray<readonly [string, string]>) {
    this.pairs = pairs;
  }

  /** Every value of `name`, one per header line. */
  values(name: string): string[] {
    const lower = name.toLowerCase();
    return this.pairs.filter(([n]) => n.toLowerCase() === lower).map(([, v]) => v);
  }

  /** The first value of `name`, or undefined. */
  get(name: string): string | undefined {
    return this.values(name)[0];
  }

  /** Every comma-separated element of every `name` line, trimmed and lower-cased, empties dropped. */
  tokens(name: string): string[] {
    return this.values(name)
      .flatMap((v) => v.split(','))
      .map((t) => t.trim().toLowerCase())
      .filter((t) => t !== '');
  }
}

/** A parsed response head. */
export interface ResponseHead {
  /** `HTTP/1.1` or `HTTP/1.0`. */
  httpVersion: string;
  statusCode: number;
  /** Reason phrase, possibly empty. */
  statusMessage: string;
  headers: HeaderList;
}

/** The result once the head is complete. */
export interface CompleteResponseHead {
  head: ResponseHead;
  /** The head's exact bytes, up to and including the blank line. */
  headBytes: Buffer;
  /** Bytes received after the head (the start of the body or of the upgraded protocol). */
  rest: Buffer;
}

const STATUS_LINE = /^(HTTP\/\d\.\d) +(\d{3})(?:[ \t]+(.*))?$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Feed bytes with `push()`; it returns undefined until the head is complete, then the head and the
 * surplus. Throws ResponseHeadTooLargeError past the cap and MalformedResponseHeadError on bad syntax.
 * Accepts CRLF and bare LF line ends and obsolete line folding, as Go's `net/textproto` does.
 */
export class ResponseHeadParser {
  readonly #maxBytes: number;
  #buf: Buffer = Buffer.alloc(0);
  /** Where the next line starts. */
  #lineStart = 0;
  #lines: string[] = [];
  #done = false;

  constructor(maxBytes: number = MAX_RESPONSE_HEAD_BYTES) {
    this.#maxBytes = maxBytes;
  }

  /** Bytes received so far. */
  get bytesRead(): number {
    return this.#buf.length;
  }

  /** Add bytes; returns the complete head once the blank line has arrived. */
  push(chunk: Buffer): CompleteResponseHead | undefined {
    if (this.#done) throw new Error('ResponseHeadParser: push() after the head was complete');
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    for (;;) {
      const lf = this.#buf.indexOf(LF, this.#lineStart);
      if (lf < 0) break;
      const end = lf > this.#lineStart && this.#buf[lf - 1] === CR ? lf - 1 : lf;
      const line = this.#buf.toString('latin1', this.#lineStart, end);
      this.#lineStart = lf + 1;
      if (this.#lineStart > this.#maxBytes) throw new ResponseHeadTooLargeError(this.#maxBytes);
      if (line === '' && this.#lines.length > 0) {
        this.#done = true;
        return {
          head: parseLines(this.#lines),
          headBytes: this.#buf.subarray(0, this.#lineStart),
          rest: this.#buf.subarray(this.#lineStart),
        };
      }
      if (line === '') throw new MalformedResponseHeadError('empty status line');
      this.#lines.push(line);
    }
    if (this.#buf.length >= this.#maxBytes) throw new ResponseHeadTooLargeError(this.#maxBytes);
    return undefined;
  }
}

function parseLines(lines: readonly string[]): ResponseHead {
  const status = STATUS_LINE.exec(lines[0]!);
  if (!status) throw new MalformedResponseHeadError(`bad status line ${JSON.stringify(lines[0]!.slice(0, 80))}`);
  const pairs: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    if (line[0] === ' ' || line[0] === '\t') {
      // obs-fold (RFC 7230 §3.2.4): a continuation of the previous value, joined with one space.
      const prev = pairs[pairs.length - 1];
      if (!prev) throw new MalformedResponseHeadError('continuation line before the first header');
      const more = line.trim();
      prev[1] = prev[1] === '' ? more : more === '' ? prev[1] : `${prev[1]} ${more}`;
      continue;
    }
    const colon = line.indexOf(':');
    const name = colon < 0 ? '' : line.slice(0, colon);
    if (!TOKEN.test(name)) throw new MalformedResponseHeadError(`bad header line ${JSON.stringify(line.slice(0, 80))}`);
    pairs.push([name, line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '')]);
  }
  return {
    httpVersion: status[1]!,
    statusCode: Number(status[2]),
    statusMessage: status[3] ?? '',
    headers: new HeaderList(pairs),
  };
}

/**
 * Read from `socket` until the response head is complete; the socket is left paused. Shared by the
 * upgrade exchange (`upstream-exchange.ts`), the port-forward tunnel and the agent.
 */
export function readResponseHead(socket: Duplex, signal: AbortSignal, maxBytes = MAX_RESPONSE_HEAD_BYTES): Promise<CompleteResponseHead> {
  return new Promise<CompleteResponseHead>((resolve, reject) => {
    const parser = new ResponseHeadParser(maxBytes);
    const cleanup = (): void => {
      socket.pause();
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      socket.off('error', onError);
      signal.removeEventListener('abort', onAbort);
    };
    const onData = (chunk: Buffer): void => {
      try {
        const done = parser.push(chunk);
        if (done) {
          cleanup();
          resolve(done);
        }
      } catch (e) {
        cleanup();
        reject(e);
      }
    };
    const onEnd = (): void => {
      cleanup();
      reject(new UpstreamClosedError(parser.bytesRead));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(new UpstreamClosedError(parser.bytesRead, err));
    };
    const onAbort = (): void => {
      cleanup();
      reject(signal.reason);
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
    socket.on('close', onEnd);
    socket.on('error', onError);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

