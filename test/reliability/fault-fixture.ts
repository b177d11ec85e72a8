/**
 * Shared set-up for the fault tests (issue 8 item 1): the dev cluster as a CHILD PROCESS (so it can
 * be SIGKILLed and restarted on the same port), small clients for the three streaming paths through
 * the proxy — SPDY/3.1 exec (passthrough), WebSocket v5 exec (translation) and
 * `SPDY/3.1+portforward.k8s.io` (tunnel, with a real SPDY port-forward client inside the WebSocket) —
 * a TCP source for port-forward targets, and a silent upstream that accepts TCP and never answers.
 *
 * Everything waits on events or polls a condition; the only clock reads are the bounds the issue
 * states ("within 1 s", "within the configured timeout").
 */
import { once } from 'node:events';
import { existsSync, mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Duplex } from 'node:stream';
import WebSocket from 'ws';
import { startCli, type ServerProcess } from '../../bench/servers.js';
import { openTypedStream } from '../../bench/spdy-client.js';
import { SpdyConnection, type SpdyStream } from '../../src/spdy/index.js';
import { clientFrame, closeFrame, Op, takeResponseHead, takeServerFrame } from '../translator/stream-tunnel-client.js';

/** A dev cluster child process. */
export interface ClusterChild extends ServerProcess {
  port: number;
  dataDir: string;
  /** SIGKILL it and wait until it is gone. */
  kill(): Promise<void>;
}

/**
 * Start `kube-stream-proxy dev-cluster` as a child process (bin/ → dist/, as bench/servers.ts does),
 * on `port` (0: a free one) with pods under `dataDir`.
 */
export async function startClusterChild(o: { port?: number; dataDir?: string } = {}): Promise<ClusterChild> {
  const dataDir = o.dataDir ?? mkdtempSync(join(tmpdir(), 'ksp-fault-pods-'));
  const p = await startCli(['dev-cluster', '--listen', `127.0.0.1:${o.port ?? 0}`, '--data-dir', dataDir], /^dev cluster listening on /);
  return {
    ...p,
    port: Number(new URL(p.url).port),
    dataDir,
    kill: async () => {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await p.close();
    },
  };
}

/** The request-target of an exec of `command` in pod demo. */
export function execPath(command: string[], streams: { stdin?: boolean; stdout?: boolean; stderr?: boolean } = {}): string {
  const q = new URLSearchParams();
  for (const c of command) q.append('command', c);
  q.set('stdin', String(streams.stdin ?? true));
  q.set('stdout', String(streams.stdout ?? true));
  q.set('stderr', String(streams.stderr ?? true));
  return `/api/v1/namespaces/default/pods/demo/exec?${q.toString()}`;
}

/**
 * A shell that writes which signal it got into `marker` (relative to the pod's working directory)
 * and exits; prints "ready" first. The dev cluster signals the whole process group.
 */
export function signalRecorder(marker: string): string[] {
  // Written under another name and renamed, so the marker appears only with its content in it.
  const traps = ['TERM', 'HUP', 'INT'].map((s) => `trap 'echo ${s} > ${marker}.tmp; mv ${marker}.tmp ${marker}; exit 0' ${s};`).join(' ');
  return ['sh', '-c', `${traps} echo ready; sleep 600 & wait`];
}

/** Endless stdout: 64 KiB blocks of zeros. */
export const ENDLESS_STDOUT = ['dd', 'if=/dev/zero', 'bs=65536', 'count=10000000', 'status=none'];

