/**
 * The WebSocket tap of a passthrough exec/attach session (`channel.k8s.io`, `base64.channel.k8s.io`,
 * `v4.channel.k8s.io`, `v4.base64.channel.k8s.io`, and `v5.channel.k8s.io` when it is not
 * translated): the relay's bytes, both ways, read with `ws-frame-reader.ts` (never modified) and
 * demultiplexed by the channel byte (binary) or channel digit (base64: payload base64) into a
 * {@link RemoteCommandObserver}.
 *
 * Each direction is read the way the peer reading it does, so the recording holds what that peer
 * acted on:
 * - client frames as the kubelet's wsstream reads them (golang.org/x/net/websocket,
 *   `x-net-websocket-server` rules): every frame on its own, its first byte the channel, whatever its
 *   opcode (a reserved opcode or a continuation is data too) and its FIN;
 * - server frames as a client reads them (RFC 6455, `rfc6455-client` rules): a message across
 *   continuation frames, its first byte the channel. Framing a client would fail on makes the
 *   stream unreadable: the recording is told ({@link RemoteCommandObserver.unreadable}) and gets no
 *   more events (enforce ends the session with the Status; fail open marks it incomplete).
 *
 * - Channel 0 (client): stdin — unmasked into a copy only when stdin is recorded (`full`).
 * - Channels 1, 2 (server): stdout, stderr — binary pieces are handed on as slices, base64 is decoded.
 * - Channel 3 (server): the error channel — v4/v5 a Status (`decodeErrorStream`), v1–v3 error text;
 *   v1–v3 say nothing on success, so a server close frame without error text is exit 0.
 * - Channel 4 (client): resize JSON. v5's CLOSE (`[255, ch]`) is ignored.
 * - base64: the channel is the first byte minus `'0'` (as wsstream reads it, whatever the opcode);
 *   the payload is decoded as it arrives, exactly as Node decodes the whole text at once
 *   ({@link Base64Pieces}). Where the kubelet's strict Go decoder refuses a frame, this decodes
 *   something: the recording may hold more stdin than the kubelet took, never less.
 *
 * {@link WebSocketTap.terminate}: the message in progress is relayed, then the Status on channel 3
 * and a close frame (1000), as the kubelet ends a failed command.
 */
import { encodeStatus, type V1Status } from '../status.js';
import { StreamProtocolV4Name, StreamProtocolV5Name } from '../stream-protocol.js';
import { TerminalSizeDecoder } from '../terminal-size.js';
import { decodeErrorStream } from '../wire/error-stream.js';
import type { RelayedBytes, RelayObserver, RemoteCommandObserver, TerminationPlan } from './observer.js';
import { unmaskedCopy, WsFrameReader } from './ws-frame-reader.js';

/** Most error-channel bytes kept. */
export const MAX_ERROR_BYTES = 64 * 1024;

/** Options of {@link WebSocketTap}. */
export interface WebSocketTapOptions {
  /** The negotiated subprotocol ('' for none: binary v1). */
  protocol: string;
  /** Unmask and record stdin (record `full`). */
  recordStdin: boolean;
}

/** Characters outside Node's base64 alphabet (it skips them; `-` and `_` are URL-safe 62 and 63). */
const NOT_BASE64 = /[^A-Za-z0-9+/_-]/g;
const EMPTY = Buffer.alloc(0);

/**
 * One message's (or frame's) base64 text, decoded piece by piece to exactly the bytes Node's
 * `Buffer.from(wholeText, 'base64')` gives: characters outside the alphabet are skipped, nothing
 * after the first `=` counts, a last group of 2 or 3 characters gives 1 or 2 bytes.
 */
export class Base64Pieces {
  #rest = '';
  #stopped = false;

