/**
 * The server role toward a SPDY/3.1 exec/attach client, played as a kubelet plays it (kubelet
 * `pkg/cri/streaming/remotecommand/httpstream.go`, apimachinery `httpstream.Handshake`), for the
 * reverse translator: negotiate `X-Stream-Protocol-Version` (v4…v1, the client's order decides), the
 * 101 head, the client's streams taken by their `streamtype` header and replied to at once, what
 * goes on the error stream (v4: one JSON Status; v1–v3: text on failure, nothing on success), and the
 * end of the session, which leaves the connection for the client to close (no truncation).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { headerValue, type SpdyConnection, type SpdyStream } from '../src/spdy/index.js';
import { encodeStatus, errorStatus, type V1Status } from '../src/status.js';
import {
  HEADER_ACCEPTED_PROTOCOL_VERSIONS,
  HEADER_PROTOCOL_VERSION,
  KUBELET_SPDY_REMOTE_COMMAND_PROTOCOLS,
  StreamProtocolV4Name,
  headerList,
  isUpgradeRequestFor,
  negotiateProtocol,
} from '../src/stream-protocol.js';
import { closeAfterAnswer } from '../src/wire/close-after-answer.js';
import { peerProgress, ProgressDeadline } from '../proxy/drain-close.js';
import { responseHead } from '../src/wire/http-response.js';
import type { RemoteCommandOptions } from '../src/wire/remote-command-options.js';
import { protocolHasResize, type RemoteCommandStreams } from './remote-command-streams.js';

/** What the reverse translator accepts from a SPDY client, best first: what a kubelet accepts. */
export const CLIENT_SPDY_PROTOCOLS: readonly string[] = KUBELET_SPDY_REMOTE_COMMAND_PROTOCOLS;

/** How long the client has to create every expected stream (the kubelet's `streamCreationTimeout`). */
export const STREAM_CREATION_TIMEOUT_MS = 30_000;

/** A refused SPDY handshake: the Status to answer, and extra header lines. */
export interface SpdyHandshakeRefusal {
  status: V1Status;
  headers: Record<string, readonly string[]>;
}

/**
 * `httpstream.Handshake` for `serverProtocols`: the first protocol of the client's lines (comma lists
 * split) that the server supports; 400 without the upgrade headers or a version line, 403 naming
 * what the server accepts when nothing matches. The answers are Statuses (kubectl prints their message).
 */
export function negotiateClientProtocol(req: IncomingMessage, serverProtocols: readonly string[]): { protocol: string } | SpdyHandshakeRefusal {
  if (!isUpgradeRequestFor(req.headers, 'SPDY/3.1')) {
    return { status: errorStatus(400, 'unable to upgrade: missing upgrade headers in request'), headers: {} };
  }
  const offered = headerList(req.headers, HEADER_PROTOCOL_VERSION);
  if (offered.length === 0) {
    return { status: errorStatus(400, `unable to upgrade: ${HEADER_PROTOCOL_VERSION} is required`), headers: {} };
  }
  const protocol = negotiateProtocol(offered, serverProtocols);
  if (protocol === undefined) {
    return {
      status: errorStatus(403, `unable to upgrade: unable to negotiate protocol: client supports [${offered.join(' ')}], server accepts [${serverProtocols.join(' ')}]`),
      headers: { [HEADER_ACCEPTED_PROTOCOL_VERSIONS]: serverProtocols },
    };
  }
  return { protocol };
}

/** Answer a refused handshake (the Status as JSON, extra lines), then close the connection. */
export function answerRefusal(socket: Duplex, refusal: SpdyHandshakeRefusal): void {
  const body = encodeStatus(refusal.status);
  if (!socket.destroyed) {
    socket.write(
      Buffer.concat([
        responseHead(refusal.status.code ?? 400, { 'Content-Type': 'application/json', ...refusal.headers, 'Content-Length': body.length, Connection: 'close' }),
        body,
      ]),
    );
  }
  closeAfterAnswer(socket);
}

