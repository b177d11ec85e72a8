/**
 * A WebSocket protocol error ends the session now (issue 26 item 2): for each kind of frame `ws`
 * cannot read, on a translated exec session and on a port-forward tunnel, the client gets the close
 * frame with its code (1002, 1007, 1008, 1009), and then — the test never answering the close, never
 * ending or destroying its socket — the proxy closes the client connection, and the upstream
 * connection is closed too (the relay between the proxy and the dev cluster sees both its sockets
 * end). Every socket of the session is gone afterwards (the catalogue's leak check), and a good
 * exec session still works after each batch. Waits poll with deadlines; nothing here asserts a
 * duration (the 200-session figure is `npm run bench -- --protocol-errors`). The cases and their
 * canonical outcomes are in malformed-websocket-abort-cases.ts (docs/reliability.md lists them).
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ABORT_CASES, type AbortCase } from './malformed-websocket-abort-cases.js';
import {
  afterCase,
  answerEnd,
  execPath,
  parseHttpAnswer,
  parseServerFrames,
  startMalformedFixture,
  waitFor,
  wsFrame,
  wsUpgradeRequest,
  WS_OP,
  type MalformedFixture,
  type ServerFrame,
} from './malformed-fixture.js';

let fx: MalformedFixture;
beforeAll(async () => {
  // The cases are about the proxy's translator and tunnel (ws-abort.ts): the proxy translates v5 and
  // unwraps the tunnel itself, without asking the upstream in WebSocket first (issue 32: the 1.36 dev
  // cluster would take both, and its own translator would meet the bad frames).
  fx = await startMalformedFixture({ flags: { upstreamStreaming: 'spdy' } });
});
afterAll(async () => {
  await fx?.close();
});

const MiB = 1024 * 1024;

/**
 * A hostile client: its socket allows half-open connections (a FIN from the proxy does not end it),
 * it never answers the close frame and never ends or destroys the connection itself. Only the proxy
 * can close it: then the test's writes are answered with a reset and the socket closes.
 */
class HostileClient {
  received = Buffer.alloc(0);
  closed = false;
  #start = -1;
  #frames: ServerFrame[] = [];
  #used = 0;
  private constructor(readonly socket: Socket) {
    socket.on('data', (c: Buffer) => (this.received = Buffer.concat([this.received, c])));
    socket.on('error', () => {});
    socket.on('close', () => (this.closed = true));
  }

  /** Upgrade at `path` (WebSocket, `protocol`); resolves after the 101. */
  static async open(path: string, protocol: string): Promise<HostileClient> {
    const socket = connect({ host: '127.0.0.1', port: fx.proxyPort, allowHalfOpen: true });
    await once(socket, 'connect');
    socket.setNoDelay(true);
    const c = new HostileClient(socket);
    socket.write(wsUpgradeRequest(path, { protocol }));
    await waitFor(() => answerEnd(c.received) >= 0 || c.closed, 10_000, () => 'no answer to the upgrade');
    const answer = parseHttpAnswer(c.received);
    if (answer.status !== 101) throw new Error(`expected 101, got ${answer.status} ${answer.body.toString()}`);
    c.#start = answerEnd(c.received);
    return c;
  }

  /** Server frames so far. */
  frames(): ServerFrame[] {
    const { frames, used } = parseServerFrames(this.received.subarray(this.#start + this.#used));
    this.#used += used;
    this.#frames.push(...frames);
    return this.#frames;
  }

  write(b: Buffer): void {
    if (!this.socket.destroyed) this.socket.write(b);
  }

  /** The close frame's code, once it arrived. */
  async closeCode(): Promise<number> {
    let close: ServerFrame | undefined;
    await waitFor(() => (close = this.frames().find((f) => f.opcode === WS_OP.CLOSE)) !== undefined, 10_000, () => 'no close frame');
    return close!.payload.length >= 2 ? close!.payload.readUInt16BE(0) : 1005;
  }

  /**
   * True once the proxy dropped the connection: a ping frame every 20 ms (never a close) until the
   * proxy's reset closes the socket (10 s at most). A proxy that keeps the connection (reading and
   * discarding) never does.
   */
  async droppedByProxy(): Promise<boolean> {
    const poke = setInterval(() => this.write(wsFrame(WS_OP.PING, 'still here')), 20);
    try {
      return await waitFor(() => this.closed, 10_000, () => '').then(
        () => true,
        () => false,
      );
    } finally {
      clearInterval(poke);
    }
  }

  destroy(): void {
    this.socket.destroy();
  }
}

const V5 = 'v5.channel.k8s.io';
const TUNNEL = 'SPDY/3.1+portforward.k8s.io';

/** Run one case; its canonical outcome (see malformed-websocket-abort-cases.ts). */
async function runCase(k: AbortCase): Promise<string> {
  const path = k.session === 'exec' ? execPath() : '/api/v1/namespaces/default/pods/demo/portforward';
  const c = await HostileClient.open(path, k.session === 'exec' ? V5 : TUNNEL);
  try {
    // The session runs: the exec session's initial frame arrived; the upstream connection exists.
    if (k.session === 'exec') await waitFor(() => c.frames().some((f) => f.opcode === WS_OP.BINARY), 10_000, () => 'no initial frame');
    await waitFor(() => fx.relayConnections() > 0, 10_000, () => 'no upstream connection');
    for (const b of k.send()) c.write(b);
    if (k.keepSending) await offer(c, 256 * MiB);
    const parts = [`close ${await c.closeCode()}`];
    if (k.session === 'exec') {
      const status = c.frames().some((f) => f.opcode === WS_OP.BINARY && f.payload[0] === 3 && f.payload.length > 1);
      parts.push(status ? 'a Status' : 'no Status');
    }
    parts.push((await c.droppedByProxy()) ? 'dropped by the proxy' : 'kept open');
    const upstreamClosed = await waitFor(() => fx.relayConnections() === 0, 10_000, () => '').then(
      () => true,
      () => false,
    );
    parts.push(upstreamClosed ? 'upstream closed' : `upstream open (${fx.relayConnections()} relay sockets)`);
    if (k.keepSending) parts.push(c.socket.bytesWritten < 64 * MiB ? 'reading stopped' : `read ${(c.socket.bytesWritten / MiB).toFixed(0)} MiB`);
    return parts.join(', ');
  } finally {
    c.destroy();
  }
}

/** Offer 256 KiB blocks of continuation frames while the socket takes them, up to `total` bytes (or its close). */
function offer(c: HostileClient, total: number): Promise<void> {
  const block = Buffer.concat(Array.from({ length: 4096 }, () => wsFrame(WS_OP.CONT, randomBytes(58), { fin: false })));
  const socket = c.socket;
  let offered = 0;
  return new Promise<void>((resolve) => {
    const pump = (): void => {
      while (!socket.destroyed && offered < total) {
        offered += block.length;
        if (!socket.write(block)) return void socket.once('drain', pump);
      }
      resolve();
    };
    socket.once('close', () => resolve());
    pump();
  });
}

describe('a WebSocket protocol error ends the session at once (translated exec, port-forward tunnel)', { timeout: 60_000 }, () => {
  it.each(ABORT_CASES.map((k, i) => [`${k.id} ${k.title}`, k, i] as const))('%s', async (_name, k, i) => {
    const observed = await runCase(k);
    // Every socket of the session is gone: the client's, the proxy's both, the relay's, the dev cluster's.
    await fx.expectNoLeak(10_000);
    await afterCase(fx, i, ABORT_CASES.length);
    expect(observed).toBe(k.expected);
  });
});
