/**
 * Stream protocol names and `X-Stream-Protocol-Version` negotiation, as apimachinery's
 * `httpstream.Handshake` does it: the server picks the first protocol in the CLIENT's order that it
 * supports; header lines may also carry comma-separated lists.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** Request/response header naming the stream protocol (one line per offered protocol). */
export const HEADER_PROTOCOL_VERSION = 'X-Stream-Protocol-Version';
/** Response header listing what the server accepts when negotiation fails (403). */
export const HEADER_ACCEPTED_PROTOCOL_VERSIONS = 'X-Accepted-Stream-Protocol-Versions';

/** remotecommand protocol names (apimachinery `pkg/util/remotecommand/constants.go`). */
export const StreamProtocolV1Name = 'channel.k8s.io';
export const StreamProtocolV2Name = 'v2.channel.k8s.io';
export const StreamProtocolV3Name = 'v3.channel.k8s.io';
export const StreamProtocolV4Name = 'v4.channel.k8s.io';
export const StreamProtocolV5Name = 'v5.channel.k8s.io';
/** The only SPDY port-forward protocol. */
export const PortForwardProtocolV1Name = 'portforward.k8s.io';

/** What a kubelet (and so the dev cluster) accepts for exec/attach over SPDY, best first. */
export const KUBELET_SPDY_REMOTE_COMMAND_PROTOCOLS: readonly string[] = [
  StreamProtocolV4Name,
  StreamProtocolV3Name,
  StreamProtocolV2Name,
  StreamProtocolV1Name,
];

/** Every value of a header, split on commas and trimmed, empty entries dropped. */
export function headerList(headers: IncomingHttpHeaders, name: string): string[] {
  const raw = headers[name.toLowerCase()];
  const lines = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  return lines.flatMap((l) => l.split(',')).map((s) => s.trim()).filter((s) => s !== '');
}

/** The first client protocol the server supports, or undefined. */
export function negotiateProtocol(clientProtocols: readonly string[], serverProtocols: readonly string[]): string | undefined {
  return clientProtocols.find((p) => serverProtocols.includes(p));
}

/** True when some `Connection` value contains `upgrade` and `Upgrade` names `protocol` (case-insensitive). */
export function isUpgradeRequestFor(headers: IncomingHttpHeaders, protocol: string): boolean {
  const connection = headerList(headers, 'connection').some((v) => v.toLowerCase() === 'upgrade');
  const upgrade = headerList(headers, 'upgrade').some((v) => v.toLowerCase() === protocol.toLowerCase());
  return connection && upgrade;
}
