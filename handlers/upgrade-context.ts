/**
 * The raw socket and early bytes of an upgrade request, kept beside the IncomingMessage while the
 * request goes through Fastify's router (Node delivers upgrades outside it, on 'upgrade').
 * A WeakMap, not a symbol on the request: nothing outlives the request.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

/** What Node handed to the 'upgrade' listener besides the request. */
export interface UpgradeContext {
  /** The client connection; only the route handler that hijacks the reply may use it. */
  socket: Duplex;
  /** Bytes the client sent after the request head (may be empty). */
  head: Buffer;
}

const contexts = new WeakMap<IncomingMessage, UpgradeContext>();

/** Remember the socket and head bytes of an upgrade request. */
export function rememberUpgrade(req: IncomingMessage, context: UpgradeContext): void {
  contexts.set(req, context);
}

/** The upgrade context of `req`, or undefined for a plain request. */
export function upgradeOf(req: IncomingMessage): UpgradeContext | undefined {
  return contexts.get(req);
}
