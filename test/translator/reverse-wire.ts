/**
 * Wire helpers for the reverse translator's unit tests, built on the real codecs: requests parsed by
 * Node's own HTTP parser, SPDY frames from src/spdy/ (encodeFrame, HeaderCompressor, FrameParser,
 * HeaderDecompressor), WebSocket frames read by `ws`'s Receiver and written by its Sender. The
 * proxy's two connections are in-memory socket pairs (`duplexPair`), so every test decides exactly how
 * the bytes are cut into reads.
 */
import { once } from 'node:events';
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { duplexPair, type Duplex } from 'node:stream';
import type { Route } from '../../src/routing/route.js';
import { encodeFrame, FrameParser, HeaderCompressor, type SpdyFrame } from '../../src/spdy/index.js';

/** `ws`'s Receiver and Sender (exported by `ws`, not typed by @types/ws). */
const wsModule = createRequire(import.meta.url)('ws') as {
  Receiver: new (o: object) => NodeJS.WritableStream & { on(e: string, f: (...a: any[]) => void): void; write(b: Buffer): boolean };
  Sender: { frame(data: Buffer, o: object): Buffer[] };
};

/**
 * An in-memory connection: `duplexPair()`, where (as on a socket) destroying one end closes the other
 * (Node 20's pair does not pass a destroy on).
 */
export function socketPair(): [Duplex, Duplex] {
  const [a, b] = duplexPair();
  a.once('close', () => b.destroy());
  b.once('close', () => a.destroy());
  return [a, b];
}

/** A request head parsed by Node's HTTP parser, as the proxy gets it in 'upgrade'. */
export async function parsedRequest(head: string): Promise<IncomingMessage> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const got = new Promise<IncomingMessage>((resolve) =>
    server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
      socket.destroy();
      resolve(req);
    }),
  );
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write(head);
  const req = await got;
  socket.destroy();
  server.close();
  return req;
}

/** The request head of a SPDY exec upgrade as kubectl ≤ 1.28 sends it (`protocols` one line each). */
export function spdyExecHead(query: string, protocols: readonly string[] = ['v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io'], extra = ''): string {
  return (
    `POST /api/v1/namespaces/default/pods/demo/exec?${query} HTTP/1.1\r\nHost: proxy.example\r\nUser-Agent: kubectl/v1.28.0\r\n` +
    `Authorization: Bearer caller-token\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n` +
    protocols.map((p) => `X-Stream-Protocol-Version: ${p}\r\n`).join('') +
    extra +
    '\r\n'
  );
}

/** One dial of a {@link MemoryRoute}: the upstream's end of the connection. */
export interface Dialled {
  /** Everything the proxy wrote, as it arrived. */
  received(): Buffer;
  /** The far end: write the upstream's bytes here. */
  socket: Duplex;
  /** Resolves once the request head has arrived: its text and the bytes after it so far. */
  head: Promise<{ head: string; rest: Buffer }>;
}

/** A route whose every dial is an in-memory connection the test plays the upstream on. */
export class MemoryRoute implements Route {
  readonly name = 'memory';
  readonly url = new URL('http://upstream.test/');
  readonly host = 'upstream.test';
  readonly dials: Dialled[] = [];
  readonly #waiting: Array<(d: Dialled) => void> = [];

