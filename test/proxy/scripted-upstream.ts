/**
 * Test fixtures for the proxy: a raw `net` upstream whose every answer the test scripts byte by byte,
 * a raw client, and a proxy started in-process in front of an upstream URL. Loopback only.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import { startServer, type RunningServer, type ServerOptions } from '../../src/server.js';

/** One connection accepted by the scripted upstream, with its request head already read. */
export interface UpstreamConnection {
  socket: Socket;
  /** The request head as received (latin1), up to and including the blank line. */
  head: string;
  /** Bytes that arrived after the head in the same reads. */
  rest: Buffer;
}

/** A raw TCP upstream that queues each connection for the test to script. */
export interface ScriptedUpstream {
  url: string;
  port: number;
  /** The next accepted connection (waits for it). */
  next(): Promise<UpstreamConnection>;
  close(): Promise<void>;
}

/** Start a scripted upstream on 127.0.0.1. */
export async function startScriptedUpstream(): Promise<ScriptedUpstream> {
  const ready: UpstreamConnection[] = [];
  const waiting: Array<(c: UpstreamConnection) => void> = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.pause();
      const conn = { socket, head: buf.toString('latin1', 0, end + 4), rest: buf.subarray(end + 4) };
      const w = waiting.shift();
      if (w) w(conn);
      else ready.push(conn);
    };
    socket.on('data', onData);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    next: () => {
      const c = ready.shift();
      return c ? Promise.resolve(c) : new Promise((resolve) => waiting.push(resolve));
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Header lines of a raw head, as `[name, value]`. */
export function headLines(head: string): Array<[string, string]> {
  return head
    .split('\r\n')
    .slice(1)
    .filter((l) => l !== '')
    .map((l) => {
      const i = l.indexOf(':');
      return [l.slice(0, i), l.slice(i + 1).trim()] as [string, string];
    });
}

/** Every value of header `name` in a raw head (case-insensitive). */
export function headValues(head: string, name: string): string[] {
  return headLines(head)
    .filter(([n]) => n.toLowerCase() === name.toLowerCase())
    .map(([, v]) => v);
}

/** Options of {@link RawClient.connect}. */
export interface RawClientOptions {
  /** Default deadline of `until()` and `closed()`, ms; none when absent (the test's own timeout applies). */
  timeoutMs?: number;
  /** Set TCP_NODELAY on the connection. */
  noDelay?: boolean;
}

/** A raw client connection that collects everything it receives. */
export class RawClient {
  readonly socket: Socket;
  received = Buffer.alloc(0);
  /** True once the peer ended or the socket closed. */
  ended = false;
  /** True once the peer sent FIN (not a reset). */
  peerFin = false;
  readonly #waiters: Array<() => void> = [];
  readonly #timeoutMs: number | undefined;

  private constructor(socket: Socket, timeoutMs: number | undefined) {
    this.socket = socket;
    this.#timeoutMs = timeoutMs;
    socket.on('data', (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
      this.#wake();
    });
    socket.on('end', () => {
      this.peerFin = true;
      this.ended = true;
      this.#wake();
    });
    socket.on('close', () => {
      this.ended = true;
      this.#wake();
    });
    socket.on('error', () => {});
  }

  /** Connect to `url`'s host and port, or to a port on 127.0.0.1. */
  static async connect(target: string | number, o: RawClientOptions = {}): Promise<RawClient> {
    const u = typeof target === 'string' ? new URL(target) : undefined;
    const socket = connect({ host: u?.hostname ?? '127.0.0.1', port: u ? Number(u.port) : (target as number) });
    await once(socket, 'connect');
    if (o.noDelay) socket.setNoDelay(true);
    return new RawClient(socket, o.timeoutMs);
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }

  /** What arrived so far, for error messages. */
  #got(): string {
    return JSON.stringify(this.received.toString('latin1').slice(0, 300));
  }

  /** Resolve at the next arrival or end; reject at `deadline` (ms since epoch). */
  #next(deadline: number, what: string): Promise<void> {
    const left = deadline - Date.now();
    if (left <= 0) return Promise.reject(new Error(`timed out waiting for ${what}; got ${this.#got()}`));
    return new Promise<void>((resolve) => {
      const t = Number.isFinite(left) ? setTimeout(resolve, left) : undefined;
      this.#waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /** Write unless the socket is gone. */
  write(b: Buffer | string): void {
    if (!this.socket.destroyed) this.socket.write(b);
  }

  /** Wait until `predicate` holds for what has arrived (or fail when the connection ends first, or after `ms`). */
  async until(predicate: (received: Buffer) => boolean, what = 'expected bytes', ms = this.#timeoutMs): Promise<Buffer> {
    const deadline = ms === undefined ? Infinity : Date.now() + ms;
    for (;;) {
      if (predicate(this.received)) return this.received;
      if (this.ended) throw new Error(`connection ended before ${what}; got ${this.#got()}`);
      await this.#next(deadline, what);
    }
  }

  /** Wait for at least `n` bytes. */
  atLeast(n: number): Promise<Buffer> {
    return this.until((b) => b.length >= n, `${n} bytes`);
  }

  /** Wait for the connection to end (FIN or reset); resolves with everything received. */
  async end(ms = this.#timeoutMs): Promise<Buffer> {
    const deadline = ms === undefined ? Infinity : Date.now() + ms;
    while (!this.ended) {
      await this.#next(deadline, 'the connection to close').catch(() => {
        throw new Error(`connection still open after ${ms} ms; got ${this.#got()}`);
      });
    }
    return this.received;
  }

  /** Same as {@link end}. */
  closed(ms = this.#timeoutMs): Promise<Buffer> {
    return this.end(ms);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** Start the proxy on 127.0.0.1:0 in front of `upstream`, with extra flags. */
export async function startProxy(upstream: string, flags: ServeFlags = {}, options: ServerOptions = {}): Promise<RunningServer> {
  const config = await resolveConfig({ listen: '127.0.0.1:0', upstream, ...flags });
  return startServer(config, options);
}

/** A SPDY-style exec upgrade request head for `path`. */
export function spdyUpgradeRequest(path = '/api/v1/namespaces/default/pods/demo/exec?command=sh', extra = ''): string {
  return (
    `POST ${path} HTTP/1.1\r\n` +
    'Host: proxy.example\r\n' +
    'Connection: Upgrade\r\n' +
    'Upgrade: SPDY/3.1\r\n' +
    'X-Stream-Protocol-Version: v4.channel.k8s.io\r\n' +
    'X-Stream-Protocol-Version: v3.channel.k8s.io\r\n' +
    'Content-Length: 0\r\n' +
    extra +
    '\r\n'
  );
}

/** Parse the status code and body of a complete raw HTTP answer with Content-Length. */
export function parseAnswer(raw: Buffer): { status: number; head: string; body: Buffer } {
  const end = raw.indexOf('\r\n\r\n');
  const head = raw.toString('latin1', 0, end + 4);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  return { status, head, body: raw.subarray(end + 4) };
}

/** True once `raw` holds a head and its full Content-Length body. */
export function isCompleteAnswer(raw: Buffer): boolean {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return false;
  const len = /\r\ncontent-length: *(\d+)/i.exec(raw.toString('latin1', 0, end + 2));
  return len !== null && raw.length >= end + 4 + Number(len[1]);
}
