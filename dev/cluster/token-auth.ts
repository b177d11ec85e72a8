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

/** A token file that cannot be used (kube-apiserver refuses to start with it). */
export class TokenAuthFileError extends Error {
  override readonly name = 'TokenAuthFileError';
  readonly code = 'DEV_CLUSTER_BAD_TOKEN_FILE' as const;
}

/** The 401 Status every unauthenticated request gets once token authentication is on. */
export function unauthorizedStatus(): V1Status {
  return errorStatus(401, 'Unauthorized', 'Unauthorized');
}

/**
 * Split CSV text into records as Go's `encoding/csv` reader does with `FieldsPerRecord = -1`:
 * comma-separated, `"…"` quoting with `""` for a quote, quoted fields may span lines, blank lines
 * skipped, no trimming. Throws on a bare quote inside an unquoted field or an unterminated quote.
 */
export function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let started = false; // the current field has content or an opening quote
  let line = 1;
  let i = 0;
  const pushField = (): void => {
    record.push(field);
    field = '';
    started = false;
  };
  const endLine = (): void => {
    if (record.length === 0 && !started) return; // a blank line
    pushField();
    records.push(record);
    record = [];
  };
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"' && !started) {
      started = true;
      i++;
      for (;;) {
        if (i >= text.length) throw new TokenAuthFileError(`line ${line}: extraneous or missing " in quoted-field`);
        const q = text[i++]!;
        if (q !== '"') {
          if (q === '\n') line++;
          field += q;
        } else if (text[i] === '"') {
          field += '"';
          i++;
        } else {
          break;
        }
      }
      const next = text[i];
      if (next !== undefined && next !== ',' && next !== '\n' && !(next === '\r' && text[i + 1] === '\n')) {
        throw new TokenAuthFileError(`line ${line}: extraneous or missing " in quoted-field`);
      }
    } else if (c === '"') {
      throw new TokenAuthFileError(`line ${line}: bare " in non-quoted-field`);
    } else if (c === ',') {
      pushField();
      i++;
    } else if (c === '\n' || (c === '\r' && text[i + 1] === '\n')) {
      i += c === '\r' ? 2 : 1;
      endLine();
      line++;
    } else {
      field += c;
      started = true;
      i++;
    }
  }
  endLine();
  return records;
}

/**
 * Parse a token file. Rules of `tokenfile.NewCSV`: at least 3 columns, an empty token is skipped, a
 * later duplicate wins, the 4th column is split on `,` into groups (empty names are dropped here).
 */
export function parseTokenAuthFile(text: string, path = 'token file'): Map<string, UserInfo> {
  const tokens = new Map<string, UserInfo>();
  for (const record of parseCsv(text)) {
    if (record.length < 3) {
      throw new TokenAuthFileError(
        `token file '${path}' must have at least 3 columns (token, user name, user uid), found ${record.length}`,
      );
    }
    const [token, name, uid] = record as [string, string, string];
    if (token === '') continue;
    const groups = record.length >= 4 ? record[3]!.split(',').filter((g) => g !== '') : [];
    tokens.set(token, uid === '' ? { name, groups } : { name, uid, groups });
  }
  return tokens;
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
