/**
 * The observer a passthrough relay is handed for a recorded session, chosen once by the protocol the
 * upgrade negotiated (the relays never look at the recording's kind or sink):
 *
 * | recording | client protocol | observer |
 * |---|---|---|
 * | exec/attach | SPDY/3.1 (`X-Stream-Protocol-Version` v1–v4) | {@link SpdyTap} |
 * | exec/attach | WebSocket (`Sec-WebSocket-Protocol` as answered, v1–v5) | {@link WebSocketTap} |
 * | portforward | SPDY/3.1 (`portforward.k8s.io`) | byte counts + a SpdyTap reading only the client's stream headers (`port`, the first value, as the kubelet reads it); headers it cannot read make the record `incomplete` |
 * | portforward | WebSocket / the tunnel | byte counts (ports from the `ports` query) |
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

/** What the upgrade negotiated. */
export interface NegotiatedProtocol {
  /** `spdy`: SPDY/3.1 upgrade; `websocket`: a WebSocket upgrade passed through. */
  kind: 'spdy' | 'websocket';
  /** SPDY: `X-Stream-Protocol-Version` of the 101; WebSocket: its `Sec-WebSocket-Protocol` ('' for none). */
  subprotocol: string;
}

/** Port-forward over SPDY: counts both ways, reads the client's stream headers for ports. */
class SpdyPortForwardObserver implements RelayObserver {
  readonly #pf: PortForwardRecording;
  readonly #headers: SpdyTap;
  #bytes: RelayedBytes | undefined;
  constructor(pf: PortForwardRecording) {
    this.#pf = pf;
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
    this.#headers.fromClient(chunk);
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
    return protocol.kind === 'spdy' ? new SpdyPortForwardObserver(recording) : recording;
  }
  if (protocol.kind === 'spdy') return new SpdyTap(recording, { protocol: protocol.subprotocol });
  return new WebSocketTap(recording, { protocol: protocol.subprotocol, recordStdin: recording.records === 'full' });
}
