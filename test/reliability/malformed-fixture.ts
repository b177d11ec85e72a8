/**
 * Shared fixture of the malformed-input catalogue (`test/reliability/malformed-*.test.ts`, listed in
 * docs/reliability.md): an in-process dev cluster behind a relay the test can script per connection
 * (by default it pipes to the dev cluster, so the same proxy also serves real sessions), the proxy in
 * front of it, raw-socket helpers (HTTP answers, WebSocket frames, SPDY frames), a real byte-checked
 * exec session, and the leak check: every TCP connection touching the proxy, the relay or the dev
 * cluster, counted from /proc/self/fd and /proc/net/tcp{,6} (everything runs in this process).
 * Loopback only.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { WebSocket } from 'ws';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { encodeFrame, FrameParser, HeaderCompressor, type SpdyFrame } from '../../src/spdy/index.js';
import { RawClient } from '../proxy/scripted-upstream.js';

// ---------------------------------------------------------------------------------------------
// The catalogue's case shape (also read by the doc generator)
// ---------------------------------------------------------------------------------------------

/** One row of the catalogue: what is sent, what must come back, and what came back. */
export interface CatalogueRow {
  /** Stable id, e.g. `H01`; docs/reliability.md lists every one. */
  id: string;
  /** What the malformed input is. */
  title: string;
  /** The expected answer, in words (status line and Status, close code, frames…). */
  expected: string;
  /** Where the expectation comes from (kube-apiserver/kubelet file, RFC, or the proxy's own rule). */
  basis?: string;
  /** Set when the proxy does not (yet) answer `expected`: why, and where the fix goes. */
  knownGap?: string;
  /** With `knownGap`: today's answer, in the same canonical form; the test pins it. */
  observed?: string;
}

// ---------------------------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------------------------

/** Something that answers one relay connection instead of the dev cluster. */
export type RelayScript = (client: Socket, head: string, rest: Buffer) => void | Promise<void>;

/** Dev cluster, scriptable relay and proxy. */
export interface MalformedFixture {
  cluster: DevCluster;
  proxy: RunningServer;
  /** `http://127.0.0.1:<proxy port>` */
  url: string;
  proxyPort: number;
  relayPort: number;
  /** The next relay connection is answered by `script` instead of being piped to the dev cluster. */
  scriptNext(script: RelayScript): void;
  /**
   * Open sockets of the relay between the proxy and the dev cluster (its side of each proxy upstream
   * connection, and its own connection to the dev cluster): 0 once the proxy closed every upstream
   * connection and the dev cluster saw them end.
   */
  relayConnections(): number;
  /** Socket descriptors of this process above the idle baseline (both ends of every connection, child pipes). */
  openConnections(): number;
  /** Wait until {@link openConnections} is back to 0 (fails with the counts after `ms`). */
  expectNoLeak(ms?: number): Promise<void>;
  close(): Promise<void>;
}

/** What a catalogue file runs against. */
export interface MalformedFixtureOptions {
  /** `serve` flags of the proxy. */
  flags?: Pick<ServeFlags, 'upgradeResponseTimeout' | 'upstreamStreaming'>;
  /** The Kubernetes version the dev cluster plays (default: the dev cluster's, 1.36). */
  apiserverVersion?: string;
}

/**
 * Start the dev cluster, the relay and the proxy (proxy → relay → dev cluster). The catalogue is about
 * the proxy's own handling, its translator and tunnel included: each file says which path it drives
 * (`upstreamStreaming: 'spdy'` translates and unwraps here without asking the upstream in WebSocket
 * first, as before issue 32; an `apiserverVersion` of 1.29 refuses WebSocket v5 and the tunnel, so the
 * default `auto` falls back to them).
 */
