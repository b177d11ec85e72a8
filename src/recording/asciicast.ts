/**
 * The asciicast v2 writer: one recorded exec/attach session as newline-delimited JSON (a header
 * line, then `[time, code, data]` event lines), pure — events in, lines out through a callback.
 *
 * - Header: `version` 2, `width`/`height` from the first resize (a tty session's header is held
 *   back until then, at most {@link MAX_HELD_BYTES} of events; otherwise 80×24), `timestamp`,
 *   `title` `namespace/pod/container: command`, `command`, and the session's identity under ONE
 *   namespaced key, {@link CAST_HEADER_KEY}: every reader ignores unknown header keys (asciinema CLI
 *   2.2 loads a dict, the web player reads named fields), so the file stays valid asciicast v2.
 * - Events: `o` output, `i` input (record `full` only), `r` resize `COLSxROWS`, `m` markers (limit
 *   reached, recording gaps, the exit status at the end).
 * - Non-tty stderr is an `o` event wrapped in SGR red (`ESC[31m` … `ESC[39m`), so it is told apart on
 *   replay while staying plain asciicast; non-tty output gets LF → CRLF, as the local terminal's
 *   ONLCR would have done (a tty's output already carries CRLF).
 * - Each stream (stdout, stderr, stdin) has its own streaming UTF-8 decoder (`StringDecoder`; the
 *   WHATWG TextDecoder does the same about 7× slower on Node 20), so a UTF-8 sequence split across
 *   chunks is joined, never written as an invalid string; invalid bytes become U+FFFD. The data then
 *   goes through `JSON.stringify`: measured against a byte loop and native `replaceAll` chains, it is
 *   the cheapest JSON string encoder in JavaScript (docs/recording.md, "Cost"). Where the native
 *   encoder is built (`native-cast-escape.ts`), output and input events skip both: the bytes become
 *   the event line's bytes in one C pass (same escaping, same U+FFFD rule; a character split across
 *   chunks waits for its end), 5–10× cheaper on Node 20.
 * - `maxOutputBytes`: past that many recorded `o`/`i` bytes, one marker, and output is no longer
 *   recorded (resizes and the exit status still are).
 * - Times are seconds since the start with microsecond precision, never going backwards.
 */
import { StringDecoder } from 'node:string_decoder';
import { CastEscapeFlags, loadNativeCastEscape, type NativeCastEscape } from './native-cast-escape.js';

/** The header key holding the session's identity (asciicast v2 allows extra keys; players ignore them). */
export const CAST_HEADER_KEY = 'kube-stream-proxy';

/** Terminal size used when the session never sent one (the players' own default). */
export const DEFAULT_COLS = 80;
/** See {@link DEFAULT_COLS}. */
export const DEFAULT_ROWS = 24;

/** Bytes of event lines a tty session holds back while it waits for its first resize. */
export const MAX_HELD_BYTES = 64 * 1024;

/** SGR sequences around non-tty stderr. */
export const STDERR_START = '\u001b[31m';
/** See {@link STDERR_START}. */
export const STDERR_END = '\u001b[39m';

/** Who and what a recording is of: the custom header fields. */
export interface CastIdentity {
  sessionId: string;
  user?: string;
  groups?: readonly string[];
  /** Why `user` is absent: passthrough, and the upstream could not be asked who the caller is (`caller-identity.ts`). */
  userUnknown?: string;
  /** The agent cluster (`/clusters/NAME`); absent for the proxy's own upstream. */
  cluster?: string;
  namespace: string;
  pod: string;
  container?: string;
  subresource: 'exec' | 'attach';
  /** exec: argv; attach: empty. */
  command: readonly string[];
  tty: boolean;
  /** What is recorded: `output` (stdout, stderr) or `full` (stdin too). */
  record: 'output' | 'full';
  /** Who wrote the recording (the proxy replica), when known. */
  recordedBy?: string;
}

/** How the recorded command ended. */
export type CastExit = { exitCode: number } | { error: string };

/** Options of {@link AsciicastWriter}. */
export interface AsciicastWriterOptions {
  /** Wall-clock start in ms since the epoch (the header's `timestamp`). */
  startedAtMs: number;
  /** `o` + `i` bytes recorded before output stops being recorded; 0 = no limit. */
  maxOutputBytes?: number;
  /** The native encoder (default: loaded when built); null: always the JavaScript encoding. */
  nativeEscape?: NativeCastEscape | null;
}

