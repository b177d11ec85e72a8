/**
 * Bearer tokens carried in the WebSocket subprotocol list, as browsers must send them (they cannot set
 * `Authorization` on a WebSocket): `Sec-WebSocket-Protocol: base64url.bearer.authorization.k8s.io.<token
 * in unpadded base64url>, v5.channel.k8s.io`. Read as kube-apiserver's `websocket.ProtocolAuthenticator`
 * reads it: at most one such entry, valid UTF-8, and at least one other protocol left to answer with.
 * Pure functions over Node's `rawHeaders`.
 */

/** The subprotocol prefix of a bearer token. */
export const BEARER_PROTOCOL_PREFIX = 'base64url.bearer.authorization.k8s.io.';

/** What the subprotocol lines hold. */
export interface WebSocketBearer {
  /** The decoded token, when one was sent. */
  token?: string;
  /** Every other protocol, in order (what the lines become once the token is taken out). */
  protocols: string[];
  /** Why the token entry is unusable (the request is then unauthenticated: 401). */
  error?: string;
}

/** Parse every `Sec-WebSocket-Protocol` line. */
export function websocketBearer(rawHeaders: readonly string[]): WebSocketBearer {
  const protocols: string[] = [];
  let token: string | undefined;
  let error: string | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== 'sec-websocket-protocol') continue;
    for (const entry of rawHeaders[i + 1]!.split(',')) {
      const p = entry.trim();
      if (!p.startsWith(BEARER_PROTOCOL_PREFIX)) {
        if (p !== '') protocols.push(p);
        continue;
      }
      if (token !== undefined || error !== undefined) {
        error = 'multiple base64.bearer.authorization tokens specified';
        continue;
      }
      const encoded = p.slice(BEARER_PROTOCOL_PREFIX.length);
      const bytes = /^[A-Za-z0-9_-]*$/.test(encoded) ? Buffer.from(encoded, 'base64url') : undefined;
      const text = bytes?.toString('utf8');
      if (bytes === undefined || text === undefined || !Buffer.from(text, 'utf8').equals(bytes)) error = 'invalid base64.bearer.authorization token';
      else if (text !== '') token = text;
    }
  }
  if (token !== undefined && protocols.length === 0) error = 'missing additional subprotocol';
  if (error !== undefined) return { protocols, error };
  return token !== undefined ? { token, protocols } : { protocols };
}

/** `rawHeaders` with the `Sec-WebSocket-Protocol` lines replaced by one line of `protocols`. */
export function withWebSocketProtocols(rawHeaders: readonly string[], protocols: readonly string[]): string[] {
  const out: string[] = [];
  let written = false;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === 'sec-websocket-protocol') {
      if (!written && protocols.length > 0) out.push(rawHeaders[i]!, protocols.join(', '));
      written = true;
    } else out.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return out;
}
