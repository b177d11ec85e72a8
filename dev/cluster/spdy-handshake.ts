/**
 * The server side of the SPDY/3.1 upgrade as a kubelet answers it (apimachinery
 * `httpstream/spdy/upgrade.go` + `httpstream.Handshake`): check the upgrade headers, negotiate
 * `X-Stream-Protocol-Version`, write the 101 and start a server-role SPDY connection on the socket.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { writeRawResponse, responseHead } from '../../src/wire/http-response.js';
import {
  HEADER_ACCEPTED_PROTOCOL_VERSIONS,
  HEADER_PROTOCOL_VERSION,
  headerList,
  isUpgradeRequestFor,
  negotiateProtocol,
} from '../../src/stream-protocol.js';
import { SpdyConnection } from '../../src/spdy/index.js';

/** A successful upgrade: the connection and the protocol both sides agreed on. */
export interface AcceptedSpdyUpgrade {
  connection: SpdyConnection;
  protocol: string;
}

/** Logger shape shared with the SPDY layer. */
export interface HandshakeLogger {
  warn(msg: string, ...args: unknown[]): void;
}

/**
 * Answer a SPDY/3.1 upgrade request. On refusal the socket gets the kubelet's plain-text answer
 * (400 missing headers or version, 403 with `X-Accepted-Stream-Protocol-Versions` when nothing
 * matches) and undefined is returned.
 */
export function acceptSpdyUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  serverProtocols: readonly string[],
  logger?: HandshakeLogger,
): AcceptedSpdyUpgrade | undefined {
  if (!isUpgradeRequestFor(req.headers, 'SPDY/3.1')) {
    writeRawResponse(
      socket,
      400,
      { 'Content-Type': 'text/plain; charset=utf-8' },
      `unable to upgrade: missing upgrade headers in request: ${JSON.stringify(req.headers)}\n`,
    );
    return undefined;
  }
  const clientProtocols = headerList(req.headers, HEADER_PROTOCOL_VERSION);
  if (clientProtocols.length === 0) {
    writeRawResponse(
      socket,
      400,
      { 'Content-Type': 'text/plain; charset=utf-8' },
      `unable to upgrade: ${HEADER_PROTOCOL_VERSION} is required\n`,
    );
    return undefined;
  }
  const protocol = negotiateProtocol(clientProtocols, serverProtocols);
  if (protocol === undefined) {
    writeRawResponse(
      socket,
      403,
      { 'Content-Type': 'text/plain; charset=utf-8', [HEADER_ACCEPTED_PROTOCOL_VERSIONS]: serverProtocols },
      `unable to upgrade: unable to negotiate protocol: client supports [${clientProtocols.join(' ')}], ` +
        `server accepts [${serverProtocols.join(' ')}]\n`,
    );
    return undefined;
  }
  socket.write(
    responseHead(101, { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', [HEADER_PROTOCOL_VERSION]: protocol }, 'Switching Protocols'),
  );
  const connection = new SpdyConnection(socket, { isServer: true, head, logger });
  return { connection, protocol };
}
