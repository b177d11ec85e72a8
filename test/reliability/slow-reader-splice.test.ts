/**
 * Issue 32, item 7 ("never truncate") on the passthrough's copy loops (proxy/splice.ts: JavaScript,
 * splice(2) from the start, and JavaScript switching to splice(2)), over real loopback sockets:
 *
 * - the upstream writes 16 MiB (far more than the proxy's 1 MiB queue and the client side's socket
 *   buffers hold) and ends; the client reads its last 3 MiB slowly (twelve 300 ms pauses, each a
 *   fifth of this test's 1.5 s no-progress deadline, at least eight of them, 2.4 s, after the proxy
 *   read the upstream's end) and sends a few bytes at each pause, as kubectl's SPDY pings do: it gets
 *   every byte (sha256), and the proxy's own queue toward it stays bounded;
 * - a client that takes nothing for longer than the no-progress deadline (500 ms here) once the
 *   upstream ended is torn down (both sockets destroyed, the splice done) within 2.4 s of the end,
 *   and the proxy then holds what it could not deliver (so the old code's "drain forever" fails it,
 *   and a cut-off after any fixed time fails this test or the one above: before 2.4 s cuts the slow
 *   reader, after it misses this bound);
 * - an upstream that resets its connection after its last bytes (the client read nothing meanwhile):
 *   every byte the proxy's socket acknowledged still reaches the client.
 *
 * The three copy loops' cases run concurrently (each on its own sockets and splice; the slow readers
 * spend their time in pauses).
 */
import { createHash } from 'node:crypto';
import type { Server, Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_QUEUED_BYTES, spliceSockets, type SpliceOptions } from '../../proxy/splice.js';
import { loadNativeSplice, socketPeerState, socketUnsentBytes } from '../../proxy/splice-native.js';
import { SlowReader } from '../helpers/slow-reader.js';
import { tcpPair } from '../helpers/tcp-pair.js';

const MiB = 1024 * 1024;
/** The slow reader's pauses, and the deadline it runs against: each pause well inside it. */
const PAUSE_MS = 300;
const NO_PROGRESS_MS = 1_500;
/** Pauses of the slow reader that come after the upstream's end at least (2.4 s). */
const PAUSES_AFTER_END = 8;
/** A client that takes nothing: its deadline, and how soon after the end it must be torn down. */
const IDLE_NO_PROGRESS_MS = 500;
const TORN_DOWN_WITHIN_MS = 2_400;
// No fixed cut-off time passes both: shorter than the slow reader's time after the end cuts it off,
// longer misses the idle client's bound.
if (TORN_DOWN_WITHIN_MS > PAUSES_AFTER_END * PAUSE_MS) throw new Error('the idle bound must be below the slow reader\'s time after the end');
const servers: Server[] = [];
// After the file, not after each test: the cases run concurrently, and a one-shot server closed
// while another case is still connecting would fail it.
afterAll(() => {
  for (const s of servers.splice(0)) s.close();
});

/** The proxy's two sockets and their peers. */
async function sessionSockets(): Promise<{ proxyClient: Socket; clientPeer: Socket; proxyUpstream: Socket; upstreamPeer: Socket }> {
  const [clientPeer, proxyClient] = await tcpPair(servers);
  const [proxyUpstream, upstreamPeer] = await tcpPair(servers);
  return { proxyClient, clientPeer, proxyUpstream, upstreamPeer };
}

/** Poll `cond` every millisecond; fail after `ms`. */
async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** Deterministic 64 KiB chunks (a counter per chunk), so a lost or repeated chunk changes the digest. */
function chunk(i: number, size = 64 * 1024): Buffer {
  const b = Buffer.alloc(size, i & 0xff);
  b.writeUInt32BE(i, 0);
  return b;
}

const native = loadNativeSplice() !== undefined;
const modes: Array<{ name: string; options: Partial<SpliceOptions> }> = [
  { name: 'JavaScript', options: { native: false } },
  ...(native
    ? [
        { name: 'splice(2) from the start', options: { native: true, nativeAfterBytes: 0 } },
        { name: 'JavaScript, then splice(2) after 1 MiB', options: { native: true } },
      ]
    : []),
];

