/**
 * kube-apiserver's test for a WebSocket v5 request: `wsstream.IsWebSocketRequestWithStreamCloseProtocol`.
 * The decision of handlers/stream-path.ts reads it (with gate `TranslateStreamCloseWebsocketRequests`)
 * to tell v5 exec/attach apart from SPDY and the legacy WebSocket protocols (v1–v4).
 */
import { StreamProtocolV5Name } from '../src/stream-protocol.js';

/** The request header lines the predicate reads, as Node's `rawHeaders` (`[name, value, …]`). */
export type RawHeaderList = readonly string[];

function lines(raw: RawHeaderList, lowerName: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === lowerName) out.push(raw[i + 1]!);
  return out;
}

/**
 * `httpstream.IsUpgradeRequest` and `wsstream.IsWebSocketRequest`: some `Connection` line contains
 * `upgrade` (substring, any case) and the FIRST `Upgrade` line equals `websocket` ignoring case.
 */
export function isWebSocketRequest(raw: RawHeaderList): boolean {
  const connection = lines(raw, 'connection').some((v) => v.toLowerCase().includes('upgrade'));
  const upgrade = lines(raw, 'upgrade')[0];
  return connection && upgrade !== undefined && upgrade.trim().toLowerCase() === 'websocket';
}

/**
 * `IsWebSocketRequestWithStreamCloseProtocol`: a WebSocket request whose FIRST `Sec-WebSocket-Protocol`
 * line, split on commas and trimmed, contains exactly `v5.channel.k8s.io` (case-sensitive, as Go's
 * `==`). Later lines are not read (x/net/websocket reads only the first).
 */
export function isWebSocketRequestWithStreamCloseProtocol(raw: RawHeaderList): boolean {
  if (!isWebSocketRequest(raw)) return false;
  const first = lines(raw, 'sec-websocket-protocol')[0];
  if (first === undefined) return false;
  return first.split(',').some((p) => p.trim() === StreamProtocolV5Name);
}
