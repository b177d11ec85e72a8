/**
 * The catch-all reverse proxy: every request no other route claims goes upstream with its status,
 * headers and body streamed as they come (a watch arrives event by event), hop-by-hop headers removed
 * both ways, `X-Forwarded-*` added, and a dial failure answered with 503 `error trying to reach
 * service: …`. Upgrade requests here (watch over WebSocket, pods/proxy, …) use UpgradeAwareProxy.
 * No redirects are followed: a 3xx is relayed like any other answer, except on routes that refuse
 * them (aggregated APIs: 502, as kube-aggregator answers).
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  pairsFromRaw,
  rawFromPairs,
  setHeaders,
  stripHopByHop,
  withForwardedHeaders,
  type HeaderPair,
} from '../src/wire/forwarded-headers.js';
import { framingHeaders, requestFraming, type RequestFraming } from '../src/wire/request-framing.js';
import { checkRequestTarget, requestHeaderLines } from '../src/wire/request-head.js';
import { UpstreamUnreachableError, statusForError } from '../src/errors.js';
import { errorStatus } from '../src/status.js';
import { isLongRunningRequest } from '../src/routing/long-running.js';
import { routeOf, type Route } from '../src/routing/route.js';
import type { AuthHeaders } from '../src/routing/upstream.js';
import { clientInfo, type HandlerDeps } from './handler-deps.js';
import { leaveBodiesUnread } from './raw-body.js';
import { sendStatus } from '../src/wire/status-reply.js';
import { nodeProxyStreamRefusal } from './node-proxy-stream.js';
import { proxyUpgrade } from './upgrade.js';
import { upgradeOf } from './upgrade-context.js';

/**
 * A pod streaming subresource reached through a path the dedicated routes did not match (trailing
 * slash, doubled or encoded characters, unsupported method). Refused, so nothing reaches exec/attach/
 * portforward without passing through those routes and their hooks.
 */
const POD_STREAM_PATH = /\/pods\/[^/]+\/(exec|attach|portforward)\/?$/i;

function isDisguisedPodStream(url: string): boolean {
  const path = url.split('?')[0] ?? '';
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return true;
  }
  const collapsed = decoded.replace(/\/{2,}/g, '/');
  // Resolve dot segments as the upstream's URL parser will (`..`, `%2E%2E`): `pods/x/../demo/exec` IS
  // exec upstream, and must not reach it past the exec route.
  const resolved = new URL(collapsed, 'http://request.invalid').pathname;
  return POD_STREAM_PATH.test(collapsed) || POD_STREAM_PATH.test(resolved);
}

/** kube-aggregator's answer to a backend redirect (`RejectForwardingRedirects`). */
export const REDIRECT_REFUSED = 'the backend attempted to redirect this request, which is not permitted';

/**
 * Upstream request headers for a plain request: the client's lines minus hop-by-hop ones and its own
 * framing, plus ours, the framing last (request-framing.ts: the body goes up exactly as it was read).
 */
function upstreamHeaders(req: IncomingMessage, deps: HandlerDeps, route: Route, auth: AuthHeaders, framing: RequestFraming): HeaderPair[] {
  let pairs = stripHopByHop(pairsFromRaw(req.rawHeaders)).filter(([n]) => !CLIENT_LINES_REPLACED.has(n.toLowerCase()));
  pairs = withForwardedHeaders(pairs, clientInfo(req, deps.proto));
  pairs = setHeaders(pairs, auth);
  return [['Host', route.host], ...pairs, ...framingHeaders(framing, req.method ?? 'GET')];
}

/** Client lines the proxy always replaces with its own: the upstream's `Host` and the body's framing. */
const CLIENT_LINES_REPLACED: ReadonlySet<string> = new Set(['host', 'content-length', 'transfer-encoding']);

/** kube-apiserver's answer when `--request-timeout` runs out (its timeout filter's Status). */
export const REQUEST_TIMEOUT_MESSAGE = 'Timeout: request did not complete within requested timeout - context deadline exceeded';

/**
 * `--request-timeout` for one plain request that is not long-running: when it runs out, the
 * upstream request is abandoned and the caller gets kube-apiserver's 504 `Timeout` Status, or, when
 * the answer had already started, its connection is closed.
 */
function startRequestTimeout(
  req: IncomingMessage,
  reply: FastifyReply,
  ms: number,
  upstream: () => ClientRequest,
): { cancel(): void; readonly fired: boolean } | undefined {
  if (ms <= 0 || isLongRunningRequest(req.url ?? '/')) return undefined;
  let fired = false;
  const timer = setTimeout(() => {
    fired = true;
    upstream().destroy();
    if (reply.raw.headersSent) reply.raw.destroy();
    else sendStatus(reply, errorStatus(504, REQUEST_TIMEOUT_MESSAGE, 'Timeout'));
  }, ms);
  reply.raw.once('close', () => clearTimeout(timer));
  return {
    cancel: () => clearTimeout(timer),
    get fired() {
      return fired;
    },
  };
}

/** The upstream's response to `upstreamReq`, or its error. */
function responseOf(upstreamReq: ClientRequest): Promise<IncomingMessage> {
  return new Promise<IncomingMessage>((resolve, reject) => {
    upstreamReq.once('response', resolve);
    upstreamReq.once('error', reject);
  });
}

/** Methods whose requests may be sent twice (RFC 9110 §9.2.2's safe methods Go's Transport replays). */
const REPLAYABLE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Whether a failed upstream request may be sent again, as Go's http.Transport decides it
 * (`shouldRetryRequest`): it went out on a REUSED pooled connection, that connection failed before
 * any byte of an answer (reset, hang-up, broken pipe: the upstream had closed it as idle), the method
 * is GET, HEAD or OPTIONS and the request had no body. Never a request whose body was sent, never an
 * upgrade (those dial a connection of their own).
 */
