/**
 * Answering a Kubernetes Status through Fastify's reply (before any hijack), as the apiserver's
 * responder does.
 */
import type { FastifyReply } from 'fastify';
import { encodeStatus, type V1Status } from '../status.js';

/** Send `status` as the JSON body with its code. */
export function sendStatus(reply: FastifyReply, status: V1Status): FastifyReply {
  return reply.code(status.code ?? 500).type('application/json').send(encodeStatus(status));
}