export async function startMalformedFixture(o: MalformedFixtureOptions = {}): Promise<MalformedFixture> {
  const flags = o.flags ?? {};
  const work = mkdtempSync(join(tmpdir(), 'ksp-malformed-'));
  const cluster = await startDevCluster({ dataDir: join(work, 'pods'), ...(o.apiserverVersion ? { apiserverVersion: o.apiserverVersion } : {}) });
  const scripts: RelayScript[] = [];
  const relaySockets = new Set<Socket>();
  const relay: Server = createServer((client) => {
    relaySockets.add(client);
    client.on('close', () => relaySockets.delete(client));
    client.on('error', () => {});
    const script = scripts.shift();
    if (!script) {
      const up = connect({ host: '127.0.0.1', port: cluster.port });
      relaySockets.add(up);
      up.on('close', () => relaySockets.delete(up));
      up.on('error', () => client.destroy());
      client.on('error', () => up.destroy());
      client.pipe(up);
      up.pipe(client);
      client.on('close', () => up.destroy());
      up.on('close', () => client.destroy());
      return;
    }
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      client.pause();
      void Promise.resolve(script(client, buf.toString('latin1', 0, end + 4), buf.subarray(end + 4))).catch(() => client.destroy());
    };
    client.on('data', onData);
  });
  relay.listen(0, '127.0.0.1');
  await once(relay, 'listening');
  const relayPort = (relay.address() as AddressInfo).port;
  const config = await resolveConfig({ listen: '127.0.0.1:0', upstream: `http://127.0.0.1:${relayPort}`, ...flags });
  const proxy = await startServer(config, process.env.MALFORMED_LOG ? { logger: { level: process.env.MALFORMED_LOG } } : {});
  const proxyPort = Number(new URL(proxy.url).port);
  const ports = new Set([proxyPort, relayPort, cluster.port]);
  // Everything runs in this process: once the fixture is up, the socket descriptors it holds are the
  // listeners and the test runner's own channel. Every connection opened later must be gone again.
  const baseline = countSocketFds();
  const openConnections = (): number => countSocketFds() - baseline;
  return {
    cluster,
    proxy,
    url: proxy.url,
    proxyPort,
    relayPort,
    scriptNext: (s) => void scripts.push(s),
    relayConnections: () => relaySockets.size,
    openConnections,
    expectNoLeak: async (ms = 5_000) => {
      // /proc/net/tcp is only read to explain a failure: on a busy host it holds tens of thousands of lines.
      await waitFor(() => openConnections() <= 0, ms, () => `${openConnections()} socket descriptors above the baseline; TCP connections on the fixture's ports: ${countTcpConnections(ports)}`);
    },
    close: async () => {
      await proxy.close();
      for (const s of relaySockets) s.destroy();
      await new Promise<void>((resolve) => relay.close(() => resolve()));
      await cluster.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
}

/**
 * Poll `predicate` (for state with no event to wait on: kernel socket tables) every 10 ms until it
 * holds, or throw `describe()` after `ms`.
 */
export async function waitFor(predicate: () => boolean, ms: number, describe: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms: ${describe()}`);
    await new Promise<void>((resolve) => setTimeout(resolve, 10));
  }
}

/** Socket descriptors (TCP, Unix, socketpairs) this process holds. */
export function countSocketFds(): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

/** Non-listening TCP sockets of THIS process whose local or remote port is in `ports`. */
export function countTcpConnections(ports: ReadonlySet<number>): number {
  const inodes = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  let n = 0;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'latin1');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const [local, remote, state, inode] = [f[1]!, f[2]!, f[3]!, f[9]!];
      if (state === '0A' || !inodes.has(inode)) continue; // LISTEN, or not ours
      const lp = parseInt(local.split(':')[1]!, 16);
      const rp = parseInt(remote.split(':')[1]!, 16);
      if (ports.has(lp) || ports.has(rp)) n++;
    }
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Raw client
// ---------------------------------------------------------------------------------------------

/** A raw client connection (the shared fixture's), with this catalogue's 5 s deadline per wait. */
export type Raw = RawClient;

/** Connect a {@link Raw} client to 127.0.0.1:`port`. */
export function connectRaw(port: number): Promise<Raw> {
  return RawClient.connect(port, { timeoutMs: 5_000, noDelay: true });
}

// ---------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------

/** A parsed HTTP/1.1 answer. */
export interface HttpAnswer {
  status: number;
  head: string;
  headers: Array<[string, string]>;
  body: Buffer;
  /** The body decoded as JSON when it is JSON. */
  json?: { kind?: string; code?: number; reason?: string; message?: string; status?: string };
  /** Bytes after the answer (e.g. the first frames of an upgraded protocol). */
  rest: Buffer;
}

/** The end of a complete answer in `raw` (head + Content-Length or chunked body), else -1. */
export function answerEnd(raw: Buffer): number {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return -1;
  const head = raw.toString('latin1', 0, end + 2);
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
  if (status === 101 || status === 204 || status === 304) return end + 4;
  const len = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (len) return raw.length >= end + 4 + Number(len[1]) ? end + 4 + Number(len[1]) : -1;
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
    const term = raw.indexOf('0\r\n\r\n', end + 4);
    return term < 0 ? -1 : term + 5;
  }
  return -1;
}

/** Parse the complete answer at the start of `raw`. */
export function parseHttpAnswer(raw: Buffer): HttpAnswer {
  const endAll = answerEnd(raw);
  const end = raw.indexOf('\r\n\r\n');
  const head = raw.toString('latin1', 0, end + 4);
  const lines = head.split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)?.[1]);
  const headers = lines
    .slice(1)
    .filter((l) => l !== '')
    .map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as [string, string]);
  let body = raw.subarray(end + 4, endAll < 0 ? raw.length : endAll);
  if (headers.some(([n, v]) => n === 'transfer-encoding' && /chunked/i.test(v))) body = dechunk(body);
  const answer: HttpAnswer = { status, head, headers, body, rest: endAll < 0 ? Buffer.alloc(0) : raw.subarray(endAll) };
  try {
    answer.json = JSON.parse(body.toString('utf8')) as HttpAnswer['json'];
  } catch {
    // not JSON
  }
  return answer;
}

function dechunk(b: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lf = b.indexOf('\r\n', at);
    if (lf < 0) break;
    const n = parseInt(b.toString('latin1', at, lf), 16);
    if (!(n > 0)) break;
    out.push(b.subarray(lf + 2, lf + 2 + n));
    at = lf + 2 + n + 2;
  }
  return Buffer.concat(out);
}

/** What a raw HTTP exchange produced. */
export interface Exchange {
  answer?: HttpAnswer;
  /** True when the server closed the connection (after its answer, or without one). */
  closed: boolean;
  raw: Buffer;
}

/**
 * Send `request` (bytes, or parts written one after the other) on a fresh connection to `port` and
 * read one complete answer, or the server's close. Then wait briefly for the server to close (only
 * when `awaitClose`), and destroy the connection.
 */
export async function exchange(port: number, request: Buffer | string | Array<Buffer | string>, o: { awaitClose?: boolean; ms?: number } = {}): Promise<Exchange> {
  const raw = await connectRaw(port);
  try {
    for (const part of Array.isArray(request) ? request : [request]) raw.write(part);
    try {
      await raw.until((b) => answerEnd(b) >= 0, 'a complete answer', o.ms ?? 5_000);
    } catch (e) {
      if (!raw.ended) throw e;
    }
    if (o.awaitClose) await raw.closed(o.ms ?? 5_000);
    const got = raw.received;
    const result: Exchange = { closed: raw.ended, raw: got };
    if (answerEnd(got) >= 0) result.answer = parseHttpAnswer(got);
    return result;
  } finally {
    raw.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// WebSocket frames (RFC 6455), written byte by byte
// ---------------------------------------------------------------------------------------------

export const WS_OP = { CONT: 0, TEXT: 1, BINARY: 2, CLOSE: 8, PING: 9, PONG: 10 } as const;

/** Options of {@link wsFrame}. */
export interface WsFrameOptions {
  fin?: boolean;
  rsv?: number;
  /** Mask the payload (clients must); default true. */
  mask?: boolean;
  /** Declare this payload length instead of the real one (the payload is sent as given). */
  declaredLength?: number | bigint;
  /** Force the 16-bit or 64-bit length form. */
  lengthForm?: 16 | 64;
}

/** One client frame. */
export function wsFrame(opcode: number, payload: Buffer | string = Buffer.alloc(0), o: WsFrameOptions = {}): Buffer {
  const data = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const mask = o.mask ?? true;
  const declared = o.declaredLength ?? data.length;
  const n = BigInt(declared);
  const parts: Buffer[] = [];
  const b0 = ((o.fin ?? true) ? 0x80 : 0) | ((o.rsv ?? 0) << 4) | opcode;
  let lenBytes: Buffer;
  if (o.lengthForm === 64 || n > 0xffffn) {
    lenBytes = Buffer.alloc(9);
    lenBytes[0] = 127;
    lenBytes.writeBigUInt64BE(n, 1);
  } else if (o.lengthForm === 16 || n > 125n) {
    lenBytes = Buffer.alloc(3);
    lenBytes[0] = 126;
    lenBytes.writeUInt16BE(Number(n), 1);
  } else {
    lenBytes = Buffer.from([Number(n)]);
  }
  lenBytes[0]! |= mask ? 0x80 : 0;
  parts.push(Buffer.from([b0]), lenBytes);
  if (mask) {
    const key = randomBytes(4);
    const masked = Buffer.from(data);
    for (let i = 0; i < masked.length; i++) masked[i]! ^= key[i % 4]!;
    parts.push(key, masked);
  } else {
    parts.push(data);
  }
  return Buffer.concat(parts);
}

/** A binary channel message `[channel, ...payload]`. */
export function wsChannel(channel: number, payload: Buffer | string = Buffer.alloc(0), o: WsFrameOptions = {}): Buffer {
  return wsFrame(WS_OP.BINARY, Buffer.concat([Buffer.from([channel]), typeof payload === 'string' ? Buffer.from(payload) : payload]), o);
}

/** A close frame with `code` (and reason). */
export function wsClose(code?: number, reason: Buffer | string = ''): Buffer {
  if (code === undefined) return wsFrame(WS_OP.CLOSE);
  const p = Buffer.alloc(2);
  p.writeUInt16BE(code, 0);
  return wsFrame(WS_OP.CLOSE, Buffer.concat([p, typeof reason === 'string' ? Buffer.from(reason) : reason]));
}

/** One frame sent by the server. */
export interface ServerFrame {
  fin: boolean;
  opcode: number;
  payload: Buffer;
}

/** Decode the complete server frames at the start of `b`; returns them and the bytes used. */
export function parseServerFrames(b: Buffer): { frames: ServerFrame[]; used: number } {
  const frames: ServerFrame[] = [];
  let at = 0;
  for (;;) {
    if (b.length - at < 2) break;
    const b0 = b[at]!;
    const b1 = b[at + 1]!;
    let len = b1 & 0x7f;
    let hl = 2;
    if (len === 126) {
      if (b.length - at < 4) break;
      len = b.readUInt16BE(at + 2);
      hl = 4;
    } else if (len === 127) {
      if (b.length - at < 10) break;
      len = Number(b.readBigUInt64BE(at + 2));
      hl = 10;
    }
    if (b1 & 0x80) hl += 4; // servers do not mask; tolerate it anyway
    if (b.length - at < hl + len) break;
    frames.push({ fin: (b0 & 0x80) !== 0, opcode: b0 & 0x0f, payload: b.subarray(at + hl, at + hl + len) });
    at += hl + len;
  }
  return { frames, used: at };
}

/** A request head for a WebSocket upgrade. */
export function wsUpgradeRequest(path: string, o: { protocol?: string | string[] | null; key?: string | null; version?: string | null; method?: string; extra?: string } = {}): string {
  let h = `${o.method ?? 'GET'} ${path} HTTP/1.1\r\nHost: proxy.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n`;
  if (o.key !== null) h += `Sec-WebSocket-Key: ${o.key ?? 'dGhlIHNhbXBsZSBub25jZQ=='}\r\n`;
  if (o.version !== null) h += `Sec-WebSocket-Version: ${o.version ?? '13'}\r\n`;
  const protocols = o.protocol === undefined ? ['v5.channel.k8s.io'] : o.protocol === null ? [] : Array.isArray(o.protocol) ? o.protocol : [o.protocol];
  for (const p of protocols) h += `Sec-WebSocket-Protocol: ${p}\r\n`;
  return h + (o.extra ?? '') + '\r\n';
}

/** The exec path for `query` on pod demo in namespace default. */
export function execPath(query = 'command=cat&stdin=true&stdout=true&stderr=true', pod = 'demo', namespace = 'default', sub = 'exec'): string {
  return `/api/v1/namespaces/${namespace}/pods/${pod}/${sub}?${query}`;
}

/**
 * A raw v5 WebSocket session on the proxy, after the 101 and the initial frame. `frames()` returns
 * every server frame so far; `status()` the channel-3 Status; `closeCode()` the close frame's code.
 */
export class RawWs {
  #used = 0;
  readonly got: ServerFrame[] = [];
  private constructor(readonly raw: Raw, readonly answer: HttpAnswer) {}

  /** Take over a connection whose 101 already arrived; waits for the initial frame. */
  static async adopt(raw: Raw): Promise<RawWs> {
    const answer = parseHttpAnswer(raw.received);
    const ws = new RawWs(raw, answer);
    ws.#used = answerEnd(raw.received);
    await ws.waitFrame((f) => f.opcode === WS_OP.BINARY, 'the initial frame');
    return ws;
  }

  static async open(port: number, path = execPath(), o: Parameters<typeof wsUpgradeRequest>[1] = {}): Promise<RawWs> {
    const raw = await connectRaw(port);
    raw.write(wsUpgradeRequest(path, o));
    await raw.until((b) => answerEnd(b) >= 0, '101');
    const answer = parseHttpAnswer(raw.received);
    if (answer.status !== 101) {
      raw.destroy();
      throw new Error(`expected 101, got ${answer.status} ${answer.body.toString()}`);
    }
    const ws = new RawWs(raw, answer);
    ws.#used = answerEnd(raw.received);
    await ws.waitFrame((f) => f.opcode === WS_OP.BINARY, 'the initial frame');
    return ws;
  }

  /** Parse what arrived since the last call. */
  frames(): ServerFrame[] {
    const { frames, used } = parseServerFrames(this.raw.received.subarray(this.#used));
    this.#used += used;
    this.got.push(...frames);
    return this.got;
  }

  /** Wait for a server frame matching `pred` (searching all frames received so far). */
  async waitFrame(pred: (f: ServerFrame) => boolean, what: string, ms = 5_000): Promise<ServerFrame> {
    let found: ServerFrame | undefined;
    await this.raw.until(() => (found = this.frames().find(pred)) !== undefined, what, ms);
    return found!;
  }

  send(b: Buffer): void {
    this.raw.write(b);
  }

  /** Bytes received on `channel` so far (binary frames). */
  channelBytes(channel: number): Buffer {
    return Buffer.concat(this.frames().filter((f) => f.opcode === WS_OP.BINARY && f.payload[0] === channel).map((f) => f.payload.subarray(1)));
  }

  /** The channel-3 Status, once it arrived. */
  async status(ms = 5_000): Promise<{ status?: string; reason?: string; code?: number; message?: string }> {
    const f = await this.waitFrame((x) => x.opcode === WS_OP.BINARY && x.payload[0] === 3 && x.payload.length > 1, 'the channel-3 Status', ms);
    return JSON.parse(f.payload.subarray(1).toString('utf8')) as { status?: string; reason?: string; code?: number; message?: string };
  }

  /** The close frame's code (1005 when it had no payload), once it arrived. */
  async closeCode(ms = 5_000): Promise<number> {
    const f = await this.waitFrame((x) => x.opcode === WS_OP.CLOSE, 'a close frame', ms);
    return f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1005;
  }

  /** Echo check on a `cat` session: `data` on stdin comes back on stdout (channel 1). */
  async echo(data: Buffer, ms = 5_000): Promise<void> {
    const before = this.channelBytes(1).length;
    this.send(wsChannel(0, data));
    await this.raw.until(() => this.channelBytes(1).length >= before + data.length, `${data.length} echoed bytes`, ms);
    expect(this.channelBytes(1).subarray(before, before + data.length).equals(data)).toBe(true);
  }

  /** Finish a `cat` session: close stdin, expect Success on channel 3, answer the close. */
  async finishSuccess(): Promise<void> {
    this.send(Buffer.from(wsFrame(WS_OP.BINARY, Buffer.from([255, 0]))));
    const status = await this.status();
    expect(status.status).toBe('Success');
    expect(await this.closeCode()).toBe(1000);
    this.send(wsClose(1000));
    await this.raw.closed();
  }

  destroy(): void {
    this.raw.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// Good sessions
// ---------------------------------------------------------------------------------------------

/**
 * A real exec session through the proxy (WebSocket v5, translated to SPDY upstream): `cat` gets
 * `size` random bytes in several messages, stdin is closed with `[255,0]`, stdout must be the same
 * bytes, channel 3 Success, close 1000.
 */
export async function goodExecSession(url: string, size = 64 * 1024): Promise<void> {
  const data = randomBytes(size);
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${execPath()}`, ['v5.channel.k8s.io']);
  const out: Buffer[] = [];
  let status: { status?: string } | undefined;
  const closed = new Promise<number>((resolve, reject) => {
    ws.on('close', (code) => resolve(code));
    ws.on('error', reject);
  });
  ws.on('message', (m: Buffer) => {
    if (m[0] === 1) out.push(m.subarray(1));
    if (m[0] === 3 && m.length > 1) status = JSON.parse(m.subarray(1).toString()) as { status?: string };
  });
  await once(ws, 'open');
  for (let at = 0; at < size; at += 16 * 1024) ws.send(Buffer.concat([Buffer.from([0]), data.subarray(at, at + 16 * 1024)]));
  ws.send(Buffer.from([255, 0]));
  expect(await closed).toBe(1000);
  expect(status?.status).toBe('Success');
  const got = Buffer.concat(out);
  expect(got.length).toBe(size);
  expect(got.equals(data)).toBe(true);
}