export function isRetryable(method: string, framing: RequestFraming, upstreamReq: Pick<ClientRequest, 'reusedSocket'>, error: unknown): boolean {
  if (!upstreamReq.reusedSocket || framing.kind !== 'none' || !REPLAYABLE_METHODS.has(method)) return false;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED';
}

/** Send a plain request along its route and stream the answer back (also used by routes that serve some paths themselves). */
export async function proxyPlain(request: FastifyRequest, reply: FastifyReply, deps: HandlerDeps): Promise<FastifyReply> {
  const req = request.raw;
  const framing = requestFraming(req.headers);
  if ('refuse' in framing) {
    // The body cannot be read as the client meant it, so neither can what follows it: close.
    reply.header('connection', 'close');
    return sendStatus(reply, framing.refuse);
  }
  // The backend and the identity to present there (the caller's own credentials in passthrough).
  const route = routeOf(req, deps.upstream);
  const auth = await route.callerAuthHeaders();
  let options;
  try {
    // The head's lines and target, checked as every head the proxy writes upstream is (src/wire/request-head.ts);
    // Node writes them as latin1, one byte per character, so the upstream reads exactly these bytes.
    options = {
      method: req.method ?? 'GET',
      path: checkRequestTarget(route.target(req.url ?? '/')),
      headers: requestHeaderLines(upstreamHeaders(req, deps, route, auth, framing)),
    };
  } catch (e) {
    request.log.error({ err: e, route: route.name }, 'request head refused before it went upstream');
    return sendStatus(reply, statusForError(e));
  }
  let upstreamReq = route.request(options);
  const clientGone = (): void => {
    if (!reply.raw.writableFinished) upstreamReq.destroy();
  };
  reply.raw.once('close', clientGone);
  const timeout = startRequestTimeout(req, reply, deps.requestTimeoutMs ?? 0, () => upstreamReq);
  // Stream the body up as it arrives. Not pipeline(): an upstream failure must not destroy the
  // client's request, whose connection still has to carry our 503. A request without a body writes
  // nothing after its head.
  if (framing.kind === 'none') {
    req.resume();
    upstreamReq.end();
  } else req.pipe(upstreamReq);
  let upstreamRes: IncomingMessage;
  try {
    try {
      upstreamRes = await responseOf(upstreamReq);
    } catch (e) {
      // A pooled keep-alive connection the upstream closed under the request, before any answer:
      // retried once on a new connection when nothing of the caller's is lost (Go's http.Transport).
      if (!isRetryable(req.method ?? 'GET', framing, upstreamReq, e) || reply.raw.destroyed) throw e;
      request.log.debug({ route: route.name, err: e }, 'pooled upstream connection closed; retrying on a new one');
      upstreamReq = route.request(options);
      upstreamReq.end();
      upstreamRes = await responseOf(upstreamReq);
    }
  } catch (e) {
    req.unpipe(upstreamReq);
    if (timeout?.fired) return reply;
    timeout?.cancel();
    deps.metrics.incUpstreamDialError('reverse_proxy', 'unreachable');
    route.observe?.(503);
    if (reply.raw.destroyed) return reply.hijack();
    return sendStatus(reply, new UpstreamUnreachableError(route.url.origin, e).toStatus());
  }
  upstreamReq.on('error', () => {});
  const code = upstreamRes.statusCode ?? 502;
  if (route.rejectRedirects && code >= 300 && code <= 399 && upstreamRes.headers.location !== undefined) {
    upstreamRes.resume();
    request.log.info({ route: route.name, statusCode: code }, 'backend redirect refused');
    route.observe?.(502);
    return sendStatus(reply, errorStatus(502, REDIRECT_REFUSED, 'InternalError'));
  }
  route.observe?.(code);
  // Hijack to write the upstream's head ourselves: raw header lines (case, order and repeats kept)
  // and flushed at once, so a watch client sees the head before the first event.
  reply.hijack();
  const res = reply.raw;
  const headers = stripHopByHop(pairsFromRaw(upstreamRes.rawHeaders));
  res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage, rawFromPairs(headers));
  res.flushHeaders();
  try {
    await pipeline(upstreamRes, res);
    timeout?.cancel();
  } catch (e) {
    request.log.info({ err: e }, 'proxied response ended early');
    res.destroy();
  }
  return reply;
}

/** Fastify plugin: the catch-all route. */
export const reverseProxyRoutes: FastifyPluginAsync<HandlerDeps> = async (scope: FastifyInstance, deps: HandlerDeps) => {
  leaveBodiesUnread(scope);
  scope.all('/*', async (request, reply) => {
    if (isDisguisedPodStream(request.raw.url ?? '/')) {
      return sendStatus(
        reply,
        errorStatus(400, 'pods/exec, pods/attach and pods/portforward must be requested with GET or POST at /api/v1/namespaces/NAMESPACE/pods/NAME/SUBRESOURCE', 'BadRequest'),
      );
    }
    // A kubelet stream through nodes/proxy that the recording policy would record: refused (node-proxy-stream.ts).
    const nodeStream = nodeProxyStreamRefusal(request.raw, deps.recorder);
    if (nodeStream) {
      request.log.warn(nodeStream.log, 'kubelet stream through nodes/proxy refused: its session would be recorded');
      return sendStatus(reply, nodeStream.status);
    }
    const upgrade = upgradeOf(request.raw);
    if (upgrade) {
      await proxyUpgrade(request, reply, upgrade, deps, 'proxy');
      return reply;
    }
    try {
      return await proxyPlain(request, reply, deps);
    } catch (e) {
      if (reply.sent) {
        reply.raw.destroy();
        return reply;
      }
      return sendStatus(reply, statusForError(e));
    }
  });
};
