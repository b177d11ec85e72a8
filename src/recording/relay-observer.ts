/**
 * The observer a passthrough relay is handed for a recorded session, chosen once by the protocol the
 * upgrade negotiated (the relays never look at the recording's kind or sink):
 *
 * | recording | client protocol | observer |
 * |---|---|---|
 * | exec/attach | SPDY/3.1 (`X-Stream-Protocol-Version` v1–v4) | {@link SpdyTap} |
 * | exec/attach | WebSocket (`Sec-WebSocket-Protocol` as answered, v1–v5) | {@link WebSocketTap} |
 * | portforward | SPDY/3.1 (`portforward.k8s.io`) | byte counts + a SpdyTap reading only the client's stream headers (`port`, the first value, as the kubelet reads it); headers it cannot read make the record `incomplete` |
 * | portforward | WebSocket `SPDY/3.1+portforward.k8s.io` (the tunnel, passed through) | byte counts + the client's WebSocket frames unwrapped into the SpdyTap above (kubectl's tunnel request has no `ports` query) |
 * | portforward | WebSocket v1–v4 / the tunnel unwrapped by the proxy | byte counts (ports from the `ports` query; the unwrapping tunnel feeds the SPDY bytes itself) |
 *
 * The translator does not use this: it calls the {@link SessionRecording} (a RemoteCommandObserver)
 * itself.
 */
import type { V1Status } from '../status.js';
import type { RelayedBytes, RelayObserver, TerminationPlan } from './observer.js';
import { PortForwardRecording } from './port-forward-recording.js';
import type { BegunRecording } from './session-recorder.js';
import { SpdyTap } from './spdy-tap.js';
import { WebSocketTap } from './ws-tap.js';
import { unmaskedCopy, WsFrameReader } from './ws-frame-reader.js';

/** What the upgrade negotiated. */
export interface NegotiatedProtocol {
  /** `spdy`: SPDY/3.1 upgrade; `websocket`: a WebSocket upgrade passed through. */
  kind: 'spdy' | 'websocket';
  /** SPDY: `X-Stream-Protocol-Version` of the 101; WebSocket: its `Sec-WebSocket-Protocol` ('' for none). */
  subprotocol: string;
}

/** The WebSocket subprotocol prefix of the port-forward tunnel (client-go `WebsocketsSPDYTunnelingPrefix`). */
const TUNNELING_PREFIX = 'spdy/3.1+';

/**
 * Port-forward over SPDY: counts both ways, reads the client's stream headers for ports. Over the
 * WebSocket tunnel (`websocket`), the client's frames are unwrapped first: their binary payloads, in
 * order, are the SPDY connection (read frame by frame as the kubelet's x/net-style reader would: a
 * continuation is data, a ping skipped, a close ends it).
 */
class SpdyPortForwardObserver implements RelayObserver {
  readonly #pf: PortForwardRecording;
  readonly #headers: SpdyTap;
  readonly #frames: WsFrameReader | undefined;
  #bytes: RelayedBytes | undefined;
  constructor(pf: PortForwardRecording, carrier: 'spdy' | 'websocket') {
    this.#pf = pf;
    this.#frames =
      carrier === 'websocket'
        ? new WsFrameReader(
            {
              data: (opcode, piece, mask, offset) => {
                if ((opcode === 0 || opcode === 2) && piece.length > 0) this.#headers.fromClient(unmaskedCopy(piece, mask, offset));
              },
              close: () => undefined,
            },
            'x-net-websocket-server',
          )
        : undefined;
    this.#headers = new SpdyTap(undefined, {
      protocol: '',
      onStreamHeaders: (h) => {
        const port = h.port?.[0];
        if (port !== undefined) pf.notePort(port);
      },
      // Later streams' ports would be missing: the record says incomplete.
      onUnreadable: (cause) => pf.unreadable('spdy', cause),
      // The record is written once the header blocks still being inflated were read.
      onClose: () => pf.close(this.#bytes),
    });
  }
  get fatal(): AbortSignal {
    return this.#pf.fatal;
  }
  fromClient(chunk: Buffer): void {
    this.#pf.fromClient(chunk);
    if (this.#frames) this.#frames.push(chunk);
    else this.#headers.fromClient(chunk);
  }
  fromUpstream(chunk: Buffer): void {
    this.#pf.fromUpstream(chunk);
  }
  close(bytes?: RelayedBytes): void {
    this.#bytes = bytes;
    this.#headers.close();
  }
  terminate(_status: V1Status): TerminationPlan | undefined {
    return undefined;
  }
}

/** The passthrough relay's observer for `recording` on `protocol`. */
export function relayObserverFor(recording: BegunRecording, protocol: NegotiatedProtocol): RelayObserver {
  if (recording instanceof PortForwardRecording) {
    if (protocol.kind === 'spdy') return new SpdyPortForwardObserver(recording, 'spdy');
    return protocol.subprotocol.toLowerCase().startsWith(TUNNELING_PREFIX) ? new SpdyPortForwardObserver(recording, 'websocket') : recording;
  }
  if (protocol.kind === 'spdy') return new SpdyTap(recording, { protocol: protocol.subprotocol });
  return new WebSocketTap(recording, { protocol: protocol.subprotocol, recordStdin: recording.records === 'full' });
}
