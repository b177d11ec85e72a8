/**
 * Leaving request bodies unread in a proxying scope, so they can be streamed upstream as they arrive
 * (and so an upgrade request never waits for a body that is not coming).
 */
import type { FastifyInstance } from 'fastify';

/** Replace the scope's body parsers with one that accepts every content type and reads nothing. */
export function leaveBodiesUnread(scope: FastifyInstance): void {
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', (_request, _payload, done) => done(null));
}
