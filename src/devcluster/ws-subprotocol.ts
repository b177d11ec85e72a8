/**
 * WebSocket subprotocol negotiation as apimachinery `wsstream` does it: the first entry of the
 * client's list that the server supports wins; no header at all selects `""` (binary v1); a list
 * with no supported entry is refused (x/net/websocket answers 403 with an empty body).
 */
import type { IncomingMessage } from 'node:http';

/**
 * The chosen subprotocol: `''` when the client sent no `Sec-WebSocket-Protocol`, `null` when none
 * of its entries is in `supported`. Like x/net/websocket, only the first header line is read.
 */
export function negotiateSubprotocol(req: IncomingMessage, supported: readonly string[]): string | null {
  const lines = req.headersDistinct['sec-websocket-protocol'];
  const first = lines?.[0];
  if (first === undefined || first.trim() === '') return '';
  for (const entry of first.split(',')) {
    const p = entry.trim();
    if (p !== '' && supported.includes(p)) return p;
  }
  return null;
}
