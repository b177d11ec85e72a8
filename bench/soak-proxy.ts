/**
 * The proxy for `npm run soak` (bench/soak.ts): `serve` in front of `argv[2]` in its own process,
 * started with `--expose-gc` and an IPC channel. It prints its URL, and answers each `'measure'`
 * message with its heap in use after two full collections, its RSS and its open file descriptors.
 */
import { readdirSync } from 'node:fs';
import { resolveConfig } from '../src/config.js';
import { startServer } from '../src/server.js';

/** What the proxy reports. */
export interface ProxyMeasure {
  heapUsed: number;
  rss: number;
  fds: number;
}

const upstream = process.argv[2];
if (!upstream) throw new Error('usage: soak-proxy.js UPSTREAM_URL');
const server = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream }));
process.on('message', (msg: unknown) => {
  if (msg === 'measure') {
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    gc?.();
    const m: ProxyMeasure = { heapUsed: process.memoryUsage().heapUsed, rss: process.memoryUsage().rss, fds: readdirSync('/proc/self/fd').length };
    process.send?.(m);
  } else if (msg === 'close') {
    void server.close().then(() => process.exit(0));
  }
});
process.send?.({ url: server.url });
