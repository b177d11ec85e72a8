/**
 * The bare Node relay: the floor for any Node program on a byte-relay path (`net` + `pipe()`, nothing
 * else). `node dist/bench/bare-relay.js http://HOST:PORT` listens on a free loopback port and prints
 * "bare relay listening on http://127.0.0.1:N"; each connection is piped both ways to HOST:PORT.
 */
import { connect, createServer } from 'node:net';
const upstream = new URL(process.argv[2] ?? 'http://127.0.0.1:1');
const server = createServer({ noDelay: true }, (client) => {
  const up = connect({ host: upstream.hostname, port: Number(upstream.port), noDelay: true });
  const close = (): void => void (client.destroy(), up.destroy());
  client.pipe(up).on('error', close).on('close', close);
  up.pipe(client).on('error', close).on('close', close);
});
server.listen(0, '127.0.0.1', () => console.log(`bare relay listening on http://127.0.0.1:${(server.address() as { port: number }).port}`));
