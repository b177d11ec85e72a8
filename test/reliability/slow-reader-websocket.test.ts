/**
 * Issue 32, item 7 ("never truncate") on the WebSocket ends the proxy writes itself, over real
 * loopback sockets and `ws` clients:
 *
 * - the translator's `finish()` (translator/websocket.ts): 16 MiB of stdout (far more than the
 *   socket buffers between the two ends hold), then the Status on channel 3 and close 1000; the
 *   client reads its last 3 MiB slowly (twelve 300 ms pauses, a ping at each) against a 1.5 s finish
 *   deadline, at least eight of the pauses (2.4 s) after the proxy's close: it gets every byte, the
 *   Status and the close, because the deadline runs only while the client takes nothing (and neither
 *   the deadline nor ws's own 1 s close timeout is a fixed one);
 * - the port-forward tunnel's relay (translator/stream-tunnel-relay.ts): the upstream writes 16 MiB
 *   and ends; the same slow client gets every byte and close 1000, at least eight pauses (2.4 s,
 *   more than the deadline) coming after the upstream's end (the old relay cut it off a fixed 10 s
 *   after it);
 * - both: a client that takes nothing once the session ended is cut off after the deadline (500 ms
 *   here), within 2.4 s of the end: so a cut-off after any fixed time fails one of the two (before
 *   2.4 s cuts the slow reader, after it misses this bound).
 *
 * The cases run one at a time. Run concurrently in one process, the tunnel's slow reader was now and
 * then cut off: its kernel had advertised a window far larger than what was left to read, so reading
 * the tail sent no window update, and once nothing is left to send a window update is all
 * proxy/drain-close.ts can see of a peer's reading.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer } from 'node:http';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer, type ServerOptions } from 'ws';
import { ChannelWebSocket } from '../../translator/websocket.js';
import { relayTunnel } from '../../translator/stream-tunnel-relay.js';
import { Channel } from '../../translator/channel-frame.js';
import { nonZeroExitStatus } from '../../src/status.js';
import { SlowReader } from '../helpers/slow-reader.js';

const MiB = 1024 * 1024;
const TOTAL = 16 * MiB;
/**
 * The slow tail: 3 MiB in 256 KiB steps, a 300 ms pause after each. Each pause is a fifth of the
 * deadline (a reader that reads, however slowly, is never cut off); eight of them are more than it.
 */
const SCHEDULE = { total: TOTAL, tail: 3 * MiB, step: 256 * 1024, pauseMs: 300 };
const DEADLINE_MS = 1_500;
/** Pauses that must come after the session's end: 2.4 s, longer than the deadline and ws's close timeout. */
const PAUSES_AFTER_END = 8;
/** A client that takes nothing: its deadline, and how soon after the end it must be cut off. */
const IDLE_DEADLINE_MS = 500;
const CUT_OFF_WITHIN_MS = 2_400;
// No fixed cut-off time passes both: shorter than the slow reader's time after the end cuts it off,
// longer misses the idle client's bound.
if (CUT_OFF_WITHIN_MS > PAUSES_AFTER_END * SCHEDULE.pauseMs) throw new Error('the idle bound must be below the slow reader\'s time after the end');

const closers: Array<() => void> = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

/** Deterministic 256 KiB pieces of the stream. */
function piece(i: number): Buffer {
  const b = Buffer.alloc(256 * 1024, i & 0xff);
  b.writeUInt32BE(i, 0);
  return b;
}