  /** The bytes `text` completes; `last`: the message ends with it. */
  push(text: string, last: boolean): Buffer {
    if (this.#stopped) return EMPTY;
    const eq = text.indexOf('=');
    if (eq >= 0) {
      text = text.slice(0, eq);
      this.#stopped = true;
    }
    const all = this.#rest + text.replace(NOT_BASE64, '');
    const whole = last || this.#stopped ? all.length : all.length - (all.length % 4);
    this.#rest = all.slice(whole);
    return whole === 0 ? EMPTY : Buffer.from(all.slice(0, whole), 'base64');
  }
}

/** One direction's message state. */
interface MessageState {
  channel: number | undefined;
  /** base64: the message's decoder. */
  base64: Base64Pieces | undefined;
  /** The error channel's bytes of this message. */
  error: Buffer[];
}

/** An unmasked server frame (FIN, given opcode) carrying `payload`. */
function serverFrame(opcode: number, payload: Buffer): Buffer {
  const n = payload.length;
  const head = n < 126 ? Buffer.from([0x80 | opcode, n]) : n < 65536 ? Buffer.from([0x80 | opcode, 126, n >> 8, n & 0xff]) : Buffer.alloc(10);
  if (n >= 65536) {
    head[0] = 0x80 | opcode;
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  return Buffer.concat([head, payload]);
}

/** A passthrough WebSocket session's tap. */
export class WebSocketTap implements RelayObserver {
  readonly #target: RemoteCommandObserver;
  readonly #protocol: string;
  readonly #base64: boolean;
  readonly #statusProtocol: boolean;
  readonly #recordStdin: boolean;
  readonly #client: WsFrameReader;
  readonly #upstream: WsFrameReader;
  readonly #c: MessageState = { channel: undefined, base64: undefined, error: [] };
  readonly #u: MessageState = { channel: undefined, base64: undefined, error: [] };
  #sizes: TerminalSizeDecoder | undefined;
  #errorBytes = 0;
  #exited = false;
  #serverClosed = false;
  #failure: Error | undefined;
  #closed = false;

  constructor(target: RemoteCommandObserver, options: WebSocketTapOptions) {
    this.#target = target;
    this.#protocol = options.protocol;
    this.#base64 = options.protocol.includes('base64');
    this.#statusProtocol = options.protocol.startsWith('v4.') || options.protocol === StreamProtocolV5Name;
    this.#recordStdin = options.recordStdin;
    this.#client = new WsFrameReader(
      { data: (_op, piece, mask, offset, first, fin) => this.#piece(true, piece, mask, offset, first, fin), close: () => undefined },
      'x-net-websocket-server',
    );
    this.#upstream = new WsFrameReader(
      { data: (_op, piece, mask, offset, first, fin) => this.#piece(false, piece, mask, offset, first, fin), close: () => (this.#serverClosed = true) },
      'rfc6455-client',
    );
  }

  get fatal(): AbortSignal {
    return this.#target.fatal;
  }

  /** Why the tap stopped parsing, if it did. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  fromClient(chunk: Buffer): void {
    this.#push(this.#client, chunk);
  }

  fromUpstream(chunk: Buffer): void {
    this.#push(this.#upstream, chunk);
  }

  close(bytes?: RelayedBytes): void {
    if (this.#closed) return;
    this.#closed = true;
    if (!this.#exited && !this.#statusProtocol && this.#serverClosed && !this.#failure) {
      this.#exited = true;
      this.#target.exit({ exitCode: 0 });
    }
    this.#target.close(bytes);
  }

  terminate(status: V1Status): TerminationPlan {
    const json = encodeStatus(status);
    const payload = this.#statusProtocol ? json : Buffer.from(status.message ?? 'session recording unavailable');
    const message = this.#base64
      ? serverFrame(1, Buffer.from('3' + payload.toString('base64')))
      : serverFrame(2, Buffer.concat([Buffer.from([3]), payload]));
    const close = serverFrame(8, Buffer.from([0x03, 0xe8]));
    const reader = this.#upstream;
    return {
      bytes: Buffer.concat([message, close]),
      cut: (chunk) => {
        let at = 0;
        for (;;) {
          // Unreadable server bytes: no boundary will come; they are not passed on.
          if (this.#failure) return { forward: chunk.subarray(0, at), done: true };
          const n = reader.bytesToFrameEnd;
          if (n === 0 && !reader.midMessage) return { forward: chunk.subarray(0, at), done: true };
          if (at >= chunk.length) return { forward: chunk.subarray(0, at), done: false };
          const take = n === undefined ? 1 : n === 0 ? Math.min(chunk.length - at, 2) : Math.min(n, chunk.length - at);
          this.fromUpstream(chunk.subarray(at, at + take));
          if (this.#failure) return { forward: chunk.subarray(0, at), done: true };
          at += take;
        }
      },
    };
  }

  #push(reader: WsFrameReader, chunk: Buffer): void {
    if (this.#failure) return;
    try {
      reader.push(chunk);
    } catch (e) {
      // Only the server direction can fail (a client fails the connection there too).
      this.#failure = e as Error;
      this.#target.unreadable('websocket', this.#failure);
    }
  }

  #piece(fromClient: boolean, piece: Buffer, mask: Buffer | undefined, offset: number, first: boolean, fin: boolean): void {
    const st = fromClient ? this.#c : this.#u;
    if (first) {
      st.channel = undefined;
      st.base64 = undefined;
      st.error = [];
    }
    let data = piece;
    let dataOffset = offset;
    if (st.channel === undefined && data.length > 0) {
      const b0 = mask ? data[0]! ^ mask[offset & 3]! : data[0]!;
      st.channel = this.#base64 ? b0 - 0x30 : b0;
      data = data.subarray(1);
      dataOffset = offset + 1;
    }
    const ch = st.channel;
    if (ch !== undefined) this.#channelData(fromClient, st, ch, data, mask, dataOffset, fin);
    if (fin) st.channel = undefined;
  }

  #channelData(fromClient: boolean, st: MessageState, ch: number, data: Buffer, mask: Buffer | undefined, offset: number, fin: boolean): void {
    const wanted = fromClient ? ch === 4 || (ch === 0 && this.#recordStdin) : ch === 1 || ch === 2 || ch === 3;
    if (!wanted) return;
    let bytes: Buffer;
    if (this.#base64) bytes = (st.base64 ??= new Base64Pieces()).push(unmaskedCopy(data, mask, offset).toString('latin1'), fin);
    else bytes = mask ? unmaskedCopy(data, mask, offset) : data;
    if (fromClient) {
      if (ch === 0) {
        if (bytes.length > 0) this.#target.stdin(bytes);
      } else this.#resize(bytes);
      return;
    }
    if (ch === 3) {
      if (this.#errorBytes < MAX_ERROR_BYTES) st.error.push(Buffer.from(bytes.subarray(0, MAX_ERROR_BYTES - this.#errorBytes)));
      this.#errorBytes += bytes.length;
      if (fin) this.#errorMessage(Buffer.concat(st.error));
      return;
    }
    if (bytes.length > 0) this.#target.output(ch === 1 ? 'stdout' : 'stderr', bytes);
  }

  #errorMessage(content: Buffer): void {
    if (this.#exited || content.length === 0) return;
    this.#exited = true;
    const outcome = decodeErrorStream(this.#statusProtocol ? StreamProtocolV4Name : this.#protocol, content);
    if (outcome.kind === 'success') this.#target.exit({ exitCode: 0 });
    else if (outcome.kind === 'exit') this.#target.exit({ exitCode: outcome.exitCode });
    else this.#target.exit({ error: outcome.message });
  }

  #resize(bytes: Buffer): void {
    if (bytes.length === 0) return;
    try {
      for (const s of (this.#sizes ??= new TerminalSizeDecoder()).push(bytes)) this.#target.resize(s.width, s.height);
    } catch {
      this.#sizes = undefined;
    }
  }
}