/** Cases per batch: after each batch, the leak check and a good exec session. */
export const BATCH_SIZE = 6;

/**
 * After case `index` of `total`: at the end of each batch of {@link BATCH_SIZE} (and after the
 * last), wait for every connection to be closed, run a good exec session, and check again.
 */
export async function afterCase(fx: MalformedFixture, index: number, total: number): Promise<void> {
  if ((index + 1) % BATCH_SIZE !== 0 && index !== total - 1) return;
  await fx.expectNoLeak();
  await goodExecSession(fx.url);
  await fx.expectNoLeak();
}

// ---------------------------------------------------------------------------------------------
// SPDY
// ---------------------------------------------------------------------------------------------

/** The frames of `fs`, encoded back to back. */
export function spdyWire(...fs: SpdyFrame[]): Buffer {
  return Buffer.concat(fs.flatMap((f) => encodeFrame(f)));
}

/** Hex to bytes, whitespace ignored. */
export function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

/** A SPDY/3.1 exec upgrade request head. */
export function spdyUpgradeRequest(path = execPath('command=cat&stdin=1&stdout=1&stderr=1'), protocols = ['v4.channel.k8s.io']): string {
  let h = `POST ${path} HTTP/1.1\r\nHost: proxy.test\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n`;
  for (const p of protocols) h += `X-Stream-Protocol-Version: ${p}\r\n`;
  return h + 'Content-Length: 0\r\n\r\n';
}