describe('never truncate: the passthrough copy loops', () => {
  it('measures what the kernel has not delivered yet (the addon is built here)', () => {
    expect(native, 'build/Release/ksp_splice.node (npm run build:native)').toBe(true);
  });

  describe.concurrent.each(modes)('$name', ({ options }) => {
    it('a slow, pinging reader gets all 16 MiB the upstream wrote before its FIN; the proxy queue stays bounded', async () => {
      const p = await sessionSockets();
      const splice = spliceSockets(p.proxyClient, p.proxyUpstream, { maxBytesPerSec: 0, noProgressMs: NO_PROGRESS_MS, ...options });
      const total = 16 * MiB;
      const sent = createHash('sha256');
      let written = 0;
      let i = 0;
      const pump = (): void => {
        while (written < total) {
          const c = chunk(i++);
          sent.update(c);
          written += c.length;
          if (!p.upstreamPeer.write(c)) return;
        }
        p.upstreamPeer.end();
      };
      p.upstreamPeer.on('drain', pump);
      pump();
      // The proxy ends the upstream (FIN) once it read the upstream's end: from then on only the
      // no-progress deadline keeps the client's side open.
      let receivedAtUpstreamEnd = -1;
      p.upstreamPeer.on('end', () => (receivedAtUpstreamEnd = reader.received));
      p.upstreamPeer.resume();
      const got = createHash('sha256');
      let maxQueued = 0;
      const reader = new SlowReader(p.clientPeer, {
        total,
        tail: 3 * MiB,
        step: 256 * 1024,
        // Each pause well inside the no-progress deadline: the deadline must never see a reader that
        // reads, however slowly, as stalled (and the pauses after the upstream's end, 2.4 s at least,
        // are more than the deadline: a fixed one would cut the reader off).
        pauseMs: PAUSE_MS,
        // kubectl pings (SPDY PING every 5 s, WebSocket pings): bytes the proxy must read, not leave unread.
        onPause: () => p.clientPeer.write('ping'),
      });
      p.clientPeer.on('data', (c: Buffer) => {
        got.update(c);
        maxQueued = Math.max(maxQueued, p.proxyClient.writableLength);
        reader.onData(c.length);
      });
      const closed = new Promise<void>((r) => p.clientPeer.once('close', () => r()));
      await closed;
      expect(reader.received).toBe(total);
      expect(got.digest('hex')).toBe(sent.digest('hex'));
      expect(reader.pauses).toBe(12);
      expect(await splice.done).toBe('upstream');
      // The upstream's end was read during the slow tail: at least 8 pauses (2.4 s, more than the
      // no-progress deadline) came after it.
      expect(receivedAtUpstreamEnd).toBeGreaterThanOrEqual(0);
      expect(total - receivedAtUpstreamEnd).toBeGreaterThanOrEqual(PAUSES_AFTER_END * 256 * 1024);
      // Backpressure, not buffering: what the proxy held for the client never passed its bound.
      expect(maxQueued).toBeLessThanOrEqual(MAX_QUEUED_BYTES + 64 * 1024);
    }, 60_000);

    it('a client that takes nothing for longer than the no-progress deadline after the upstream ended is torn down', async () => {
      const p = await sessionSockets();
      // Short: this client takes nothing at all, so the deadline's length proves nothing more here.
      const noProgressMs = IDLE_NO_PROGRESS_MS;
      const splice = spliceSockets(p.proxyClient, p.proxyUpstream, { maxBytesPerSec: 0, noProgressMs, ...options });
      p.clientPeer.pause(); // reads nothing, ever, but stays connected
      p.upstreamPeer.resume();
      // The upstream writes until the proxy holds 256 KiB it cannot hand to the client's full socket
      // (each chunk once the proxy has taken the one before), then ends.
      let sent = 0;
      const held = (): number => sent - splice.bytes.toClient + p.proxyClient.writableLength;
      for (let i = 0; held() < 256 * 1024; i++) {
        await new Promise<void>((r) => p.upstreamPeer.write(chunk(i), () => r()));
        sent += 64 * 1024;
        await until('the proxy to read the chunk', () => socketUnsentBytes(p.upstreamPeer) === 0 && p.proxyUpstream.readableLength === 0);
      }
      // From here on the client takes nothing: the no-progress deadline runs from the upstream's end.
      const endedAt = performance.now();
      p.upstreamPeer.end();
      const end = await Promise.race([splice.done, new Promise<'hung'>((r) => setTimeout(() => r('hung'), TORN_DOWN_WITHIN_MS))]);
      expect(end).toBe('upstream');
      expect(performance.now() - endedAt).toBeGreaterThanOrEqual(noProgressMs - 100);
      expect(p.proxyClient.destroyed && p.proxyUpstream.destroyed).toBe(true);
      p.clientPeer.destroy();
    }, 30_000);

    it('an upstream that resets after its last bytes: everything the proxy\'s socket acknowledged still reaches the client', async () => {
      const p = await sessionSockets();
      const splice = spliceSockets(p.proxyClient, p.proxyUpstream, { maxBytesPerSec: 0, ...options });
      p.clientPeer.pause(); // until the reset: the proxy fills up
      // Chunks until the proxy's socket advertises no more room (the proxy holds all it can), eight
      // at a time (512 KiB: the proxy's kernel acknowledges them at once, where a lone 64 KiB segment
      // waits for its delayed ACK), each batch acknowledged before the next; then the upstream resets
      // its connection.
      const sent = createHash('sha256');
      const data: Buffer[] = [];
      for (let i = 0; i < 1024; ) {
        const batch = Array.from({ length: 8 }, () => chunk(i++));
        data.push(...batch);
        for (const c of batch.slice(0, -1)) p.upstreamPeer.write(c);
        await new Promise<void>((r) => p.upstreamPeer.write(batch.at(-1)!, () => r()));
        await until('the proxy to acknowledge the batch or close its window', () => {
          const s = socketPeerState(p.upstreamPeer)!;
          return s.unsent === 0 || s.window === 0;
        });
        // A window closed before 2 MiB is the proxy not having read yet (its event loop busy with
        // the concurrent cases), not a proxy full of what it cannot deliver: keep writing.
        const s = socketPeerState(p.upstreamPeer)!;
        if (s.window === 0 && data.length * 64 * 1024 - s.unsent > 2 * MiB) break;
      }
      const acknowledged = data.length * 64 * 1024 - socketPeerState(p.upstreamPeer)!.unsent;
      expect(acknowledged).toBeGreaterThan(2 * MiB);
      p.upstreamPeer.resetAndDestroy();
      const got = createHash('sha256');
      let received = 0;
      p.clientPeer.on('data', (c: Buffer) => {
        got.update(c);
        received += c.length;
      });
      const closed = new Promise<void>((r) => p.clientPeer.once('close', () => r()));
      p.clientPeer.resume();
      await closed;
      expect(received).toBe(acknowledged);
      sent.update(Buffer.concat(data).subarray(0, acknowledged));
      expect(got.digest('hex')).toBe(sent.digest('hex'));
      expect(await splice.done).toBe('upstream');
    }, 60_000);
  });
});