/** What a writer's callback receives: complete lines, as text or as their UTF-8 bytes. */
export type CastLines = string | Buffer;

/** The `title` header: `namespace/pod/container: command` (container or command left out when absent). */
export function castTitle(id: Pick<CastIdentity, 'namespace' | 'pod' | 'container' | 'command' | 'subresource'>): string {
  const where = [id.namespace, id.pod, ...(id.container ? [id.container] : [])].join('/');
  const what = id.subresource === 'attach' ? 'attach' : id.command.join(' ');
  return what === '' ? where : `${where}: ${what}`;
}

/** The parsed header of a cast file (the fields this project writes and reads). */
export interface CastHeader {
  version: 2;
  width: number;
  height: number;
  timestamp?: number;
  title?: string;
  command?: string;
  [CAST_HEADER_KEY]?: CastIdentity;
}

type Stream = 'stdout' | 'stderr' | 'stdin';

/** One session's asciicast v2 writer. Call the event methods in time order; `end` once. */
export class AsciicastWriter {
  readonly #identity: CastIdentity;
  readonly #emit: (lines: CastLines) => void;
  readonly #native: NativeCastEscape | undefined;
  /** The native path: per stream, the start of a character whose end is in the next chunk. */
  readonly #carry = new Map<Stream, Buffer>();
  readonly #startedAtMs: number;
  readonly #maxBytes: number;
  readonly #decoders = new Map<Stream, StringDecoder>();
  #headerWritten = false;
  #held: CastLines[] = [];
  #heldBytes = 0;
  #lastTime = 0;
  #recordedBytes = 0;
  #limitReached = false;
  #ended = false;

  /**
   * @param identity the custom header fields.
   * @param emit receives complete lines, each ending in `\n` (possibly several joined).
   */
  constructor(identity: CastIdentity, emit: (lines: CastLines) => void, options: AsciicastWriterOptions) {
    this.#identity = identity;
    this.#emit = emit;
    this.#native = options.nativeEscape === null ? undefined : (options.nativeEscape ?? loadNativeCastEscape());
    this.#startedAtMs = options.startedAtMs;
    this.#maxBytes = options.maxOutputBytes ?? 0;
    if (!identity.tty) this.#writeHeader(DEFAULT_COLS, DEFAULT_ROWS);
  }

  /** `o`/`i` payload bytes recorded so far (raw bytes, before decoding). */
  get recordedBytes(): number {
    return this.#recordedBytes;
  }

  /** True once `maxOutputBytes` was reached. */
  get limitReached(): boolean {
    return this.#limitReached;
  }