/** A loopback HTTP server whose WebSocket upgrades are handed to `onSocket` (server side, and the raw socket). */
async function wsServer(protocols: string[], onSocket: (ws: WebSocket, socket: Duplex) => void): Promise<string> {
  // ws's own close timeout (30 s by default, started when close() is called) shortened to 1 s: a
  // reader slower than it must not be cut off by it either.
  const options: ServerOptions & { closeTimeout: number } = { noServer: true, perMessageDeflate: false, closeTimeout: 1_000, handleProtocols: (offered) => protocols.find((p) => offered.has(p)) ?? false };
  const wss = new WebSocketServer(options);
  const server: HttpServer = createHttpServer();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => wss.handleUpgrade(req, socket, head, (ws) => onSocket(ws, socket)));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => server.close());
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** A client that counts and hashes what it gets on `channel` (or every binary message when undefined), reading on `schedule`. */
function slowClient(url: string, protocols: string[], channel: number | undefined): { ws: WebSocket; reader: SlowReader; got: () => string; status: () => string; closed: Promise<number> } {
  const ws = new WebSocket(url, protocols, { perMessageDeflate: false });
  const hash = createHash('sha256');
  let status = '';
  const reader = new SlowReader(ws, { ...SCHEDULE, onPause: () => ws.ping() });
  ws.on('message', (raw: Buffer) => {
    if (channel === undefined) {
      hash.update(raw);
      reader.onData(raw.length);
    } else if (raw[0] === channel) {
      hash.update(raw.subarray(1));
      reader.onData(raw.length - 1);
    } else if (raw[0] === Channel.Error) status += raw.subarray(1).toString();
  });
  const closed = new Promise<number>((r) => ws.once('close', (code: number) => r(code)));
  ws.on('error', () => undefined);
  return { ws, reader, got: () => hash.digest('hex'), status: () => status, closed };
}

/** Poll `cond` every 5 ms (10 s at most). */
async function until(cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Hash of the stream of `n` pieces. */
function streamDigest(n: number): string {
  const h = createHash('sha256');
  for (let i = 0; i < n; i++) h.update(piece(i));
  return h.digest('hex');
}

describe('never truncate: the translator\'s finish()', () => {
  it('a slow, pinging reader gets all 16 MiB, the Status and close 1000 (the finish deadline runs only while it takes nothing)', async () => {
    let receivedAtClose = -1;
    const url = await wsServer(['v5.channel.k8s.io'], (ws) => {
      // When the translator starts the close (after the Status reached the socket): what the
      // client had read by then.
      const close = ws.close.bind(ws);
      ws.close = (...args: Parameters<WebSocket['close']>) => {
        if (receivedAtClose < 0) receivedAtClose = c.reader.received;
        close(...args);
      };
      const cws = new ChannelWebSocket(ws, { finishDeadlineMs: DEADLINE_MS, idleTimeoutMs: 0 });
      let i = 0;
      const pump = (): void => {
        while (i < TOTAL / (256 * 1024)) if (!cws.send(Channel.Stdout, piece(i++))) return;
        cws.off('drain', pump);
        void cws.finish(nonZeroExitStatus(3));
      };
      cws.on('drain', pump);
      pump();
    });
    const c = slowClient(url, ['v5.channel.k8s.io'], Channel.Stdout);
    expect(await c.closed).toBe(1000);
    expect(c.reader.received).toBe(TOTAL);
    expect(c.got()).toBe(streamDigest(TOTAL / (256 * 1024)));
    expect(c.reader.pauses).toBe(12);
    expect(c.status()).toMatch(/"reason":"NonZeroExitCode"/);
    // The close was started during the slow tail, with at least eight pauses still to come.
    expect(receivedAtClose).toBeGreaterThanOrEqual(0);
    expect(TOTAL - receivedAtClose).toBeGreaterThanOrEqual(PAUSES_AFTER_END * SCHEDULE.step);
  }, 60_000);

  it('a client that takes nothing after the Status is cut off once the finish deadline passed without progress', async () => {
    let finished!: (at: number) => void;
    const finishedAt = new Promise<number>((r) => (finished = r));
    let closedAt!: Promise<number>;
    const url = await wsServer(['v5.channel.k8s.io'], (ws) => {
      const cws = new ChannelWebSocket(ws, { finishDeadlineMs: IDLE_DEADLINE_MS, idleTimeoutMs: 0 });
      // Output until the client's socket and ours are full, then the Status.
      let i = 0;
      while (cws.send(Channel.Stdout, piece(i++)));
      closedAt = cws.finish(nonZeroExitStatus(3)).then(() => performance.now());
      finished(performance.now());
    });
    const client = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false });
    client.on('error', () => undefined);
    await once(client, 'open');
    client.pause(); // reads nothing, ever
    const start = await finishedAt;
    const end = await Promise.race([closedAt, new Promise<'hung'>((r) => setTimeout(() => r('hung'), CUT_OFF_WITHIN_MS))]);
    expect(end).not.toBe('hung');
    expect((end as number) - start).toBeGreaterThanOrEqual(IDLE_DEADLINE_MS - 100);
    client.terminate();
  }, 30_000);
});

