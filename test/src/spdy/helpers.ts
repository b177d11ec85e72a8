/** Test helpers: loopback TCP pairs and byte collection. */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import type { Readable } from 'node:stream';
import { SpdyConnection, type SpdyConnectionOptions } from '../../../src/spdy/index.js';

/** A connected pair of loopback sockets. */
export async function socketPair(): Promise<{ client: net.Socket; server: net.Socket; close(): void }> {
  const srv = net.createServer({ allowHalfOpen: true });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as net.AddressInfo;
  const accepted = once(srv, 'connection') as Promise<[net.Socket]>;
  const client = net.connect(port, '127.0.0.1');
  const [[server]] = await Promise.all([accepted, once(client, 'connect')]);
  srv.close();
  return {
    client,
    server,
    close: () => {
      client.destroy();
      server.destroy();
    },
  };
}

/** Captured log lines. */
export interface Logs {
  warn: string[];
  logger: { warn(m: string): void; debug(m: string): void };
}

/** A logger that records warn lines. */
export function captureLogs(): Logs {
  const warn: string[] = [];
  return { warn, logger: { warn: (m) => void warn.push(m), debug: () => {} } };
}

/** Client and server SpdyConnections over loopback TCP. */
export async function connectionPair(
  extra: Partial<SpdyConnectionOptions> = {},
): Promise<{ client: SpdyConnection; server: SpdyConnection; serverLogs: Logs; clientLogs: Logs; sockets: Awaited<ReturnType<typeof socketPair>> }> {
  const sockets = await socketPair();
  const serverLogs = captureLogs();
  const clientLogs = captureLogs();
  const client = new SpdyConnection(sockets.client, { ...extra, isServer: false, logger: clientLogs.logger });
  const server = new SpdyConnection(sockets.server, { ...extra, isServer: true, logger: serverLogs.logger });
  return { client, server, serverLogs, clientLogs, sockets };
}

/** Reads a stream to its end; resolves with byte count and sha256. */
export function digest(r: Readable): Promise<{ bytes: number; sha256: string }> {
  const h = createHash('sha256');
  let bytes = 0;
  r.on('data', (c: Buffer) => {
    bytes += c.length;
    h.update(c);
  });
  return new Promise((resolve, reject) => {
    r.once('end', () => resolve({ bytes, sha256: h.digest('hex') }));
    r.once('error', reject);
    r.once('close', () => {
      if (!r.readableEnded) reject(new Error('stream closed before end'));
    });
  });
}

/** sha256 of a buffer. */
export function sha(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

/** Deterministic pseudo-random bytes. */
export function pattern(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}