  /** Output of the command. `t` is seconds since the start. */
  output(stream: 'stdout' | 'stderr', data: Buffer, t: number): void {
    if (this.#ended || data.length === 0 || !this.#admit(data.length, t)) return;
    if (this.#native) return this.#nativeEvent(this.#native, stream, data, t, 0);
    let text = this.#decode(stream, data);
    if (text === '') return;
    if (!this.#identity.tty) {
      text = text.replace(/\n/g, '\r\n');
      if (stream === 'stderr') text = STDERR_START + text + STDERR_END;
    }
    this.#event(t, 'o', text);
  }

  /** Input typed by the client (written only when recording `full`). */
  input(data: Buffer, t: number): void {
    if (this.#ended || this.#identity.record !== 'full' || data.length === 0 || !this.#admit(data.length, t)) return;
    if (this.#native) return this.#nativeEvent(this.#native, 'stdin', data, t, 0);
    const text = this.#decode('stdin', data);
    if (text !== '') this.#event(t, 'i', text);
  }

  /** A terminal size; the first one of a tty session becomes the header's size. */
  resize(cols: number, rows: number, t: number): void {
    if (this.#ended || !(cols > 0 && rows > 0)) return;
    if (!this.#headerWritten) return this.#writeHeader(cols, rows);
    this.#event(t, 'r', `${cols}x${rows}`);
  }

  /** A marker (`m`) with a label. */
  marker(label: string, t: number): void {
    if (this.#ended) return;
    this.#event(t, 'm', label);
  }

  /** The session ended: the decoders' last characters, then the exit status as the last marker. */
  end(exit: CastExit | undefined, t: number): void {
    if (this.#ended) return;
    for (const [stream, rest] of this.#carry) {
      if (!this.#limitReached) this.#nativeEvent(this.#native!, stream, rest, t, CastEscapeFlags.FINAL, true);
    }
    for (const [stream, d] of this.#decoders) {
      const rest = d.end();
      if (rest !== '' && !this.#limitReached) this.#event(t, stream === 'stdin' ? 'i' : 'o', rest);
    }
    this.#event(t, 'm', exitLabel(exit));
    this.#ended = true;
    if (!this.#headerWritten) this.#writeHeader(DEFAULT_COLS, DEFAULT_ROWS);
  }

  /** Count `n` payload bytes against the limit; false when they are not recorded. */
  #admit(n: number, t: number): boolean {
    if (this.#limitReached) return false;
    if (this.#maxBytes > 0 && this.#recordedBytes + n > this.#maxBytes) {
      this.#limitReached = true;
      this.#event(t, 'm', `recording limit reached: ${this.#maxBytes} bytes; output is no longer recorded`);
      return false;
    }
    this.#recordedBytes += n;
    return true;
  }

  #decode(stream: Stream, data: Buffer): string {
    let d = this.#decoders.get(stream);
    if (d === undefined) {
      d = new StringDecoder('utf8');
      this.#decoders.set(stream, d);
    }
    return d.write(data);
  }

  #event(t: number, code: string, data: string): void {
    const time = Math.max(t, this.#lastTime);
    this.#lastTime = time;
    this.#line(`[${time.toFixed(6)}, ${JSON.stringify(code)}, ${JSON.stringify(data)}]\n`);
  }

  /**
   * An `o`/`i` event through the native encoder: the bytes of `data` (after what the stream carried)
   * escaped into the line between its head and tail, LF as CR LF and stderr in SGR red for a non-tty
   * session, as the JavaScript path does. `fromCarry`: `data` is the carry itself (the end).
   */
  #nativeEvent(native: NativeCastEscape, stream: Stream, data: Buffer, t: number, flags: number, fromCarry = false): void {
    const carry = fromCarry ? undefined : this.#carry.get(stream);
    const input = carry ? Buffer.concat([carry, data]) : data;
    if (carry || fromCarry) this.#carry.delete(stream);
    const time = Math.max(t, this.#lastTime);
    this.#lastTime = time;
    const tty = this.#identity.tty;
    const red = stream === 'stderr' && !tty;
    const code = stream === 'stdin' ? 'i' : 'o';
    const [line, used] = native.escape(input, flags | (!tty && code === 'o' ? CastEscapeFlags.CRLF : 0), `[${time.toFixed(6)}, "${code}", "${red ? '\\u001b[31m' : ''}`, `${red ? '\\u001b[39m' : ''}"]\n`);
    // The relay's chunk is never kept: the few bytes of a split character are copied.
    if (used < input.length) this.#carry.set(stream, Buffer.from(input.subarray(used)));
    if (line) this.#line(line);
  }

  #line(line: CastLines): void {
    if (this.#headerWritten) return this.#emit(line);
    this.#held.push(line);
    this.#heldBytes += line.length;
    if (this.#heldBytes > MAX_HELD_BYTES) this.#writeHeader(DEFAULT_COLS, DEFAULT_ROWS);
  }

  #writeHeader(cols: number, rows: number): void {
    const id = this.#identity;
    const header: CastHeader = {
      version: 2,
      width: cols,
      height: rows,
      timestamp: Math.floor(this.#startedAtMs / 1000),
      title: castTitle(id),
      ...(id.subresource === 'exec' ? { command: id.command.join(' ') } : {}),
      [CAST_HEADER_KEY]: id,
    };
    this.#headerWritten = true;
    const held = this.#held;
    this.#held = [];
    this.#heldBytes = 0;
    const head = JSON.stringify(header) + '\n';
    if (held.every((l) => typeof l === 'string')) this.#emit(head + held.join(''));
    else this.#emit(Buffer.concat([Buffer.from(head), ...held.map((l) => (typeof l === 'string' ? Buffer.from(l) : l))]));
  }
}

/** The label of the last marker: `exit 0`, `exit 3`, or `error: <message>`. */
export function exitLabel(exit: CastExit | undefined): string {
  if (exit === undefined) return 'ended without an exit status';
  return 'exitCode' in exit ? `exit ${exit.exitCode}` : `error: ${exit.error}`;
}