/** The 101 that switches the client to SPDY/3.1 with `protocol`. */
export function switchingProtocolsHead(protocol: string): Buffer {
  return responseHead(101, { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', [HEADER_PROTOCOL_VERSION]: protocol }, 'Switching Protocols');
}

type StreamType = keyof RemoteCommandStreams;
const STREAM_TYPES: ReadonlySet<string> = new Set<StreamType>(['error', 'stdin', 'stdout', 'stderr', 'resize']);

/**
 * Take the client's streams as the kubelet does: every stream is replied to at once and known by
 * its `streamtype` alone; unknown types and repeats are drained and ignored. Resolves once the
 * expected set exists (error, plus stdin, stdout, stderr without tty, resize with tty on v3+);
 * rejects when it does not within `timeoutMs` (the kubelet then closes without a word) or the
 * connection closes first.
 */
export function acceptRemoteCommandStreams(
  connection: SpdyConnection,
  protocol: string,
  options: RemoteCommandOptions,
  timeoutMs: number = STREAM_CREATION_TIMEOUT_MS,
): Promise<RemoteCommandStreams> {
  const wanted = new Set<StreamType>(['error']);
  if (options.stdin) wanted.add('stdin');
  if (options.stdout) wanted.add('stdout');
  if (options.stderr && !options.tty) wanted.add('stderr');
  if (options.tty && protocolHasResize(protocol)) wanted.add('resize');
  return new Promise<RemoteCommandStreams>((resolve, reject) => {
    const streams: Partial<RemoteCommandStreams> = {};
    let have = 0;
    const done = (): void => {
      clearTimeout(timer);
      connection.off('stream', onStream);
      connection.off('close', onClose);
    };
    const onStream = (stream: SpdyStream): void => {
      // A client that leaves destroys its streams with an error; the session sees the connection close.
      stream.on('error', ignore);
      stream.reply();
      const type = headerValue(stream.headers, 'streamtype');
      if (type === undefined || !STREAM_TYPES.has(type) || !wanted.has(type as StreamType) || streams[type as StreamType] !== undefined) {
        stream.resume();
        return;
      }
      streams[type as StreamType] = stream;
      if (++have < wanted.size) return;
      done();
      resolve(streams as RemoteCommandStreams);
    };
    const onClose = (): void => {
      done();
      reject(new Error('client closed the connection'));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error('timed out waiting for client to create streams'));
    }, timeoutMs);
    connection.on('stream', onStream);
    connection.on('close', onClose);
  });
}

/**
 * What goes on the client's error stream for the outcome: v4 one JSON Status (`upstream`, the
 * upstream's own bytes, when it sent them), v1–v3 the Status's message on failure and nothing on
 * success (kubelet `v1…v3` `writeStatus`); undefined: nothing.
 */
export function errorStreamPayload(protocol: string, status: V1Status, upstream: Buffer | undefined): Buffer | undefined {
  if (protocol === StreamProtocolV4Name) return upstream !== undefined && upstream.length > 0 ? upstream : encodeStatus(status);
  if (status.status === 'Success') return undefined;
  return Buffer.from(status.message ?? 'error');
}

/**
 * End the client's session as a kubelet does, without truncating it: stdout and stderr get FIN
 * behind everything written to them, the outcome goes on the error stream ({@link errorStreamPayload}),
 * the write sides of stdin and resize end, then GOAWAY — and the connection stays open until the
 * CLIENT closes it. Ending it here (the kubelet's `conn.Close()`) would lose output: spdystream drops
 * every frame it has read but not yet delivered once it reads the end of the connection
 * (`Serve` → `closeChan` → the frame queues drained), and a slow reader leaves many (the truncation
 * Kubernetes 1.37 shows). client-go closes it once it has read the streams and the Status; a client
 * that never does is cut once it took nothing for `finishDeadlineMs` (a deadline without progress,
 * proxy/drain-close.ts: a slow reader is never cut while it reads). Without streams (the client never created them)
 * there is nothing to flush: the connection is closed at once. Resolves once it is closed.
 */
export async function finishClientSession(
  connection: SpdyConnection,
  clientSocket: Duplex,
  streams: RemoteCommandStreams | undefined,
  protocol: string,
  status: V1Status,
  upstreamStatus: Buffer | undefined,
  finishDeadlineMs: number,
): Promise<void> {
  if (connection.closed) return;
  if (streams === undefined) {
    await connection.close();
    connection.destroy();
    return;
  }
  streams.stdout?.end();
  streams.stderr?.end();
  const payload = errorStreamPayload(protocol, status, upstreamStatus);
  if (payload !== undefined && streams.error.writable) streams.error.write(payload);
  streams.error.end();
  streams.stdin?.end();
  streams.resize?.end();
  connection.goAway();
  if (connection.closed) return;
  const closed = new Promise<void>((resolve) => connection.once('close', resolve));
  const deadline = new ProgressDeadline(finishDeadlineMs, peerProgress(clientSocket), () => connection.destroy());
  await closed;
  deadline.stop();
}

/** The 'error' listener of client streams whose failure shows as the connection's close. */
function ignore(): void {}
