/**
 * One query for every reader of a streaming request (issue 31, finding 5). The proxy reads a
 * streaming request's query with WHATWG `URLSearchParams` (the recording policy's `container`, the
 * audit line's `command`, the translator's streams, the kubelet path); kube-apiserver and the kubelet
 * read it with Go's `url.ParseQuery`, which drops what it cannot parse. `container=istio-proxy%zz&
 * container=app` was exempted from recording as the sidecar and ran in `app`.
 *
 * This `onRequest` hook runs before authentication, on every streaming path (pods/exec|attach|
 * portforward in any form, kubelet streams through the node proxy; `/clusters/NAME` is stripped
 * before hooks run): a query Go would not read completely is refused with 400, and any other is
 * replaced in `req.url` by Go's own re-encoding of what Go read (`src/wire/go-query.ts`). From here
 * on the review, the recording policy, the audit and every relay (`route.target(req.url)`) read the
 * same values the upstream reads.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { canonicalQuery } from '../wire/go-query.js';
import { sendStatus } from '../wire/status-reply.js';
import { errorStatus } from '../status.js';
import { isStreamingPath } from './request-path.js';

/** The start of the 400 Status message of a refused streaming query. */
export const STREAM_QUERY_REFUSED = 'the query of a streaming request must be one the API server reads completely';

/** Build the hook (add it before the authentication hook). */
export function createStreamQueryHook(): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined> {
  return async (request, reply) => {
    const req = request.raw;
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    if (q < 0 || !isStreamingPath(url.slice(0, q))) return undefined;
    const canonical = canonicalQuery(url.slice(q + 1));
    if (!canonical.ok) return sendStatus(reply, errorStatus(400, `${STREAM_QUERY_REFUSED}: ${canonical.reason}`, 'BadRequest'));
    req.url = canonical.query === '' ? url.slice(0, q) : `${url.slice(0, q)}?${canonical.query}`;
    return undefined;
  };
}
