/**
 * Front-proxy authentication (kube-apiserver's `--requestheader-*` flags): a caller that presented a
 * client certificate verified against the request-header CA (and, when names are configured, with an
 * allowed CommonName) may state the user in `X-Remote-User`, `X-Remote-Group` and
 * `X-Remote-Extra-<key>` lines. From anyone else those lines are dropped.
 */
import type { X509Certificate } from 'node:crypto';
import { headerValues, identityText } from './identity-headers.js';
import { subjectValues } from './client-certificate.js';
import type { UserInfo } from './user-info.js';

/** The request-header settings, as kube-apiserver's flags of the same names. */
export interface RequestHeaderConfig {
  /** `--requestheader-client-ca-file`, parsed. */
  ca: X509Certificate[];
  /** `--requestheader-allowed-names`: CommonNames allowed to assert users; empty = any. */
  allowedNames: string[];
  /** `--requestheader-username-headers` (default X-Remote-User). */
  usernameHeaders: string[];
  /** `--requestheader-group-headers` (default X-Remote-Group). */
  groupHeaders: string[];
  /** `--requestheader-extra-headers-prefix` (default X-Remote-Extra-). */
  extraHeaderPrefixes: string[];
}

export const DEFAULT_USERNAME_HEADERS = ['X-Remote-User'];
export const DEFAULT_GROUP_HEADERS = ['X-Remote-Group'];
/** kube-apiserver's default `--requestheader-uid-headers` (1.32+). */
export const DEFAULT_UID_HEADERS = ['X-Remote-Uid'];
export const DEFAULT_EXTRA_HEADER_PREFIXES = ['X-Remote-Extra-'];

/** True when the verified front-proxy certificate's CommonName may assert users. */
export function isAllowedFrontProxy(cert: X509Certificate, allowedNames: readonly string[]): boolean {
  if (allowedNames.length === 0) return true;
  const cn = subjectValues(cert.subject, 'CN')[0];
  return cn !== undefined && allowedNames.includes(cn);
}

/**
 * The user the request-header lines state, or undefined when no username line is present (the
 * apiserver then tries the next authenticator). Values are read as UTF-8 (`identityText`: a line that
 * is not UTF-8 throws `InvalidIdentityError`, answered 401).
 */
export function userFromRequestHeaders(rawHeaders: readonly string[], c: Pick<RequestHeaderConfig, 'usernameHeaders' | 'groupHeaders' | 'extraHeaderPrefixes'>): UserInfo | undefined {
  let username: string | undefined;
  for (const h of c.usernameHeaders) {
    username = headerValues(rawHeaders, h).find((v) => v !== '');
    if (username !== undefined) {
      username = identityText(username, h);
      break;
    }
  }
  if (username === undefined) return undefined;
  const groups = c.groupHeaders.flatMap((h) => headerValues(rawHeaders, h).map((v) => identityText(v, h)));
  const extra: Record<string, string[]> = {};
  const prefixes = c.extraHeaderPrefixes.map((p) => p.toLowerCase());
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const lower = rawHeaders[i]!.toLowerCase();
    const prefix = prefixes.find((p) => lower.startsWith(p));
    if (prefix === undefined) continue;
    let key = lower.slice(prefix.length);
    try {
      key = decodeURIComponent(key);
    } catch {
      // Kept as sent when not valid percent-encoding.
    }
    (extra[key] ??= []).push(identityText(rawHeaders[i + 1]!, rawHeaders[i]!));
  }
  return { username, groups, extra };
}
