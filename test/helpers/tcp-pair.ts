/**
 * One loopback TCP connection for relay tests: the connecting socket and the accepted one, each
 * with an 'error' listener (a test's resets must not become uncaught errors). Its one-shot server is
 * added to `servers`, for the caller to close after the test.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

/** [the connecting socket, the accepted one]. */
export async function tcpPair(servers: Server[]): Promise<[Socket, Socket]> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<Socket>((r) => server.once('connection', r));
  const c = connect((server.address() as { port: number }).port, '127.0.0.1');
  await new Promise<void>((r) => c.once('connect', r));
  const s = await accepted;
  c.on('error', () => undefined);
  s.on('error', () => undefined);
  return [c, s];
}
