/**
 * One running reverse-translated session, once both handshakes are done: the SPDY client's streams
 * (this proxy in the kubelet's role) ⇄ the upstream's `v5.channel.k8s.io` channels (this proxy in
 * kubectl ≥ 1.30's role). The mirror of translator/translator-session.ts.
 *
 * - Until the client has created every expected stream (translator/reverse-spdy-server.ts) nothing is
 *   read from the upstream; what it sends meanwhile waits in the socket.
 * - SPDY stdin → channel 0 (the DATA of one client socket read as one message); stdin FIN → CLOSE
 *   `[255, 0]` on v5. v4 has no CLOSE: the EOF cannot be told and is dropped (the command keeps its
 *   stdin open until the session ends; `kubectl cp` into a pod needs v5). Resize JSON → channel 4
 *   (decoded case-insensitively, re-encoded as Go clients send it; bad input stops resize, as the kubelet).
 * - Channel 1/2 → SPDY stdout/stderr; channel 3 (one Status) is kept for the end; other channels are
 *   ignored (client-go drops unknown ids). A text message is a protocol error.
 * - Backpressure both ways: the upstream is not read while a client stream is full; the client's
 *   stdin and resize streams are not read while the upstream socket queues more than
 *   WS_WRITE_HIGH_WATER_BYTES. The bandwidth limit applies per direction on top.
 * - The end, as a kubelet ends a session but never truncated: once the upstream has closed (so
 *   everything it sent before its Status is written to the client's streams), the client's session is
 *   finished (`finishClientSession`: FINs, the outcome on the error stream, GOAWAY) and the connection
 *   is left for the client to close, however slowly it reads (bounded by the finish deadline).
 * - The session is cut short (the outcome is then our Status) when the client leaves, when no data
 *   moves for the idle timeout, when the upstream connection is lost or breaks the protocol, or on
 *   {@link ReverseSession.stop} (shutdown, an enforced recording that failed); the upstream then gets
 *   close 1000, which ends its session and command.
 */
import type { Duplex } from 'node:stream';
import type { RawData } from 'ws';
import { ReadThrottle } from '../proxy/bandwidth-limiter.js';
import { PieceBatch } from '../src/piece-batch.js';
import type { RemoteCommandObserver } from '../src/recording/observer.js';
import type { SpdyConnection, SpdyStream } from '../src/spdy/index.js';
import type { V1Status } from '../src/status.js';
import { StreamProtocolV5Name } from '../src/stream-protocol.js';
import { TerminalSizeDecoder } from '../src/terminal-size.js';
import { decodeErrorStream } from '../src/wire/error-stream.js';
import type { RemoteCommandOptions } from '../src/wire/remote-command-options.js';
import { Channel, encodeCloseMessage } from './channel-frame.js';
import { PauseGate } from './pause-gate.js';
import type { RemoteCommandStreams } from './remote-command-streams.js';
import { acceptRemoteCommandStreams, finishClientSession, STREAM_CREATION_TIMEOUT_MS } from './reverse-spdy-server.js';
import type { UpstreamWebSocket } from './reverse-websocket.js';
import { statusOf, statusOfError, type TranslatorResult } from './stream-translator.js';
import { MAX_ERROR_STREAM_BYTES, type SessionBytes, type SessionLogger } from './translator-session.js';
import { WS_WRITE_HIGH_WATER_BYTES } from './websocket.js';
import { abandonAfterReceiveError } from './ws-abort.js';
import { installFastReceiver, type InstalledFastReceiver } from './ws-internals.js';

/** Everything one session wires together. */
export interface ReverseSessionParts {
  /** The server-role SPDY connection to the client, and the socket under it. */
  connection: SpdyConnection;
  clientSocket: Duplex;
  /** The protocol negotiated with the client (v4…v1). */
  clientProtocol: string;
  /** The upstream WebSocket and the socket under it. */
  ws: UpstreamWebSocket;
  upstreamSocket: Duplex;
  /** The subprotocol the upstream chose (v5, or v4 without CLOSE). */
  upstreamProtocol: string;
  options: RemoteCommandOptions;
  /** Per-direction limit in bytes per second; 0 = unlimited. */
  maxBytesPerSec: number;
  /** No data either way for this long ends the session (0 = never). */
  idleTimeoutMs: number;
  /** WebSocket PING toward the upstream every this many ms (0 = none). */
  pingIntervalMs: number;
  /** How long the client may take nothing at the end before its connection is dropped (a deadline without progress). */
  finishDeadlineMs: number;
  /** Default STREAM_CREATION_TIMEOUT_MS. */
  streamCreationTimeoutMs?: number;
  log: SessionLogger;
  /** Session recording: told each stdin chunk, output chunk, terminal size and the outcome. */
  observer?: RemoteCommandObserver;
}