/** Poll (every 5 ms) until `file` exists; resolves with performance.now() then, or rejects after `timeoutMs`. */
export async function fileAppears(file: string, timeoutMs = 5_000): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (!existsSync(file)) {
    if (performance.now() > deadline) throw new Error(`${file} did not appear within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return performance.now();
}

// ---------------------------------------------------------------------------------------------------
// SPDY/3.1 exec (passthrough)

/** An open SPDY exec session through the proxy. */
export interface SpdyExec {
  conn: SpdyConnection;
  error: SpdyStream;
  stdin: SpdyStream | undefined;
  stdout: SpdyStream;
  stderr: SpdyStream;
  /** stdout bytes so far, and the text of stdout (first 64 KiB). */
  readonly received: number;
  readonly text: string;
  /** Error-stream content so far. */
  readonly status: string;
  /** Resolves with performance.now() when the connection closed. */
  closed: Promise<number>;
  /** Resolves once stdout holds at least `n` bytes (rejects if the connection closes first). */
  receivedAtLeast(n: number): Promise<void>;
}

/** Upgrade to SPDY/3.1 (kubectl's way: POST, v4) and create error, stdin, stdout, stderr. */
export function spdyExec(baseUrl: string, path: string, o: { stdin?: boolean; timeoutMs?: number } = {}): Promise<SpdyExec> {
  const timeoutMs = o.timeoutMs ?? 15_000;
  const url = new URL(path, baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      agent: false,
      headers: { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'v4.channel.k8s.io', 'Content-Length': '0' },
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`SPDY upgrade timed out after ${timeoutMs} ms`)));
    req.once('error', reject);
    req.once('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => reject(new Error(`SPDY upgrade: HTTP ${res.statusCode} ${body}`)));
    });
    req.once('upgrade', (_res, socket: Socket, head: Buffer) => {
      req.setTimeout(0);
      const conn = new SpdyConnection(socket, { isServer: false, head });
      const closed = new Promise<number>((r) => (conn.closed ? r(performance.now()) : conn.once('close', () => r(performance.now()))));
      void (async () => {
        const open = (streamtype: string): Promise<SpdyStream> => openTypedStream(conn, streamtype, timeoutMs);
        const error = await open('error');
        const stdin = (o.stdin ?? true) ? await open('stdin') : undefined;
        const stdout = await open('stdout');
        const stderr = await open('stderr');
        stderr.resume();
        let status = '';
        error.on('data', (c: Buffer) => (status += c.toString()));
        let received = 0;
        let text = '';
        const waiters: Array<() => void> = [];
        stdout.on('data', (c: Buffer) => {
          received += c.length;
          if (text.length < 65_536) text += c.toString('latin1');
          for (const w of waiters.splice(0)) w();
        });
        const receivedAtLeast = async (n: number): Promise<void> => {
          while (received < n) {
            if (conn.closed) throw new Error(`SPDY connection closed after ${received} stdout bytes`);
            await Promise.race([new Promise<void>((r) => waiters.push(r)), closed]);
          }
        };
        resolve({
          conn,
          error,
          stdin,
          stdout,
          stderr,
          get received() {
            return received;
          },
          get text() {
            return text;
          },
          get status() {
            return status;
          },
          closed,
          receivedAtLeast,
        });
      })().catch((err: unknown) => {
        conn.destroy();
        reject(err instanceof Error ? err : new Error(String(err)));
      });
    });
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------------
// WebSocket v5 exec (translation)

/** An open v5 exec session through the proxy. */
export interface WsExec {
  ws: WebSocket;
  readonly received: number;
  readonly text: string;
  /** Channel 3 content so far. */
  readonly status: string;
  /** Resolves with { code, at: performance.now() } when the WebSocket closed. */
  closed: Promise<{ code: number; at: number }>;
  receivedAtLeast(n: number): Promise<void>;
  /** Send stdin bytes. */
  send(data: Buffer | string): void;
}

/** Open a `v5.channel.k8s.io` exec; resolves when the WebSocket is open. */
export function wsExec(baseUrl: string, path: string, timeoutMs = 15_000): Promise<WsExec> {
  const url = new URL(path, baseUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    let received = 0;
    let text = '';
    let status = '';
    const waiters: Array<() => void> = [];
    const closed = new Promise<{ code: number; at: number }>((r) => ws.once('close', (code: number) => r({ code, at: performance.now() })));
    ws.on('error', reject);
    ws.on('message', (raw: WebSocket.RawData) => {
      const data = raw as Buffer;
      if (data.length <= 1) return;
      const payload = data.subarray(1);
      if (data[0] === 1) {
        received += payload.length;
        if (text.length < 65_536) text += payload.toString('latin1');
        for (const w of waiters.splice(0)) w();
      } else if (data[0] === 3) status += payload.toString('utf8');
    });
    ws.once('open', () =>
      resolve({
        ws,
        get received() {
          return received;
        },
        get text() {
          return text;
        },
        get status() {
          return status;
        },
        closed,
        receivedAtLeast: async (n) => {
          let gone = false;
          void closed.then(() => (gone = true));
          while (received < n) {
            if (gone || ws.readyState !== WebSocket.OPEN) throw new Error(`WebSocket closed after ${received} stdout bytes`);
            await Promise.race([new Promise<void>((r) => waiters.push(r)), closed]);
          }
        },
        send: (data) => ws.send(Buffer.concat([Buffer.from([0]), Buffer.from(data)]), { binary: true }),
      }),
    );
  });
}

// ---------------------------------------------------------------------------------------------------
// SPDY/3.1+portforward.k8s.io (tunnel)

/**
 * The client end of a port-forward tunnel as a byte stream: binary WebSocket messages in, masked
 * binary messages out, exactly what client-go's `TunnelingConnection` gives its SPDY client.
 * Backpressure: when the reader stops, the TCP socket stops being read.
 */
export class TunnelSocket extends Duplex {
  readonly socket: Socket;
  status = 0;
  head = '';
  /** The server's close code, once a close frame arrived. */
  closeCode: number | undefined;
  #buf: Buffer = Buffer.alloc(0);
  #headDone = false;
  readonly #opened: Promise<void>;

  constructor(baseUrl: string, path = '/api/v1/namespaces/default/pods/demo/portforward') {
    super();
    const u = new URL(baseUrl);
    this.socket = connect({ host: u.hostname, port: Number(u.port), noDelay: true });
    this.socket.on('error', () => undefined);
    let opened!: () => void;
    let failed!: (e: Error) => void;
    this.#opened = new Promise<void>((res, rej) => ((opened = res), (failed = rej)));
    this.#opened.catch(() => undefined);
    this.socket.once('connect', () => {
      this.socket.write(
        `GET ${path} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
          'Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n\r\n',
      );
    });
    this.socket.on('data', (c: Buffer) => {
      this.#buf = this.#buf.length === 0 ? c : Buffer.concat([this.#buf, c]);
      if (!this.#headDone) {
        const r = takeResponseHead(this.#buf);
        if (!r) return;
        ({ head: this.head, status: this.status, rest: this.#buf } = r);
        this.#headDone = true;
        if (this.status !== 101) return failed(new Error(`tunnel upgrade answered ${this.status}: ${this.head}${this.#buf.toString()}`));
        opened();
      }
      this.#frames();
    });
    this.socket.once('close', () => {
      failed(new Error('connection closed before the handshake'));
      if (this.readableEnded) return;
      this.push(null);
      this.destroy();
    });
  }

  /** Resolves once the 101 arrived. */
  opened(): Promise<void> {
    return this.#opened;
  }

  #frames(): void {
    for (let next = takeServerFrame(this.#buf); next; next = takeServerFrame(this.#buf)) {
      const { opcode, payload } = next.frame;
      this.#buf = next.rest;
      if (opcode === Op.BINARY || opcode === Op.CONT) {
        if (!this.push(payload)) this.socket.pause();
      } else if (opcode === Op.CLOSE) {
        this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        if (!this.socket.writableEnded) this.socket.end(clientFrame(Op.CLOSE, payload.subarray(0, 2)));
        this.push(null);
      }
    }
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.socket.destroyed) return cb();
    this.socket.write(clientFrame(Op.BINARY, chunk), () => cb());
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (!this.socket.destroyed && !this.socket.writableEnded) this.socket.write(closeFrame(1000));
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.socket.destroy();
    cb(err);
  }
}