  target(requestUrl: string): string {
    return requestUrl;
  }
  async callerAuthHeaders(): Promise<Record<string, string>> {
    return {};
  }
  async dial(): Promise<Duplex> {
    const [proxySide, upstreamSide] = socketPair();
    const chunks: Buffer[] = [];
    let resolveHead!: (h: { head: string; rest: Buffer }) => void;
    const head = new Promise<{ head: string; rest: Buffer }>((r) => (resolveHead = r));
    upstreamSide.on('data', (c: Buffer) => {
      chunks.push(c);
      const all = Buffer.concat(chunks);
      const end = all.indexOf('\r\n\r\n');
      if (end >= 0) resolveHead({ head: all.toString('latin1', 0, end + 4), rest: all.subarray(end + 4) });
    });
    upstreamSide.on('error', () => {});
    const d: Dialled = { received: () => Buffer.concat(chunks), socket: upstreamSide, head };
    this.dials.push(d);
    this.#waiting.shift()?.(d);
    return proxySide;
  }
  request(): never {
    throw new Error('no plain requests in these tests');
  }
  /** The next dial (waits for it). */
  next(): Promise<Dialled> {
    const d = this.dials[this.#taken++];
    return d ? Promise.resolve(d) : new Promise((resolve) => this.#waiting.push((x) => (this.#taken++, resolve(x))));
  }
  #taken = 0;
}

/** The value of header `name` in a raw head (first line). */
export function headValue(head: string, name: string): string | undefined {
  const re = new RegExp(`^${name}: *(.*)$`, 'im');
  return re.exec(head)?.[1]?.trim();
}

/** The 101 a WebSocket server answers `head` (a client's upgrade) with, choosing `protocol`. */
export function switching(head: string, protocol: string, accept?: string): Buffer {
  const key = headValue(head, 'sec-websocket-key') ?? '';
  const value = accept ?? createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  return Buffer.from(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${value}\r\nSec-WebSocket-Protocol: ${protocol}\r\n\r\n`, 'latin1');
}

/** One unmasked server frame (ws's Sender.frame). */
export function serverFrame(opcode: number, payload: Buffer): Buffer {
  return Buffer.concat(wsModule.Sender.frame(payload, { fin: true, opcode, mask: false, readOnly: true }));
}

/** A binary v5 message on `channel`. */
export function channelFrame(channel: number, payload: Buffer | string = Buffer.alloc(0)): Buffer {
  return serverFrame(2, Buffer.concat([Buffer.from([channel]), Buffer.from(payload)]));
}

/** A close frame with `code`. */
export function closeFrame(code: number): Buffer {
  const p = Buffer.alloc(2);
  p.writeUInt16BE(code);
  return serverFrame(8, p);
}

/** What a WebSocket server reads from the proxy (masked client frames), through ws's Receiver. */
export class ClientFrames {
  readonly messages: Buffer[] = [];
  readonly pings: number[] = [];
  closeCode: number | undefined;
  error: Error | undefined;
  readonly #receiver = new wsModule.Receiver({ isServer: true, binaryType: 'nodebuffer', allowSynchronousEvents: true, maxPayload: 0 });
  constructor() {
    this.#receiver.on('message', (data: Buffer, isBinary: boolean) => this.messages.push(isBinary ? data : Buffer.concat([Buffer.from('TEXT:'), data])));
    this.#receiver.on('conclude', (code: number) => (this.closeCode = code));
    this.#receiver.on('ping', () => this.pings.push(Date.now()));
    this.#receiver.on('error', (e: Error) => (this.error = e));
  }
  push(bytes: Buffer): void {
    if (bytes.length > 0) this.#receiver.write(bytes);
  }
}

/** The client's SPDY frames, encoded with one header compressor (as one connection's). */
export class SpdyClientFrames {
  readonly #compressor = new HeaderCompressor();
  syn(streamId: number, headers: Record<string, string>): Buffer {
    return Buffer.concat(encodeFrame({ type: 'syn_stream', streamId, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: this.#compressor.compress(headers) }));
  }
  data(streamId: number, data: Buffer | string, fin = false): Buffer {
    return Buffer.concat(encodeFrame({ type: 'data', streamId, fin, data: Buffer.from(data) }));
  }
}

/** What the proxy sent the client after its 101: DATA per stream, FINs, resets, GOAWAY, reply headers. */
export class SpdyServerFrames {
  readonly #parser = new FrameParser();
  readonly data = new Map<number, Buffer[]>();
  readonly fin = new Set<number>();
  readonly replies: number[] = [];
  readonly resets: number[] = [];
  goaway = false;
  readonly frames: SpdyFrame[] = [];
  push(bytes: Buffer): void {
    for (const f of this.#parser.push(bytes)) {
      this.frames.push(f);
      if (f.type === 'data') {
        if (f.data.length > 0) this.data.set(f.streamId, [...(this.data.get(f.streamId) ?? []), f.data]);
        if (f.fin) this.fin.add(f.streamId);
      } else if (f.type === 'syn_reply') this.replies.push(f.streamId);
      else if (f.type === 'rst_stream') this.resets.push(f.streamId);
      else if (f.type === 'goaway') this.goaway = true;
    }
  }
  /** Everything the proxy sent on `streamId`. */
  stream(streamId: number): Buffer {
    return Buffer.concat(this.data.get(streamId) ?? []);
  }
}

/** The response head at the start of `buf` (once complete): status code, head text, the bytes after it. */
export function responseOf(buf: Buffer): { status: number; head: string; rest: Buffer } | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = buf.toString('latin1', 0, end + 4);
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), head, rest: buf.subarray(end + 4) };
}

/** Resolves once `ready()` holds (polled), or rejects after `timeoutMs`. */
export async function until(what: string, ready: () => boolean, timeoutMs = 5_000): Promise<void> {
  const start = Date.now();
  while (!ready()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/**
 * Read what the proxy sends the upstream after the head as a WebSocket server does, and end the
 * connection once the proxy's close frame is in (as a server ends it after the closing handshake).
 */
export function playUpstream(up: Dialled, head: string): ClientFrames {
  const frames = new ClientFrames();
  let seen = Buffer.byteLength(head, 'latin1');
  const read = (): void => {
    const all = up.received();
    frames.push(all.subarray(seen));
    seen = all.length;
    if (frames.closeCode !== undefined && !up.socket.writableEnded) up.socket.end();
  };
  up.socket.on('data', read);
  read();
  return frames;
}
