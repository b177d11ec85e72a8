/**
 * `kube_stream_proxy_tunnel_bytes_total{cluster,direction}` counts exactly the bytes that crossed
 * the tunnel: the agent relays each tunnel stream byte for byte to its upstream connection, so
 * what the proxy wrote into the stream (to_cluster) is what the upstream socket read, and what the
 * proxy read (from_cluster) is what the upstream socket wrote. The upstream here is a plain HTTP
 * server that records its sockets' `bytesRead`/`bytesWritten`; one agent process, proxy in-process.
 * A held-open response is counted while it runs (the counter moves at scrape, not only at close).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { deterministicBytes } from '../helpers/random-data.js';
import { sha256 } from '../helpers/hash.js';
import { counterValue } from '../helpers/metrics.js';
import { startTunnelFixture, type TunnelFixture } from './tunnel-fixture.js';

const MB = 1_000_000;
const UP_BYTES = 3 * MB + 17;
const DOWN_BYTES = 5 * MB + 3;
const METRIC = 'kube_stream_proxy_tunnel_bytes_total';

/** What one upstream connection carried, once it closed. */
interface ConnectionBytes {
  path: string;
  read: number;
  written: number;
}

describe('tunnel bytes metric', () => {
  let fx: TunnelFixture;
  let upstream: Server;
  const closed: ConnectionBytes[] = [];
  /** The `Connection` header each request reached the upstream with, by path. */
  const upstreamConnection = new Map<string, string | undefined>();
  const waiters: (() => void)[] = [];
  let release: (() => void) | undefined;
  const download = deterministicBytes(41, DOWN_BYTES);

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      const socket = req.socket as Socket & { ksPath?: string };
      socket.ksPath = req.url ?? '';
      upstreamConnection.set(req.url ?? '', req.headers.connection);
      if (req.url === '/api/hold') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.write(download.subarray(0, MB));
        release = () => res.end();
        return;
      }
      let got = 0;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => {
        got += c.length;
        chunks.push(c);
      });
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(DOWN_BYTES), 'x-got': String(got), 'x-sha256': sha256(Buffer.concat(chunks)) });
        res.end(download);
      });
    });
    upstream.keepAliveTimeout = 1;
    upstream.on('connection', (socket: Socket & { ksPath?: string }) => {
      socket.once('close', () => {
        closed.push({ path: socket.ksPath ?? '', read: socket.bytesRead, written: socket.bytesWritten });
        waiters.splice(0).forEach((w) => w());
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    fx = await startTunnelFixture({ one: ['alpha'] });
    const agent = fx.startAgent('one', { upstream: upstreamUrl });
    await agent.waitForOutput(/tunnel established/, 20_000);
  }, 60_000);

  afterAll(async () => {
    release?.();
    await fx?.close();
    await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
  });

  /** Resolve once an upstream connection for `path` has closed. */
  function upstreamClosed(path: string): Promise<ConnectionBytes> {
    return new Promise((resolve) => {
      const check = (): void => {
        const c = closed.find((x) => x.path === path);
        if (c) resolve(c);
        else waiters.push(check);
      };
      check();
    });
  }

  const bytes = async (): Promise<{ to: number; from: number }> => {
    const text = await fx.metrics();
    return { to: counterValue(text, METRIC, { cluster: 'one', direction: 'to_cluster' }), from: counterValue(text, METRIC, { cluster: 'one', direction: 'from_cluster' }) };
  };

  it('counts exactly the bytes the upstream read and wrote for a 3 MB upload and 5 MB download', async () => {
    const before = await bytes();
    const body = deterministicBytes(40, UP_BYTES);
    const url = new URL('/clusters/one/api/exact', fx.proxy.url);
    const res = await new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
      const req = request(url, { method: 'POST', headers: { 'content-type': 'application/octet-stream', 'content-length': String(UP_BYTES) } }, (r) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, headers: r.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(res.status).toBe(200);
    expect(res.headers['x-got']).toBe(String(UP_BYTES));
    expect(res.headers['x-sha256']).toBe(sha256(body));
    expect(sha256(res.body)).toBe(sha256(download));
    const conn = await upstreamClosed('/api/exact');
    const after = await bytes();
    // Request head + body one way, response head + body the other: not a byte more or less. The
    // metric counts what the proxy put into the tunnel; the agent reads the request head and sends
    // the apiserver `Connection: close` where the proxy wrote `Connection: keep-alive` (agent-request.ts
    // rewriteRequestHead), so the apiserver reads exactly 5 bytes fewer. The answer is relayed as is.
    expect(conn.read).toBeGreaterThan(UP_BYTES);
    expect(conn.written).toBeGreaterThan(DOWN_BYTES);
    expect(upstreamConnection.get('/api/exact')).toBe('close');
    expect(after.to - before.to).toBe(conn.read + ('keep-alive'.length - 'close'.length));
    expect(after.from - before.from).toBe(conn.written);
  }, 60_000);

  it('counts a response still streaming, before its tunnel stream closes', async () => {
    const before = await bytes();
    const url = new URL('/clusters/one/api/hold', fx.proxy.url);
    let received = 0;
    let firstMB!: () => void;
    const gotFirstMB = new Promise<void>((resolve) => (firstMB = resolve));
    const done = new Promise<number>((resolve, reject) => {
      const req = request(url, (r) => {
        r.on('data', (c: Buffer) => {
          received += c.length;
          if (received === MB) firstMB();
        });
        r.on('end', () => resolve(received));
      });
      req.on('error', reject);
      req.end();
    });
    await gotFirstMB;
    const mid = await bytes();
    expect(mid.from - before.from).toBeGreaterThan(MB);
    release!();
    expect(await done).toBe(MB);
    const conn = await upstreamClosed('/api/hold');
    const after = await bytes();
    expect(after.from - before.from).toBe(conn.written);
    expect(after.to - before.to).toBe(conn.read);
  }, 60_000);
});