/** See the file comment. `done` resolves once both connections are closed. */
export class ReverseSession {
  readonly done: Promise<TranslatorResult>;
  readonly bytes: SessionBytes = { toUpstream: 0, toClient: 0 };
  readonly #p: ReverseSessionParts;
  /** Pauses the upstream: until the streams exist, while a client stream is full, for the limit. */
  readonly #upstreamGate: PauseGate;
  /** Pauses the client's stdin and resize streams (created with them). */
  #clientGate: PauseGate | undefined;
  #streams: RemoteCommandStreams | undefined;
  /** Upstream messages read before the streams existed. */
  #backlog: Buffer[][] = [];
  #status: Buffer[] = [];
  #statusBytes = 0;
  #statusSeen = false;
  /** Stdin of one client socket read, sent as one message. */
  readonly #stdin = new PieceBatch();
  #stdinQueued = false;
  #upstreamFull = false;
  /** Client output streams the upstream waits for (their writes returned false). */
  readonly #waiting = new Set<'stdout' | 'stderr'>();
  #sizes: TerminalSizeDecoder | undefined;
  readonly #throttles: ReadThrottle[] = [];
  #downThrottle: ReadThrottle | undefined;
  #upThrottle: ReadThrottle | undefined;
  #lastActivity = Date.now();
  #idleTimer: NodeJS.Timeout | undefined;
  #pingTimer: NodeJS.Timeout | undefined;
  /** The upstream's data frames parsed in front of ws's Receiver: no join copy (translator/ws-fast-receiver.ts). */
  readonly #fast: InstalledFastReceiver | undefined;
  #result: TranslatorResult | undefined;
  #resolve!: (r: TranslatorResult) => void;

