/**
 * Static token authentication as kube-apiserver's `--token-auth-file` does it
 * (k8s.io/apiserver `pkg/authentication/token/tokenfile`): a CSV file of
 * `token,user,uid[,"group1,group2"]`, read once at start; a request carries
 * `Authorization: Bearer <token>` (`pkg/authentication/request/bearertoken`). Every authenticated
 * user also gets the group `system:authenticated` (the apiserver's authenticated-group adder).
 */
import { readFileSync } from 'node:fs';
import { errorStatus, type V1Status } from '../../src/status.js';
import { bearerToken } from '../../src/auth/token-review.js';
import { parseCsv, parseTokenAuthFile, TokenAuthFileError } from '../../src/auth/token-auth-file.js';

export { parseCsv, parseTokenAuthFile, TokenAuthFileError };

/** Who a request is from: Kubernetes `user.Info`. */
export interface UserInfo {
  /** User name, e.g. `alice` or `system:serviceaccount:default:builder`. */
  name: string;
  /** Optional unique id (the token file's third column). */
  uid?: string;
  /** Groups, `system:authenticated` included once authenticated. */
  groups: string[];
  /** Extra attributes (impersonated `Impersonate-Extra-*`), keys lower-case. */
  extra?: Record<string, string[]>;
}

/** The group every authenticated user is in. */
export const ALL_AUTHENTICATED = 'system:authenticated';
/** The group of anonymous (and impersonated `system:anonymous`) requests. */
export const ALL_UNAUTHENTICATED = 'system:unauthenticated';

/** The 401 Status every unauthenticated request gets once token authentication is on. */
export function unauthorizedStatus(): V1Status {
  return errorStatus(401, 'Unauthorized', 'Unauthorized');
}

/** The bearer token of an `Authorization` header (the proxy's parser: kube-apiserver's `bearertoken` rules). */
export { bearerToken };

/** Authenticates bearer tokens against a token file's table. */
export class StaticTokenAuthenticator {
  readonly #tokens: Map<string, UserInfo>;

  constructor(tokens: Map<string, UserInfo>) {
    this.#tokens = tokens;
  }

  /** Read and parse `path` (throws {@link TokenAuthFileError} or the fs error). */
  static fromFile(path: string): StaticTokenAuthenticator {
    return new StaticTokenAuthenticator(parseTokenAuthFile(readFileSync(path, 'utf8'), path));
  }

  /** The user of `token` with `system:authenticated` added, or undefined for an unknown token. */
  authenticateToken(token: string): UserInfo | undefined {
    const found = this.#tokens.get(token);
    if (!found) return undefined;
    const groups = found.groups.includes(ALL_AUTHENTICATED) ? [...found.groups] : [...found.groups, ALL_AUTHENTICATED];
    return { ...found, groups };
  }

  /** The user of a request's `Authorization` header, or undefined. */
  authenticateHeader(authorization: string | undefined): UserInfo | undefined {
    const token = bearerToken(authorization);
    return token === undefined ? undefined : this.authenticateToken(token);
  }
}
