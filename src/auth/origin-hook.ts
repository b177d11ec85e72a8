/**
 * The Fastify `onRequest` hook enforcing the WebSocket Origin policy's explicit list
 * (`websocket-origin.ts`, rule 2). It is added before the authentication hook, so an unlisted origin
 * costs no TokenReview and reaches no upstream; upgrades are routed through Fastify (`src/server.ts`),
 * so it sees every one of them. The client-certificate rule needs the authenticated caller and is
 * applied by the authentication hook (`request-auth.ts`).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendStatus } from '../wire/status-reply.js';
import { checkWebSocketOrigin, type WebSocketOriginPolicy } from './websocket-origin.js';

/** Build the hook: a refused WebSocket upgrade gets the policy's 403 Status. */
export function createWebSocketOriginHook(policy: WebSocketOriginPolicy): (request: FastifyRequest, res: FastifyReply) => Promise<FastifyReply | undefined> {
  return async (request, res) => {
    const refusal = checkWebSocketOrigin(request.raw, policy);
    if (!refusal) return undefined;
    request.log.info({ origin: request.headers.origin, url: request.raw.url }, 'WebSocket upgrade refused by the Origin policy');
    return sendStatus(res, refusal);
  };
}