  constructor(parts: ReverseSessionParts) {
    this.#p = parts;
    this.done = new Promise<TranslatorResult>((resolve) => (this.#resolve = resolve));
    const { ws, connection } = parts;
    this.#upstreamGate = new PauseGate([ws]);
    this.#upstreamGate.hold('streams');
    ws.on('message', this.#onMessage);
    this.#fast = installFastReceiver(ws, parts.upstreamSocket, { message: this.#onFastMessage }, noop, false);
    ws.on('close', this.#onUpstreamClose);
    ws.on('error', this.#onUpstreamError);
    connection.on('close', this.#onClientClose);
    if (parts.maxBytesPerSec > 0) {
      this.#downThrottle = new ReadThrottle(this.#upstreamGate.asTarget('throttle'), parts.maxBytesPerSec);
      this.#throttles.push(this.#downThrottle);
    }
    if (parts.pingIntervalMs > 0) {
      this.#pingTimer = setInterval(() => {
        if (ws.readyState === ws.OPEN) ws.ping();
      }, parts.pingIntervalMs).unref();
    }
    if (parts.idleTimeoutMs > 0) this.#armIdle(parts.idleTimeoutMs);
    acceptRemoteCommandStreams(connection, parts.clientProtocol, parts.options, parts.streamCreationTimeoutMs ?? STREAM_CREATION_TIMEOUT_MS).then(
      (streams) => this.#start(streams),
      (e: unknown) => this.#fail(e, connection.closed ? 'client_gone' : undefined),
    );
  }

  /** End the session now with `reason`'s Status on the error stream (no-op once it is ending). */
  stop(reason: Error): void {
    this.#fail(reason);
  }

  // ---- relay ----

  #start(streams: RemoteCommandStreams): void {
    if (this.#result !== undefined) return;
    this.#streams = streams;
    const { stdin, resize } = streams;
    this.#clientGate = new PauseGate([stdin, resize].filter((s): s is SpdyStream => s !== undefined));
    if (this.#p.maxBytesPerSec > 0) {
      this.#upThrottle = new ReadThrottle(this.#clientGate.asTarget('throttle'), this.#p.maxBytesPerSec);
      this.#throttles.push(this.#upThrottle);
    }
    stdin?.on('data', this.#onStdin);
    stdin?.on('end', this.#onStdinEnd);
    resize?.on('data', this.#onResize);
    // The client never writes on these; whatever it sends is drained, so it cannot stall the connection.
    for (const s of [streams.error, streams.stdout, streams.stderr]) s?.resume();
    for (const [stream, reason] of [[streams.stdout, 'stdout'], [streams.stderr, 'stderr']] as const) {
      // A stream the client reset never drains: stop waiting for it (what still comes for it is dropped).
      stream?.on('close', () => this.#writable(reason));
    }
    const backlog = this.#backlog;
    this.#backlog = [];
    for (const parts of backlog) this.#onData(parts);
    this.#upstreamGate.release('streams');
  }

  /** A message `ws` read itself: one the fast receiver does not take (its fallback; never a data frame it parsed). */
  readonly #onMessage = (data: RawData, isBinary: boolean): void => {
    if (this.#result !== undefined) return;
    if (!isBinary) {
      this.#p.ws.close(1003, 'only binary messages are supported');
      this.#fail(new Error('the upstream sent a text message; v5.channel.k8s.io carries binary messages only'));
      return;
    }
    this.#onFastMessage([data as Buffer], (data as Buffer).length);
  };

  /** One binary message as the pieces of the socket reads it lies in (`parts` joined is it). */
  readonly #onFastMessage = (parts: Buffer[], length: number): void => {
    if (this.#result !== undefined || length === 0) return;
    if (this.#streams === undefined) this.#backlog.push(parts);
    else this.#onData(parts);
  };

  /** A non-empty channel message: its first byte names the channel. */
  #onData(parts: Buffer[]): void {
    const streams = this.#streams!;
    const first = parts[0]!;
    const channel = first[0];
    // The payload: the pieces without the channel byte (the array is this message's own).
    if (first.length === 1) parts.shift();
    else parts[0] = first.subarray(1);
    switch (channel) {
      case Channel.Stdout:
        return this.#output(streams.stdout, 'stdout', parts);
      case Channel.Stderr:
        return this.#output(streams.stderr, 'stderr', parts);
      case Channel.Error:
        this.#statusSeen = true;
        for (const part of parts) {
          if (this.#statusBytes < MAX_ERROR_STREAM_BYTES) this.#status.push(part.subarray(0, MAX_ERROR_STREAM_BYTES - this.#statusBytes));
          this.#statusBytes += part.length;
        }
        return;
      default:
      // Channels 0 and 4 are the client's; unknown ids are dropped (client-go does the same).
    }
  }

  #output(stream: SpdyStream | undefined, name: 'stdout' | 'stderr', payload: Buffer[]): void {
    // The initial empty frame (and any empty message) carries nothing.
    if (stream === undefined || payload.length === 0) return;
    let length = 0;
    for (const part of payload) {
      length += part.length;
      this.#p.observer?.output(name, part);
    }
    this.#lastActivity = Date.now();
    this.bytes.toClient += length;
    this.#downThrottle?.account(length);
    if (stream.destroyed || stream.writableEnded) return;
    // One DATA frame of the pieces, not joined.
    if (!stream.writeDirect(payload.length === 1 ? payload[0]! : payload) && !this.#waiting.has(name)) {
      // Messages already parsed from the same read still come; wait once per stream.
      this.#waiting.add(name);
      this.#upstreamGate.hold(name);
      stream.whenWritable(() => this.#writable(name));
    }
  }

  #writable(name: 'stdout' | 'stderr'): void {
    this.#waiting.delete(name);
    this.#upstreamGate.release(name);
  }

  readonly #onStdin = (chunk: Buffer): void => {
    if (this.#result !== undefined || chunk.length === 0) return;
    this.#lastActivity = Date.now();
    this.bytes.toUpstream += chunk.length;
    // Recorded before it is masked in place on its way out.
    this.#p.observer?.stdin(chunk);
    this.#upThrottle?.account(chunk.length);
    this.#stdin.add(chunk);
    if (!this.#stdinQueued) {
      this.#stdinQueued = true;
      queueMicrotask(this.#flushStdin);
    }
  };

  /** The stdin of the client socket read just handled, as one message on channel 0. */
  readonly #flushStdin = (): void => {
    this.#stdinQueued = false;
    if (this.#stdin.bytes === 0 || this.#result !== undefined) return;
    this.#send(Channel.Stdin, this.#stdin.take());
  };

  readonly #onStdinEnd = (): void => {
    this.#flushStdin();
    if (this.#result !== undefined) return;
    if (this.#p.upstreamProtocol === StreamProtocolV5Name) this.#send(undefined, [encodeCloseMessage(Channel.Stdin)]);
    // v4 has no way to say it (see the file comment).
    else this.#p.log.debug({ protocol: this.#p.upstreamProtocol }, 'stdin EOF not signalled upstream: the protocol has no CLOSE');
  };

  readonly #onResize = (chunk: Buffer): void => {
    if (this.#result !== undefined) return;
    this.#lastActivity = Date.now();
    this.#flushStdin();
    try {
      for (const size of (this.#sizes ??= new TerminalSizeDecoder()).push(chunk)) {
        this.#p.observer?.resize(size.width, size.height);
        this.#send(Channel.Resize, [Buffer.from(JSON.stringify({ Width: size.width, Height: size.height }))]);
      }
    } catch (err) {
      this.#p.log.warn({ err }, 'dropping bad resize input');
      const resize = this.#streams!.resize!;
      resize.off('data', this.#onResize);
      resize.resume();
    }
  };

  /** One message upstream; the client's streams wait while the upstream socket is full. */
  #send(channel: number | undefined, parts: readonly Buffer[]): void {
    const { ws, upstreamSocket } = this.#p;
    ws.sendParts(channel, parts);
    if (this.#upstreamFull || upstreamSocket.writableLength < WS_WRITE_HIGH_WATER_BYTES) return;
    this.#upstreamFull = true;
    this.#clientGate?.hold('upstream');
    upstreamSocket.once('drain', this.#onUpstreamDrain);
  }

  readonly #onUpstreamDrain = (): void => {
    this.#upstreamFull = false;
    this.#clientGate?.release('upstream');
  };

  // ---- the end ----

  readonly #onUpstreamClose = (code: number): void => {
    if (this.#result !== undefined) return;
    if (this.#streams === undefined || (!this.#statusSeen && code !== 1000)) {
      this.#fail(new Error(`error reading from error stream: the upstream connection was closed (close code ${code})`));
      return;
    }
    // The upstream said all it will: its Status (none after a clean close is success, as client-go reads it).
    const raw = this.#status.length === 1 ? this.#status[0]! : Buffer.concat(this.#status);
    const decoded = decodeErrorStream(this.#p.upstreamProtocol, raw);
    this.#p.observer?.exit(decoded.kind === 'error' ? { error: decoded.message } : { exitCode: decoded.kind === 'exit' ? decoded.exitCode : 0 });
    const { status, code: counted } = statusOf(decoded);
    this.#end(status, counted, undefined, undefined, raw);
  };

  readonly #onUpstreamError = (err: Error): void => {
    if (this.#result !== undefined) return;
    // ws could not read the upstream (a bad frame, a message over the limit): it sent its close; read nothing more.
    this.#fast?.detach();
    abandonAfterReceiveError(this.#p.upstreamSocket);
    this.#p.log.warn({ err }, 'WebSocket protocol error from the upstream; session ended');
    this.#fail(err);
  };

  readonly #onClientClose = (): void => {
    if (this.#result === undefined) this.#fail(new Error('client closed the connection'), 'client_gone');
  };

  #fail(e: unknown, clientEnd?: TranslatorResult['clientEnd']): void {
    if (this.#result !== undefined) return;
    const { status, code } = statusOfError(e);
    this.#p.observer?.exit({ error: status.message ?? `failure (${code})` });
    this.#end(status, code, e, clientEnd, undefined);
  }

  #end(status: V1Status, code: number, error: unknown, clientEnd: TranslatorResult['clientEnd'], upstreamStatus: Buffer | undefined): void {
    const result: TranslatorResult = { code, status, bytes: this.bytes };
    if (error !== undefined) result.error = error;
    if (clientEnd !== undefined) result.clientEnd = clientEnd;
    this.#result = result;
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    if (this.#pingTimer) clearInterval(this.#pingTimer);
    for (const t of this.#throttles) t.dispose();
    this.#upstreamGate.dispose();
    const { ws, connection } = this.#p;
    ws.off('message', this.#onMessage);
    // What the client still sends is read and dropped, so its close (and its FIN) is seen.
    const streams = this.#streams;
    streams?.stdin?.off('data', this.#onStdin);
    streams?.resize?.off('data', this.#onResize);
    this.#clientGate?.open();
    const { clientProtocol, finishDeadlineMs, clientSocket } = this.#p;
    const clientEnded = finishClientSession(connection, clientSocket, this.#streams, clientProtocol, status, upstreamStatus, finishDeadlineMs);
    void Promise.all([clientEnded, this.#endUpstream()]).then(() => {
      this.#p.observer?.close(this.bytes);
      this.#resolve(result);
    });
    connection.off('close', this.#onClientClose);
  }

  /** Close the upstream WebSocket (1000: the session is over) unless it is closed; resolves once it is. */
  #endUpstream(): Promise<void> {
    const { ws } = this.#p;
    if (ws.readyState === ws.CLOSED) return Promise.resolve();
    return new Promise<void>((resolve) => {
      ws.once('close', () => resolve());
      // Read again, so its close frame is seen; ws destroys the socket after its close timeout.
      ws.resume();
      if (ws.readyState === ws.OPEN) ws.close(1000);
    });
  }

  /** One timer, re-checked on expiry, instead of a timer reset per chunk. */
  #armIdle(ms: number): void {
    this.#idleTimer = setTimeout(() => {
      const idleFor = Date.now() - this.#lastActivity;
      if (idleFor < this.#p.idleTimeoutMs) return this.#armIdle(this.#p.idleTimeoutMs - idleFor);
      this.#idleTimer = undefined;
      this.#p.log.warn({}, 'reverse-translated session idle timeout');
      this.#fail(new Error('stream idle timeout'), 'idle_timeout');
    }, ms).unref();
  }
}

/** The fast receiver's end-of-read hook: nothing to do per read here. */
function noop(): void {}
