/**
 * The WebSocket tap of a passthrough exec/attach session (`channel.k8s.io`, `base64.channel.k8s.io`,
 * `v4.channel.k8s.io`, `v4.base64.channel.k8s.io`, and `v5.channel.k8s.io` when it is not
 * translated): the relay's bytes, both ways, read with `ws-frame-reader.ts` (client frames masked,
 * server frames not; never modified) and demultiplexed by the channel byte (binary) or channel digit
 * (base64 text frames, payload base64) into a {@link RemoteCommandObserver}.
 *
 * - Channel 0 (client): stdin — unmasked into a copy only when stdin is recorded (`full`).
 * - Channels 1, 2 (server): stdout, stderr — binary pieces are handed on as slices, base64 is decoded.
 * - Channel 3 (server): the error channel — v4/v5 a Status (`decodeErrorStream`), v1–v3 error text;
 *   v1–v3 say nothing on success, so a server close frame without error text is exit 0.
 * - Channel 4 (client): resize JSON. v5's CLOSE (`[255, ch]`) is ignored.
 *
 * {@link WebSocketTap.terminate}: the frame in progress is relayed, then the Status on channel 3 and
 * a close frame (1000), as the kubelet ends a failed command.
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

/** One direction's message state. */
interface MessageState {
  channel: number | undefined;
  /** base64: characters of an incomplete 4-character group. */
  rest: string;
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
  readonly #c: MessageState = { channel: undefined, rest: '', error: [] };
  readonly #u: MessageState = { channel: undefined, rest: '', error: [] };
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
    this.#client = new WsFrameReader({
      data: (op, piece, mask, offset, first, fin) => this.#piece(true, op, piece, mask, offset, first, fin),
      close: () => undefined,
    });
    this.#upstream = new WsFrameReader({
      data: (op, piece, mask, offset, first, fin) => this.#piece(false, op, piece, mask, offset, first, fin),
      close: () => (this.#serverClosed = true),
    });
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
          const n = reader.bytesToFrameEnd;
          if (n === 0 && !reader.midMessage) return { forward: chunk.subarray(0, at), done: true };
          if (at >= chunk.length || this.#failure) return { forward: chunk.subarray(0, at), done: this.#failure !== undefined };
          const take = n === undefined ? 1 : n === 0 ? Math.min(chunk.length - at, 2) : Math.min(n, chunk.length - at);
          this.fromUpstream(chunk.subarray(at, at + take));
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
      this.#failure = e as Error;
    }
  }

  #piece(fromClient: boolean, opcode: number, piece: Buffer, mask: Buffer | undefined, offset: number, first: boolean, fin: boolean): void {
    const st = fromClient ? this.#c : this.#u;
    if (first) {
      st.channel = undefined;
      st.rest = '';
      st.error = [];
    }
    let data = piece;
    let dataOffset = offset;
    if (st.channel === undefined && data.length > 0) {
      const b0 = mask ? data[0]! ^ mask[offset & 3]! : data[0]!;
      st.channel = this.#base64 && opcode === 1 ? b0 - 0x30 : b0;
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
    if (this.#base64) {
      const text = st.rest + unmaskedCopy(data, mask, offset).toString('latin1');
      const whole = fin ? text.length : text.length - (text.length % 4);
      st.rest = text.slice(whole);
      bytes = Buffer.from(text.slice(0, whole), 'base64');
    } else bytes = mask ? unmaskedCopy(data, mask, offset) : data;
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