/**
 * A raw SPDY client session on the proxy (passthrough to the dev cluster's kubelet-like server):
 * SYN_STREAMs come from one header compressor; frames the server sends are parsed as they arrive.
 */
export class RawSpdy {
  readonly compressor = new HeaderCompressor();
  readonly parser = new FrameParser();
  readonly got: SpdyFrame[] = [];
  #used = 0;
  parseError: unknown;
  private constructor(readonly raw: Raw, readonly answer: HttpAnswer) {}

  static async open(port: number, path?: string): Promise<RawSpdy> {
    const raw = await connectRaw(port);
    raw.write(spdyUpgradeRequest(path));
    await raw.until((b) => answerEnd(b) >= 0, '101');
    const answer = parseHttpAnswer(raw.received);
    if (answer.status !== 101) {
      raw.destroy();
      throw new Error(`expected 101, got ${answer.status} ${answer.body.toString()}`);
    }
    const s = new RawSpdy(raw, answer);
    s.#used = answerEnd(raw.received);
    return s;
  }

  /** Take over a connection whose 101 already arrived. */
  static adopt(raw: Raw): RawSpdy {
    const s = new RawSpdy(raw, parseHttpAnswer(raw.received));
    s.#used = answerEnd(raw.received);
    return s;
  }

  /** A SYN_STREAM with `headers`. */
  syn(streamId: number, headers: Record<string, string>, fin = false): SpdyFrame {
    return { type: 'syn_stream', streamId, associatedStreamId: 0, priority: 0, fin, unidirectional: false, headerBlock: this.compressor.compress(headers) };
  }

