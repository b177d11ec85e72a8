/**
 * The splice(2) fast path of the passthrough (native/splice.c via proxy/splice-native.ts) against
 * real loopback TCP sockets: byte-exact both ways at once (including bytes Node had already
 * buffered before the switch and bytes written just before it), counted per direction, and
 * apiserver's teardown rule (either side's FIN or reset closes both). The same cases run on the
 * JavaScript path (`native: false`) and across the switch from JavaScript to splice(2) after
 * NATIVE_SPLICE_AFTER_BYTES, so the copy loops are held to one behaviour. Skipped for the
 * native path when the addon is not built (`npm run build:native`).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Server, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { spliceSockets } from '../../proxy/splice.js';
import { loadNativeSplice, nativeSpliceUnavailableReason } from '../../proxy/splice-native.js';
import { tcpPair } from '../helpers/tcp-pair.js';

interface Pair {
  /** Proxy's side of the client connection, and the client peer. */
  proxyClient: Socket;
  clientPeer: Socket;
  /** Proxy's side of the upstream connection, and the upstream peer. */
  proxyUpstream: Socket;
  upstreamPeer: Socket;
}

const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

async function pairs(): Promise<Pair> {
  const [clientPeer, proxyClient] = await tcpPair(servers);
  const [proxyUpstream, upstreamPeer] = await tcpPair(servers);
  return { proxyClient, clientPeer, proxyUpstream, upstreamPeer };
}

/** Collect everything `s` receives until it ends or closes. */
function collect(s: Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  s.on('data', (c: Buffer) => chunks.push(c));
  s.on('error', () => {});
  return new Promise((resolve) => s.once('close', () => resolve(Buffer.concat(chunks))));
}

function sha(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

/** Wait until `cond()` holds (polling the event loop, 5 s at most). */
async function until(cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const native = loadNativeSplice() !== undefined;
const modes = [
  { name: 'native from the start (splice(2))', native: true, after: 0, skip: !native },
  { name: 'JavaScript, then native after 1 MiB (the default)', native: true, after: undefined, skip: !native },
  { name: 'JavaScript', native: false, after: undefined, skip: false },
];

describe('native splice addon', () => {
  it('loads where it was built, or says why not', () => {
    if (native) expect(nativeSpliceUnavailableReason()).toBeUndefined();
    else expect(nativeSpliceUnavailableReason()).toMatch(/\S/);
  });
});

for (const mode of modes) {
  describe.skipIf(mode.skip)(`spliceSockets, ${mode.name}`, () => {
    it('relays both ways byte-exact, counting early bytes, and the client FIN closes both', async () => {
      const p = await pairs();
      // Bytes already in Node's buffer of the proxy's sockets before the switch.
      const earlyUp = randomBytes(3000);
      const earlyDown = randomBytes(5000);
      p.clientPeer.write(earlyUp);
      p.upstreamPeer.write(earlyDown);
      await until(() => p.proxyClient.readableLength === earlyUp.length && p.proxyUpstream.readableLength === earlyDown.length);
      // Bytes the proxy wrote just before (like the 101 head).
      const head = Buffer.from('HTTP/1.1 101 Switching Protocols\r\n\r\n');
      p.proxyClient.write(head);
      const splice = spliceSockets(p.proxyClient, p.proxyUpstream, { maxBytesPerSec: 0, native: mode.native, ...(mode.after !== undefined ? { nativeAfterBytes: mode.after } : {}) });
      expect(splice.mode).toBe(mode.native && mode.after === 0 ? 'native' : 'js');
      const atUpstream = collect(p.upstreamPeer);
      const atClient = collect(p.clientPeer);
      const up = randomBytes(6 * 1024 * 1024 + 17);
      const down = randomBytes(9 * 1024 * 1024 + 3);
      // Both directions at once, in uneven pieces.
      const send = async (s: Socket, data: Buffer): Promise<void> => {
        for (let at = 0; at < data.length; ) {
          const n = Math.min(data.length - at, 1 + Math.floor(Math.random() * 200_000));
          if (!s.write(data.subarray(at, at + n))) await new Promise((r) => s.once('drain', r));
          at += n;
        }
      };
      await Promise.all([send(p.clientPeer, up), send(p.upstreamPeer, down)]);
      // The upstream's bytes must all arrive before the client's FIN tears the splice down.
      await until(() => splice.bytes.toClient === earlyDown.length + down.length && splice.bytes.toUpstream === earlyUp.length + up.length);
      p.clientPeer.end();
      expect(await splice.done).toBe('client');
      const [gotUp, gotDown] = await Promise.all([atUpstream, atClient]);
      expect(gotUp.length).toBe(earlyUp.length + up.length);
      expect(sha(gotUp)).toBe(sha(Buffer.concat([earlyUp, up])));
      expect(gotDown.length).toBe(head.length + earlyDown.length + down.length);
      expect(sha(gotDown)).toBe(sha(Buffer.concat([head, earlyDown, down])));
      expect({ ...splice.bytes }).toEqual({ toUpstream: earlyUp.length + up.length, toClient: earlyDown.length + down.length });
      // 15 MiB moved: the default threshold switched to splice(2) on the way.
      expect(splice.mode).toBe(mode.native ? 'native' : 'js');
      expect(p.proxyClient.destroyed && p.proxyUpstream.destroyed).toBe(true);
    });

    it('delivers what the upstream sent before its FIN, then closes the client', async () => {
      const p = await pairs();
      const splice = spliceSockets(p.proxyClient, p.proxyUpstream, { maxBytesPerSec: 0, native: mode.native, ...(mode.after !== undefined ? { nativeAfterBytes: mode.after } : {}) });
      const atClient = collect(p.clientPeer);
      const tail = randomBytes(2 * 1024 * 1024);
      p.upstreamPeer.end(tail);
      expect(await splice.done).toBe('upstream');
      expect(sha(await atClient)).toBe(sha(tail));
    });

    it('an upstream reset closes the client connection', async () => {
      const p = await pairs();
      const splice = spliceSockets(p.proxyClient, p.proxyUpstream, { maxBytesPerSec: 0, native: mode.native, ...(mode.after !== undefined ? { nativeAfterBytes: mode.after } : {}) });
      const clientClosed = collect(p.clientPeer);
      p.clientPeer.write('x');
      await until(() => splice.bytes.toUpstream === 1);
      p.upstreamPeer.resetAndDestroy();
      expect(await splice.done).toBe('upstream');
      await clientClosed;
    });

    it('the proxy destroying a socket from outside ends the splice (no leaked connection)', async () => {
      const p = await pairs();
      const splice = spliceSockets(p.proxyClient, p.proxyUpstream, { maxBytesPerSec: 0, native: mode.native, ...(mode.after !== undefined ? { nativeAfterBytes: mode.after } : {}) });
      const upstreamClosed = collect(p.upstreamPeer);
      const clientClosed = collect(p.clientPeer);
      p.clientPeer.write('abc');
      await until(() => splice.bytes.toUpstream === 3);
      p.proxyClient.destroy();
      expect(await splice.done).toBe('client');
      expect((await upstreamClosed).toString()).toBe('abc');
      await clientClosed;
    });
  });
}
