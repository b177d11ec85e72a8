import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { RstStatus, SpdyStreamResetError, type SpdyConnection, type SpdyStream } from '../../../src/spdy/index.js';
import { connectionPair, digest, pattern, sha } from './helpers.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function setup(extra: Parameters<typeof connectionPair>[0] = {}) {
  const p = await connectionPair(extra);
  cleanups.push(() => p.sockets.close());
  return p;
}

/** Server echo-less exchange: the server replies with empty headers, reads all, then writes `down`. */
function serveExchange(server: SpdyConnection, down: (s: SpdyStream) => Buffer) {
  const received: Promise<{ bytes: number; sha256: string }>[] = [];
  server.on('stream', (s: SpdyStream) => {
    s.reply();
    received.push(digest(s));
    s.end(down(s));
  });
  return received;
}

describe('SpdyConnection over loopback TCP', { timeout: 20_000 }, () => {
  it('opens a stream, gets an empty SYN_REPLY, sees the SYN_STREAM headers', async () => {
    const { client, server } = await setup();
    const seen = once(server, 'stream') as Promise<[SpdyStream]>;
    const opening = client.openStream({ streamType: 'error', port: 8080 });
    const [s] = await seen;
    expect(s.id).toBe(1);
    expect(s.headers).toEqual({ streamtype: ['error'], port: ['8080'] });
    s.reply();
    const c = await opening;
    expect(c.id).toBe(1);
    expect(c.replyHeaders).toEqual({});
    const second = client.openStream({ streamType: 'stdout' });
    const [s2] = (await once(server, 'stream')) as [SpdyStream];
    expect(s2.id).toBe(3);
    s2.reply({ ':status': 200 });
    expect((await second).replyHeaders).toEqual({ ':status': ['200'] });
  });

  it('keeps an outgoing stream\'s headers as given until read, and shares one frozen empty SYN_REPLY', async () => {
    const { client, server } = await setup();
    server.on('stream', (s: SpdyStream) => s.reply());
    const given = Object.freeze({ StreamType: 'stdin', port: 8080 });
    const [a, b] = await Promise.all([client.openStream(given), client.openStream({ streamtype: 'stdout' })]);
    // Normalized on first read (lower-case names, string arrays), the same object afterwards.
    expect(a.headers).toEqual({ streamtype: ['stdin'], port: ['8080'] });
    expect(a.headers).toBe(a.headers);
    expect(b.headers).toEqual({ streamtype: ['stdout'] });
    // Empty SYN_REPLY blocks (what a kubelet sends): one shared object, which cannot be changed.
    expect(a.replyHeaders).toEqual({});
    expect(a.replyHeaders).toBe(b.replyHeaders);
    expect(Object.isFrozen(a.replyHeaders)).toBe(true);
  });

  it.each([65_535, 65_536, 65_537, 50 * 1024 * 1024])('moves %i bytes both ways byte-exact', async (n) => {
    const { client, server } = await setup();
    const up = n > 1e6 ? randomBytes(n) : pattern(n, n);
    const down = n > 1e6 ? randomBytes(n) : pattern(n, n + 1);
    const received = serveExchange(server, () => down);
    const s = await client.openStream({ streamtype: 'stdin' });
    const back = digest(s);
    s.end(up);
    expect(await back).toEqual({ bytes: n, sha256: sha(down) });
    expect(await received[0]).toEqual({ bytes: n, sha256: sha(up) });
  });

  it('half-closes each direction independently', async () => {
    const { client, server } = await setup();
    const got = once(server, 'stream') as Promise<[SpdyStream]>;
    const opening = client.openStream({ streamtype: 'stdin' });
    const [s] = await got;
    s.reply();
    const c = await opening;
    const closed = Promise.all([once(c, 'close'), once(s, 'close')]);
    c.end('from client');
    const serverRead = digest(s);
    expect((await serverRead).bytes).toBe(11); // client FIN seen, server side still writable
    s.write('after client fin');
    s.end(' bye');
    const clientRead = await digest(c);
    expect(clientRead).toEqual({ bytes: 20, sha256: sha(Buffer.from('after client fin bye')) });
    await closed; // both sides finished: streams close and are forgotten
  });

  it('RST_STREAM CANCEL: emits reset, closes without error', async () => {
    const { client, server } = await setup();
    server.on('stream', (s: SpdyStream) => {
      s.reply();
      s.write('x');
      s.once('data', () => s.reset());
    });
    const c = await client.openStream({ streamtype: 'data' });
    const errors: Error[] = [];
    c.on('error', (e) => errors.push(e));
    const reset = once(c, 'reset');
    const closed = once(c, 'close');
    c.resume();
    c.write('go');
    const [status] = (await reset) as [number];
    expect(status).toBe(RstStatus.CANCEL);
    await closed;
    expect(errors).toEqual([]);
  });

  it('RST_STREAM CANCEL after DATA (the kubelet\'s way to end stdout) keeps every byte, then ends', async () => {
    const { client, server } = await setup();
    // Less than the reader's buffer, so all of it can sit unread on our side when the RST arrives.
    const big = randomBytes(512 * 1024);
    server.on('stream', (s: SpdyStream) => {
      s.reply();
      // No FIN: DATA, then RST_STREAM(CANCEL) once it is all handed to the socket.
      s.write(big, () => s.reset());
    });
    const c = await client.openStream({ streamtype: 'stdout' });
    const errors: Error[] = [];
    c.on('error', (e) => errors.push(e));
    await once(c, 'reset'); // arrives while the data is still unread
    expect(await digest(c)).toEqual({ bytes: big.length, sha256: sha(big) });
    c.write('ignored after the peer reset'); // dropped, no error
    expect(errors).toEqual([]);
  });

  it('RST_STREAM with another status destroys with SpdyStreamResetError', async () => {
    const { client, server } = await setup();
    server.on('stream', (s: SpdyStream) => {
      s.reply();
      s.once('data', () => s.reset(RstStatus.INTERNAL_ERROR));
    });
    const c = await client.openStream({ streamtype: 'data' });
    const failed = once(c, 'error');
    c.write('go');
    const [err] = (await failed) as [SpdyStreamResetError];
    expect(err).toBeInstanceOf(SpdyStreamResetError);
    expect(err.status).toBe(RstStatus.INTERNAL_ERROR);
  });

  it('openStream rejects when the peer resets instead of replying, and on timeout', async () => {
    const { client, server } = await setup();
    let n = 0;
    server.on('stream', (s: SpdyStream) => {
      if (n++ === 0) s.reset(RstStatus.REFUSED_STREAM);
    });
    await expect(client.openStream({ a: '1' })).rejects.toThrow(/RST_STREAM status 3/);
    await expect(client.openStream({ a: '2' }, { timeoutMs: 50 })).rejects.toThrow(/no SYN_REPLY within 50 ms/);
  });

  it('ping measures RTT in both roles', async () => {
    const { client, server } = await setup();
    const rtt = await client.ping();
    expect(rtt).toBeGreaterThanOrEqual(0);
    expect(rtt).toBeLessThan(5000);
    expect(await server.ping()).toBeGreaterThanOrEqual(0);
  });

  it('pingIntervalMs sends periodic pings that the peer echoes', async () => {
    const { client } = await setup({ pingIntervalMs: 10 });
    // Wait for an echo of an interval ping: our next explicit ping id proves earlier ones were sent.
    const rtt = await client.ping();
    expect(rtt).toBeGreaterThanOrEqual(0);
  });

  it('GOAWAY: peer sees it, no new streams; close() ends the socket gracefully', async () => {
    const { client, server } = await setup();
    const received = serveExchange(server, () => Buffer.from('tail'));
    const s = await client.openStream({ streamtype: 'stdout' });
    const tail = digest(s);
    s.end();
    expect((await tail).bytes).toBe(4);
    await received[0];
    const goaway = once(client, 'goaway');
    const clientClosed = once(client, 'close');
    await server.close();
    expect(await goaway).toEqual([1, 0]);
    await expect(client.openStream({ a: 'b' })).rejects.toThrow(/GOAWAY|closed/);
    await clientClosed;
    expect(client.closed).toBe(true);
  });

  it('data written right before close() is not lost', async () => {
    const { client, server } = await setup();
    const big = randomBytes(8 * 1024 * 1024);
    server.on('stream', (s: SpdyStream) => {
      s.reply();
      s.end(big, () => void server.close());
    });
    const c = await client.openStream({ streamtype: 'stdout' });
    c.end();
    expect(await digest(c)).toEqual({ bytes: big.length, sha256: sha(big) });
  });

  it('close() right after end() waits for the stream\'s buffered DATA (no truncated stdout)', async () => {
    const { client, server } = await setup();
    const big = randomBytes(16 * 1024 * 1024);
    server.on('stream', (s: SpdyStream) => {
      s.reply();
      // 1 MiB writes queue up inside the stream (its highWaterMark) while the socket is full.
      for (let off = 0; off < big.length; off += 1024 * 1024) s.write(big.subarray(off, off + 1024 * 1024));
      s.end();
      void server.close(); // no waiting for 'finish': close() itself must not overtake the DATA
    });
    const c = await client.openStream({ streamtype: 'stdout' });
    c.end();
    expect(await digest(c)).toEqual({ bytes: big.length, sha256: sha(big) });
  });

  it('200 concurrent streams', async () => {
    const { client, server } = await setup();
    server.on('stream', (s: SpdyStream) => {
      s.reply();
      s.pipe(s); // echo
    });
    const results = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const s = await client.openStream({ streamtype: 'data', requestid: i });
        const data = pattern(10_000 + i, i + 1);
        const back = digest(s);
        s.end(data);
        return (await back).sha256 === sha(data);
      }),
    );
    expect(results.every(Boolean)).toBe(true);
  });

  it('socket loss fails unfinished streams with an error and emits close', async () => {
    const { client, server, sockets } = await setup();
    const got = once(server, 'stream') as Promise<[SpdyStream]>;
    const opening = client.openStream({ streamtype: 'stdin' });
    const [s] = await got;
    s.reply();
    const c = await opening;
    const serverErr = once(s, 'error');
    const clientErr = once(c, 'error');
    const closed = Promise.all([once(server, 'close'), once(client, 'close')]);
    sockets.client.resetAndDestroy();
    await closed;
    expect(((await serverErr)[0] as Error).message).toMatch(/SPDY connection/);
    expect(((await clientErr)[0] as Error).message).toMatch(/SPDY connection/);
    expect(server.closed && client.closed).toBe(true);
  });
});
