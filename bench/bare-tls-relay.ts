/**
 * The bare Node TLS relay: the floor for any Node program that terminates TLS on a byte-relay path
 * (`tls.createServer` + `net.connect` + `pipe()`, nothing else; the `--cpu --tls` row `bare-tls`).
 * `node dist/bench/bare-tls-relay.js http://HOST:PORT CERT.pem KEY.pem` listens with TLS on a free
 * loopback port and prints "bare TLS relay listening on https://127.0.0.1:N"; each connection is
 * piped both ways, in plain TCP, to HOST:PORT.
 */
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { createServer } from 'node:tls';
const upstream = new URL(process.argv[2] ?? 'http://127.0.0.1:1');
const [certFile, keyFile] = [process.argv[3], process.argv[4]];
if (!certFile || !keyFile) throw new Error('usage: bare-tls-relay.js http://HOST:PORT CERT.pem KEY.pem');
const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile), noDelay: true }, (client) => {
  const up = connect({ host: upstream.hostname, port: Number(upstream.port), noDelay: true });
  const close = (): void => void (client.destroy(), up.destroy());
  client.pipe(up).on('error', close).on('close', close);
  up.pipe(client).on('error', close).on('close', close);
});
server.listen(0, '127.0.0.1', () => console.log(`bare TLS relay listening on https://127.0.0.1:${(server.address() as { port: number }).port}`));