  frames(): SpdyFrame[] {
    const fresh = this.raw.received.subarray(this.#used);
    this.#used += fresh.length;
    if (fresh.length > 0 && this.parseError === undefined) {
      try {
        this.got.push(...this.parser.push(fresh));
      } catch (e) {
        this.parseError = e;
      }
    }
    return this.got;
  }

  async waitFrame(pred: (f: SpdyFrame) => boolean, what: string, ms = 5_000): Promise<SpdyFrame> {
    let found: SpdyFrame | undefined;
    await this.raw.until(() => (found = this.frames().find(pred)) !== undefined, what, ms);
    return found!;
  }

  send(b: Buffer): void {
    this.raw.write(b);
  }

  /** Proves the connection is alive and processed everything before: the PING comes back. */
  async alive(id = 1001): Promise<void> {
    this.send(spdyWire({ type: 'ping', id }));
    await this.waitFrame((f) => f.type === 'ping' && f.id === id, `PING ${id} echo`);
  }

  /** DATA bytes received on `streamId`. */
  dataOf(streamId: number): Buffer {
    return Buffer.concat(this.frames().flatMap((f) => (f.type === 'data' && f.streamId === streamId ? [f.data] : [])));
  }

  destroy(): void {
    this.raw.destroy();
  }
}
