/**
 * A minimal raw WebSocket client for the tunnel tests. ws's own client refuses `SPDY/3.1+…` as a
 * subprotocol ('/' is not a token character) and rejects a 101 that names one it did not offer, so
 * the tests speak RFC 6455 by hand: the handshake as kubectl sends it, masked client frames, and a
 * decoder for the server's unmasked frames.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { TUNNELING_PORT_FORWARD_PROTOCOL } from '../../translator/stream-tunnel-protocol.js';

/** WebSocket opcodes. */
export const Op = { CONT: 0x0, TEXT: 0x1, BINARY: 0x2, CLOSE: 0x8, PING: 0x9, PONG: 0xa } as const;

/** One masked client frame. */
export function clientFrame(opcode: number, payload: Buffer = Buffer.alloc(0), fin = true): Buffer {
  const len = payload.length;
  const header = len < 126 ? Buffer.alloc(2) : len < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  header[0] = (fin ? 0x80 : 0) | opcode;
  if (len < 126) header[1] = 0x80 | len;
  else if (len < 65536) {
    header[1] = 0x80 | 126;
    header.writeUInt16BE(len, 2);
  } else {
    header[1] = 0x80 | 127;
    header.writeBigUInt64BE(BigInt(len), 2);
  }
  const mask = randomBytes(4);
  const masked = Buffer.alloc(len);
  for (let i = 0; i < len; i++) masked[i] = payload[i]! ^ mask[i & 3]!;
  return Buffer.concat([header, mask, masked]);
}

/** A close frame with `code`. */
export function closeFrame(code: number): Buffer {
  const p = Buffer.alloc(2);
  p.writeUInt16BE(code);
  return clientFrame(Op.CLOSE, p);
}

/** A frame the server sent. */
export interface ServerFrame {
  opcode: number;
  fin: boolean;
  payload: Buffer;
}

/** The HTTP response head at the start of `buf` (latin1), its status code and the bytes after it, once complete. */
export function takeResponseHead(buf: Buffer): { head: string; status: number; rest: Buffer } | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = buf.toString('latin1', 0, end + 4);
  return { head, status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), rest: buf.subarray(end + 4) };
}

/**
 * The first complete server (unmasked) frame in `buf` and the bytes after it, or undefined while
 * the frame is incomplete.
 */
export function takeServerFrame(buf: Buffer): { frame: ServerFrame; rest: Buffer } | undefined {
  if (buf.length < 2) return undefined;
  let len = buf[1]! & 0x7f;
  let off = 2;
  if (len === 126) {
    if (buf.length < 4) return undefined;
    len = buf.readUInt16BE(2);
    off = 4;
  } else if (len === 127) {
    if (buf.length < 10) return undefined;
    len = Number(buf.readBigUInt64BE(2));
    off = 10;
  }
  if (buf.length < off + len) return undefined;
  const frame = { opcode: buf[0]! & 0x0f, fin: (buf[0]! & 0x80) !== 0, payload: buf.subarray(off, off + len) };
  return { frame, rest: buf.subarray(off + len) };
}

/** A connected raw client after the HTTP handshake. */
export class TunnelTestClient {
  readonly socket: Socket;
  /** The server's response head (latin1). */
  head = '';
  status = 0;
  /** Bytes after the head: for a 101, WebSocket frames; otherwise the body. */
  #buf: Buffer = Buffer.alloc(0);
  #headDone = false;
  readonly frames: ServerFrame[] = [];
  readonly #binary: Buffer[] = [];
  /** Bytes of binary (and continuation) payload received so far. */
  binaryLength = 0;
  closeCode: number | undefined;
  ended = false;
  readonly #waiters: Array<() => void> = [];

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (c: Buffer) => this.#onData(c));
    socket.on('close', () => {
      this.ended = true;
      this.#wake();
    });
    socket.on('error', () => {});
  }

  /** Connect and send a WebSocket upgrade for `path` offering `protocols` (on one line). */
  static async open(
    url: string,
    path = '/api/v1/namespaces/default/pods/demo/portforward',
    protocols: string | undefined = TUNNELING_PORT_FORWARD_PROTOCOL,
    extraHeaders = '',
  ): Promise<TunnelTestClient> {
    const u = new URL(url);
    const socket = connect({ host: u.hostname, port: Number(u.port) });
    await once(socket, 'connect');
    const client = new TunnelTestClient(socket);
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
        (protocols !== undefined ? `Sec-WebSocket-Protocol: ${protocols}\r\n` : '') +
        extraHeaders +
        '\r\n',
    );
    return client;
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }

  #onData(chunk: Buffer): void {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    if (!this.#headDone) {
      const r = takeResponseHead(this.#buf);
      if (!r) return;
      ({ head: this.head, status: this.status, rest: this.#buf } = r);
      this.#headDone = true;
    }
    if (this.status === 101) this.#parseFrames();
    this.#wake();
  }

  #parseFrames(): void {
    for (let next = takeServerFrame(this.#buf); next; next = takeServerFrame(this.#buf)) {
      const { frame } = next;
      this.#buf = next.rest;
      this.frames.push(frame);
      if (frame.opcode === Op.BINARY || frame.opcode === Op.CONT) {
        this.#binary.push(frame.payload);
        this.binaryLength += frame.payload.length;
      }
      if (frame.opcode === Op.CLOSE && this.closeCode === undefined) {
        this.closeCode = frame.payload.length >= 2 ? frame.payload.readUInt16BE(0) : 1005;
        // Answer the close as a client does, then drop the connection (the server may close first).
        this.socket.end(clientFrame(Op.CLOSE, frame.payload.subarray(0, 2)));
      }
    }
  }

  /** Concatenated payload of all binary (and continuation) frames. */
  get binary(): Buffer {
    if (this.#binary.length > 1) this.#binary.splice(0, this.#binary.length, Buffer.concat(this.#binary));
    return this.#binary[0] ?? Buffer.alloc(0);
  }

  /** The body after a non-101 head. */
  get body(): Buffer {
    return this.status === 101 ? Buffer.alloc(0) : this.#buf;
  }

  /** Wait until `predicate` holds (or fail once the connection is gone). */
  async until(predicate: () => boolean, what: string): Promise<void> {
    for (;;) {
      if (predicate()) return;
      if (this.ended) throw new Error(`connection ended before ${what}; head ${JSON.stringify(this.head)}`);
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** Wait for the socket to close. */
  async closed(): Promise<void> {
    while (!this.ended) await new Promise<void>((resolve) => this.#waiters.push(resolve));
  }

  send(frame: Buffer): void {
    this.socket.write(frame);
  }
}

/** Every value of header `name` in a raw head. */
export function headerValues(head: string, name: string): string[] {
  return head
    .split('\r\n')
    .slice(1)
    .filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`))
    .map((l) => l.slice(l.indexOf(':') + 1).trim());
}