describe('never truncate: the port-forward tunnel relay', () => {
  /** The relay between a WebSocket client at the returned URL and an upstream TCP peer. */
  async function tunnel(noProgressMs: number): Promise<{ url: string; upstreamPeer: Promise<Socket>; relay: Promise<ReturnType<typeof relayTunnel>>; serverWs: Promise<WebSocket> }> {
    const upstreamServer: Server = createServer();
    upstreamServer.listen(0, '127.0.0.1');
    await once(upstreamServer, 'listening');
    closers.push(() => upstreamServer.close());
    const upstreamPeer = new Promise<Socket>((r) => upstreamServer.once('connection', r));
    let relayed!: (r: ReturnType<typeof relayTunnel>) => void;
    const relay = new Promise<ReturnType<typeof relayTunnel>>((r) => (relayed = r));
    let accepted!: (ws: WebSocket) => void;
    const serverWs = new Promise<WebSocket>((r) => (accepted = r));
    const url = await wsServer(['SPDY-tunnel'], (ws, socket) => {
      accepted(ws);
      const upstream = connect((upstreamServer.address() as AddressInfo).port, '127.0.0.1');
      upstream.once('connect', () => relayed(relayTunnel(ws, upstream, Buffer.alloc(0), { maxBytesPerSec: 0, clientSocket: socket, noProgressMs })));
    });
    return { url, upstreamPeer, relay, serverWs };
  }

  it('the upstream writes 16 MiB and ends: a slow, pinging reader gets every byte and close 1000', async () => {
    const t = await tunnel(DEADLINE_MS);
    const c = slowClient(t.url, ['SPDY-tunnel'], undefined);
    const peer = await t.upstreamPeer;
    peer.on('error', () => undefined);
    // The relay closes the upstream once it read its end: what the client had read by then.
    let receivedAtUpstreamEnd = -1;
    peer.once('close', () => (receivedAtUpstreamEnd = c.reader.received));
    let i = 0;
    const pump = (): void => {
      while (i < TOTAL / (256 * 1024)) if (!peer.write(piece(i++))) return;
      peer.end();
    };
    peer.on('drain', pump);
    pump();
    peer.resume();
    expect(await c.closed).toBe(1000);
    expect(c.reader.received).toBe(TOTAL);
    expect(c.got()).toBe(streamDigest(TOTAL / (256 * 1024)));
    expect(c.reader.pauses).toBe(12);
    expect((await (await t.relay).done).side).toBe('upstream');
    // The upstream's end was read during the slow tail, with at least eight pauses still to come.
    expect(receivedAtUpstreamEnd).toBeGreaterThanOrEqual(0);
    expect(TOTAL - receivedAtUpstreamEnd).toBeGreaterThanOrEqual(PAUSES_AFTER_END * SCHEDULE.step);
  }, 60_000);

  it('a client that takes nothing after the upstream ended is cut off once the deadline passed without progress', async () => {
    const t = await tunnel(IDLE_DEADLINE_MS);
    const client = new WebSocket(t.url, ['SPDY-tunnel'], { perMessageDeflate: false });
    client.on('error', () => undefined);
    await once(client, 'open');
    client.pause(); // reads nothing, ever
    const peer = await t.upstreamPeer;
    peer.on('error', () => undefined);
    const relay = await t.relay;
    // The upstream writes until the relay holds 512 KiB the client's full socket cannot take (below
    // its 1 MiB mark, so it still reads the upstream's end), then ends.
    const serverWs = await t.serverWs;
    for (let i = 0; serverWs.bufferedAmount < 512 * 1024; i++) {
      const written = (i + 1) * 256 * 1024;
      await new Promise<void>((r) => peer.write(piece(i), () => r()));
      await until(() => relay.bytes.toClient === written);
    }
    const endedAt = performance.now();
    peer.end();
    peer.resume();
    const end = await Promise.race([relay.done.then(() => performance.now()), new Promise<'hung'>((r) => setTimeout(() => r('hung'), CUT_OFF_WITHIN_MS))]);
    expect(end).not.toBe('hung');
    expect((end as number) - endedAt).toBeGreaterThanOrEqual(IDLE_DEADLINE_MS - 100);
    client.terminate();
  }, 30_000);
});
