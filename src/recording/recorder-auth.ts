/**
 * Who may use the recorder, as one interface with two implementations.
 *
 * Viewers (`/sessions/`, the list, playback, export, live following) need, for each recording,
 * SubjectAccessReview permission on the documented virtual resource
 * `sessions.recording.kube-stream-proxy.io` — `list` to see it in the list (at cluster scope: every
 * namespace; else in its namespace), `get` on the recording's id in its namespace to play or follow
 * it — or membership of a configured group (`--viewer-group`). Listing is filtered per recording: a
 * caller allowed in namespace `dev` only sees `dev`'s recordings.
 *
 * The cluster. With agents every cluster has a namespace `default`, so a review that named only the
 * namespace would let a viewer of one cluster's `default` see every cluster's. A recording of an
 * agent cluster (`/clusters/NAME`) is therefore reviewed as the subresource `sessions/NAME`, and one
 * of the proxy's own upstream as plain `sessions`. RBAC matches `resource/subresource` exactly, so
 * `resources: [sessions]` grants the proxy's own upstream only, `[sessions/one]` cluster `one` only,
 * and `["*"]` every cluster (RBAC has no `sessions/<any>` wildcard; docs/recording.md has the rules).
 * A cluster that is not a valid cluster name (only a corrupt cast header holds one) is never allowed
 * by review.
 * - {@link TokenFileViewers}: a kube-apiserver token file (`token,user,uid,"groups"`); only the
 *   configured groups are authorized (no SubjectAccessReview there).
 * - {@link KubernetesViewers}: the proxy's own `src/auth` reviewers (TokenReview, client
 *   certificates, front-proxy headers) and SubjectAccessReviews against the cluster.
 *
 * Replicas (the ingest API) authenticate with a bearer token from `--ingest-token-file` (the same
 * CSV format; the user name is the replica's name) or a client certificate verified by
 * `--client-ca-file` (CN = the replica's name).
 */
import type { X509Certificate } from 'node:crypto';
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { AccessAttributes, ReviewApi } from '../api-client.js';
import { Authenticator, UnauthorizedError } from '../auth/authenticator.js';
import { Authorizer, ForbiddenError } from '../auth/authorizer.js';
import { userFromCertificate, verifiedAgainst } from '../auth/client-certificate.js';
import { bearerToken, TokenReviewer } from '../auth/token-review.js';
import type { UserInfo } from '../auth/user-info.js';
import { parseTokenAuthFile } from '../auth/token-auth-file.js';
import { isValidClusterName } from '../tunnel/protocol.js';

/** The virtual API group of recordings. */
export const RECORDING_API_GROUP = 'recording.kube-stream-proxy.io';
/** The virtual resource. */
export const RECORDING_RESOURCE = 'sessions';

/** What a viewer wants to do. */
export interface ViewerAction {
  verb: 'get' | 'list';
  /** The recording's agent cluster (`/clusters/NAME`); absent or `''` for the proxy's own upstream. */
  cluster?: string;
  /** get: the recording's namespace and id; list: the namespace (absent: cluster scope). */
  namespace?: string;
  name?: string;
}

/** The SubjectAccessReview attributes of a viewer's action (undefined: never allowed by review). */
export function viewerAccessAttributes(action: ViewerAction): AccessAttributes | undefined {
  if (action.cluster && !isValidClusterName(action.cluster)) return undefined;
  return {
    verb: action.verb,
    group: RECORDING_API_GROUP,
    resource: RECORDING_RESOURCE,
    ...(action.cluster ? { subresource: action.cluster } : {}),
    ...(action.namespace !== undefined ? { namespace: action.namespace } : {}),
    ...(action.name !== undefined ? { name: action.name } : {}),
  };
}

/** Viewer authentication and authorization. */
export interface ViewerAuth {
  /** The caller, or undefined (401). Rejects when the review itself failed (500). */
  authenticate(req: IncomingMessage): Promise<UserInfo | undefined>;
  /** Whether `user` may do `action`. Rejects when the review failed (500, never allowed). */
  allowed(user: UserInfo, action: ViewerAction): Promise<boolean>;
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A token table (kube-apiserver's token file format), compared in constant time. */
export class TokenTable {
  readonly #entries: Array<[string, UserInfo]>;
  constructor(text: string, path: string) {
    this.#entries = [...parseTokenAuthFile(text, path)].map(([t, u]) => [t, { username: u.name, ...(u.uid ? { uid: u.uid } : {}), groups: u.groups, extra: {} }]);
  }
  /** The user of `token`, or undefined. */
  lookup(token: string): UserInfo | undefined {
    let found: UserInfo | undefined;
    for (const [t, u] of this.#entries) if (sameToken(t, token)) found = u;
    return found;
  }
}

/** Viewers from a token file; authorized by group only. */
export class TokenFileViewers implements ViewerAuth {
  readonly #tokens: TokenTable;
  readonly #groups: readonly string[];
  constructor(tokens: TokenTable, allowedGroups: readonly string[]) {
    this.#tokens = tokens;
    this.#groups = allowedGroups;
  }
  async authenticate(req: IncomingMessage): Promise<UserInfo | undefined> {
    const token = bearerToken(req.headers.authorization);
    return token === undefined ? undefined : this.#tokens.lookup(token);
  }
  async allowed(user: UserInfo): Promise<boolean> {
    return user.groups.some((g) => this.#groups.includes(g));
  }
}

/** Viewers reviewed by a cluster (TokenReview + SubjectAccessReview). */
export class KubernetesViewers implements ViewerAuth {
  readonly #authenticator: Authenticator;
  readonly #authorizer: Authorizer;
  readonly #groups: readonly string[];
  constructor(reviews: ReviewApi, allowedGroups: readonly string[], clientCa?: X509Certificate[]) {
    this.#authenticator = new Authenticator({ tokens: new TokenReviewer(reviews), ...(clientCa ? { clientCa } : {}) });
    this.#authorizer = new Authorizer(reviews);
    this.#groups = allowedGroups;
  }
  async authenticate(req: IncomingMessage): Promise<UserInfo | undefined> {
    try {
      return (await this.#authenticator.authenticate(req)).user;
    } catch (e) {
      if (e instanceof UnauthorizedError) return undefined;
      throw e;
    }
  }
  async allowed(user: UserInfo, action: ViewerAction): Promise<boolean> {
    if (user.groups.some((g) => this.#groups.includes(g))) return true;
    const attributes = viewerAccessAttributes(action);
    if (attributes === undefined) return false;
    try {
      await this.#authorizer.authorize(user, attributes);
      return true;
    } catch (e) {
      if (e instanceof ForbiddenError) return false;
      throw e;
    }
  }
}

/** Replica authentication for the ingest API. */
export class ReplicaAuth {
  readonly #tokens: TokenTable | undefined;
  readonly #ca: X509Certificate[] | undefined;
  constructor(tokens: TokenTable | undefined, clientCa: X509Certificate[] | undefined) {
    this.#tokens = tokens;
    this.#ca = clientCa;
  }
  /** The replica's name, or undefined (401). */
  authenticate(req: IncomingMessage): string | undefined {
    const socket = req.socket as Partial<TLSSocket>;
    if (this.#ca && typeof socket.getPeerCertificate === 'function') {
      const cert = verifiedAgainst(socket as TLSSocket, this.#ca);
      const user = cert ? userFromCertificate(cert) : undefined;
      if (user) return user.username;
    }
    const token = bearerToken(req.headers.authorization);
    return token !== undefined ? this.#tokens?.lookup(token)?.username : undefined;
  }
}