/** A port-forward session through the tunnel: one forwarded TCP connection to `port`. */
export interface TunnelForward {
  tunnel: TunnelSocket;
  conn: SpdyConnection;
  data: SpdyStream;
  error: SpdyStream;
  /** Resolves with performance.now() once the WebSocket's TCP connection closed. */
  socketClosed: Promise<number>;
}

/** Open the tunnel and, inside it, the error + data stream pair for `port` (requestID 0). */
export async function tunnelForward(baseUrl: string, port: number, timeoutMs = 15_000): Promise<TunnelForward> {
  const tunnel = new TunnelSocket(baseUrl);
  const socketClosed = new Promise<number>((r) => tunnel.socket.once('close', () => r(performance.now())));
  await tunnel.opened();
  const conn = new SpdyConnection(tunnel, { isServer: false });
  const headers = { port: String(port), requestid: '0' };
  const error = await conn.openStream({ streamtype: 'error', ...headers }, { timeoutMs });
  error.on('error', () => undefined);
  error.end(); // client-go half-closes the error stream at once
  error.resume();
  const data = await conn.openStream({ streamtype: 'data', ...headers }, { timeoutMs });
  data.on('error', () => undefined);
  return { tunnel, conn, data, error, socketClosed };
}

// ---------------------------------------------------------------------------------------------------
// Local servers

/** A TCP server on 127.0.0.1 that writes to each connection what `serve` says. */
export interface SourceServer {
  port: number;
  /** Connections accepted so far, with when each closed (performance.now()). */
  connections: Array<{ socket: Socket; closed: Promise<number> }>;
  /** Resolves with the next (or an already waiting) accepted connection. */
  next(): Promise<{ socket: Socket; closed: Promise<number> }>;
  close(): Promise<void>;
}

/** Start a source server; `serve` runs for each connection (e.g. writes endless zeros). */
export async function startSourceServer(serve: (socket: Socket) => void): Promise<SourceServer> {
  const connections: SourceServer['connections'] = [];
  const waiting: Array<(c: SourceServer['connections'][number]) => void> = [];
  let taken = 0;
  const server: Server = createServer((socket) => {
    socket.on('error', () => undefined);
    const closed = new Promise<number>((r) => socket.once('close', () => r(performance.now())));
    const c = { socket, closed };
    connections.push(c);
    const w = waiting.shift();
    if (w) {
      taken++;
      w(c);
    }
    serve(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    connections,
    next: () => (taken < connections.length ? Promise.resolve(connections[taken++]!) : new Promise((r) => waiting.push(r))),
    close: async () => {
      for (const c of connections) c.socket.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Write zeros to `socket` with backpressure until it closes. */
export function writeEndlessly(socket: Socket): void {
  const block = Buffer.alloc(64 * 1024);
  const pump = (): void => {
    while (!socket.destroyed && socket.write(block));
  };
  socket.on('drain', pump);
  pump();
}

/** A TCP server that accepts connections and never writes a byte (a hung upstream). */
export async function startSilentUpstream(): Promise<{ url: string; accepted: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const state = { accepted: 0 };
  const server = createServer((socket) => {
    state.accepted++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.resume(); // read and ignore the request
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get accepted() {
      return state.accepted;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
