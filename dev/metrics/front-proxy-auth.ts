/**
 * Authentication of requests that come through a front proxy (kube-aggregator, or this project's
 * proxy), as an extension API server does it with kube-apiserver's `--requestheader-*` settings: the
 * caller must present a client certificate that chains to the request-header CA and whose
 * CommonName is an allowed name (any, when none are configured); then the user is what the
 * `X-Remote-User`/`X-Remote-Group`/`X-Remote-Extra-*` lines (or the configured names) say. Anyone
 * else gets 401, since dev-metrics has no other authenticator (no TokenReview delegation).
 */
import type { IncomingMessage } from 'node:http';
import { TLSSocket } from 'node:tls';
import { subjectValues, verifiedAgainst } from '../../src/auth/client-certificate.js';
import { isAllowedFrontProxy, userFromRequestHeaders, type RequestHeaderConfig } from '../../src/auth/request-header.js';
import type { UserInfo } from '../../src/auth/user-info.js';
import { errorStatus, type V1Status } from '../../src/status.js';

/** The outcome: the user and the front proxy's CommonName, or the 401 Status (with the reason, for logs). */
export type FrontProxyResult =
  | { ok: true; user: UserInfo; frontProxy: string }
  | { ok: false; status: V1Status; reason: string };

/** The apiserver's answer to an unauthenticated request. */
export function unauthorizedStatus(): V1Status {
  return errorStatus(401, 'Unauthorized', 'Unauthorized');
}

/** Authenticate `req` (see the file comment). */
export function authenticateFrontProxy(req: IncomingMessage, config: RequestHeaderConfig): FrontProxyResult {
  const refuse = (reason: string): FrontProxyResult => ({ ok: false, status: unauthorizedStatus(), reason });
  const socket = req.socket;
  if (!(socket instanceof TLSSocket)) return refuse('not a TLS connection');
  const leaf = verifiedAgainst(socket, config.ca);
  if (!leaf) return refuse('no client certificate verified by the request-header CA');
  const cn = subjectValues(leaf.subject, 'CN')[0] ?? '';
  if (!isAllowedFrontProxy(leaf, config.allowedNames)) return refuse(`front proxy certificate CN ${JSON.stringify(cn)} is not an allowed name`);
  let user;
  try {
    user = userFromRequestHeaders(req.rawHeaders, config);
  } catch (e) {
    return refuse((e as Error).message);
  }
  if (!user) return refuse('no user in the request headers');
  return { ok: true, user, frontProxy: cn };
}
