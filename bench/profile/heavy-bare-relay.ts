/**
 * The floor experiment for the translation's CPU per byte: the bare Node relay (net + pipe(), as in
 * bench/bare-relay.ts) running inside a process that also runs a whole proxy (`serve`, idle), so
 * it pays the proxy's heap (~40 MiB live: fastify, client-node, prom-client, …) in every major GC
 * without doing any of the proxy's per-byte work.
 *
 *   node dist/bench/profile/heavy-bare-relay.js http://HOST:PORT
 *
 * Prints "bare relay listening on http://127.0.0.1:N" once both are up. Also `--cpu-prof`-able.
 */
import { connect, createServer } from 'node:net';
import { main } from '../../src/cli.js';

const upstream = new URL(process.argv[2] ?? 'http://127.0.0.1:1');
// The proxy itself, idle, in front of the same upstream (its listening line goes to stdout first).
void main(['serve', '--listen', '127.0.0.1:0', '--upstream', upstream.href.replace(/\/$/, '')]);
const server = createServer({ noDelay: true }, (client) => {
  const up = connect({ host: upstream.hostname, port: Number(upstream.port), noDelay: true });
  const close = (): void => void (client.destroy(), up.destroy());
  client.pipe(up).on('error', close).on('close', close);
  up.pipe(client).on('error', close).on('close', close);
});
setTimeout(() => {
  server.listen(0, '127.0.0.1', () => console.log(`bare relay listening on http://127.0.0.1:${(server.address() as { port: number }).port}`));
}, 2_000);
