/**
 * From a verified token's claims to a {@link UserInfo}, as kube-apiserver's JWT authenticator does it
 * (`plugin/pkg/authenticator/token/oidc/oidc.go`, `AuthenticateToken` after `Verify`), in its order:
 * username, groups, uid, extra (with `authentication.kubernetes.io/credential-id` from a string
 * `jti`), the `claim`/`requiredValue` rules, the claim validation expressions, the user validation
 * expressions. The first failure ends it with a {@link JwtAuthenticationError} carrying
 * kube-apiserver's message. CEL runs on the expressions compiled at load time only.
 */
import type { CompiledJwtAuthenticator, CompiledValidationRule } from './authentication-config-validation.js';
import { celClaims, type CompiledExpression } from './cel-environment.js';
import { JwtAuthenticationError, messageValue, type JwtFailureReason } from './jwt-error.js';
import type { UserInfo } from './user-info.js';

/** Extra key kube-apiserver fills from `jti` (`user.CredentialIDKey`). */
export const CREDENTIAL_ID_EXTRA_KEY = 'authentication.kubernetes.io/credential-id';

/** The claims of a token: its JSON payload, an object. */
export type Claims = Record<string, unknown>;

function fail(reason: JwtFailureReason, message: string): never {
  throw new JwtAuthenticationError(reason, message);
}

/** What Go's `json.Unmarshal` says for a value that is not a string. */
function notAString(v: unknown): string {
  const t = Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v === 'boolean' ? 'bool' : typeof v;
  return `json: cannot unmarshal ${t} into Go value of type string`;
}

/** The string claim `name`, or why not (`claim not present`, a type error). */
function stringClaim(claims: Claims, name: string): string | { error: string } {
  if (!Object.hasOwn(claims, name)) return { error: 'claim not present' };
  const v = claims[name];
  return typeof v === 'string' ? v : { error: notAString(v) };
}

/** The one-line reason of a CEL runtime error (no source excerpt). */
function celErrorText(err: unknown): string {
  const e = err as { summary?: string; message?: string };
  return e?.summary ?? String(e?.message ?? err).split('\n')[0]!;
}

/** Run an expression; a runtime error becomes `<prefix>expression '<expr>' resulted in error: <why>`. */
function run(compiled: CompiledExpression, value: unknown, prefix: string): unknown {
  try {
    return compiled.evaluate(value);
  } catch (err) {
    fail('expression_error', `${prefix}expression '${compiled.expression}' resulted in error: ${celErrorText(err)}`);
  }
}

/** `convertCELValueToStringList`: a string or list of strings; `""`, `[]`, `null` and empty items mean none. */
function stringList(v: unknown): string[] | undefined {
  if (typeof v === 'string') return v === '' ? [] : [v];
  if (v === null) return [];
  if (Array.isArray(v)) {
    if (!v.every((x) => typeof x === 'string')) return undefined;
    return (v as string[]).filter((x) => x !== '');
  }
  return undefined;
}

function username(a: CompiledJwtAuthenticator, claims: Claims, cel: () => unknown): string {
  const m = a.config.claimMappings.username;
  if (a.mapper.username) {
    const prefix = 'oidc: error evaluating username claim expression: ';
    const v = run(a.mapper.username, cel(), prefix);
    if (typeof v !== 'string') fail('claim_mapping', `${prefix}username claim expression must return a string`);
    if (v === '') fail('claim_mapping', 'oidc: empty username via CEL expression is not allowed');
    return v;
  }
  const v = stringClaim(claims, m.claim);
  if (typeof v !== 'string') fail('claim_mapping', `oidc: parse username claims ${JSON.stringify(m.claim)}: ${v.error}`);
  if (m.claim === 'email' && Object.hasOwn(claims, 'email_verified')) {
    // JSON null decodes as false in Go, so it is "not verified" too.
    const verified = claims.email_verified;
    if (verified !== null && typeof verified !== 'boolean') fail('claim_mapping', "oidc: parse 'email_verified' claim: json: cannot unmarshal into Go value of type bool");
    if (verified !== true) fail('email_not_verified', 'oidc: email not verified');
  }
  return m.prefix ? m.prefix + v : v;
}

function groups(a: CompiledJwtAuthenticator, claims: Claims, cel: () => unknown): string[] {
  const m = a.config.claimMappings.groups;
  if (m.claim !== '' && Object.hasOwn(claims, m.claim)) {
    // A single string is one group (k/k #33290).
    const v = claims[m.claim];
    const list = typeof v === 'string' ? [v] : Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;
    if (!list) fail('claim_mapping', `oidc: parse groups claim ${JSON.stringify(m.claim)}: json: cannot unmarshal into Go value of type []string`);
    return m.prefix ? list.map((g) => m.prefix + g) : [...list];
  }
  if (!a.mapper.groups) return [];
  const prefix = 'oidc: error evaluating group claim expression: ';
  const list = stringList(run(a.mapper.groups, cel(), prefix));
  if (!list) fail('claim_mapping', `${prefix}expression must return a string or a list of strings`);
  return list;
}

function uid(a: CompiledJwtAuthenticator, claims: Claims, cel: () => unknown): string | undefined {
  const claim = a.config.claimMappings.uid.claim;
  if (claim !== '') {
    const v = stringClaim(claims, claim);
    if (typeof v !== 'string') fail('claim_mapping', `oidc: parse uid claim ${JSON.stringify(claim)}: ${v.error}`);
    return v;
  }
  if (!a.mapper.uid) return undefined;
  const prefix = 'oidc: error evaluating uid claim expression: ';
  const v = run(a.mapper.uid, cel(), prefix);
  if (typeof v !== 'string') fail('claim_mapping', `${prefix}uid claim expression must return a string`);
  return v;
}

function extra(a: CompiledJwtAuthenticator, claims: Claims, cel: () => unknown): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (typeof claims.jti === 'string') out[CREDENTIAL_ID_EXTRA_KEY] = [`JTI=${claims.jti}`];
  for (const { key, compiled } of a.mapper.extra) {
    const list = stringList(run(compiled, cel(), ''));
    if (!list) fail('claim_mapping', `oidc: error evaluating extra claim expression: ${compiled.expression}: expression must return a string or a list of strings`);
    if (list.length > 0) out[key] = list;
  }
  return out;
}

/** Evaluate validation rules; the first false one fails with its message. */
function checkRules(rules: CompiledValidationRule[], value: unknown, prefix: string, reason: JwtFailureReason): void {
  for (const { compiled, message } of rules) {
    const v = run(compiled, value, prefix);
    if (typeof v !== 'boolean') fail('expression_error', `${prefix}validation expression must return a boolean`);
    if (!v) fail(reason, `${prefix}validation expression '${compiled.expression}' failed: ${message}`);
  }
}

/**
 * The user a verified token's `claims` stand for, under authenticator `a`. Throws
 * {@link JwtAuthenticationError} (without the issuer set; the caller adds it) when a mapping or rule
 * fails. The user does not yet carry `system:authenticated` (the authenticator union adds it).
 */
export function userFromClaims(a: CompiledJwtAuthenticator, claims: Claims): UserInfo {
  let celValue: unknown;
  const cel = (): unknown => (celValue ??= celClaims(claims));
  const user: UserInfo = { username: username(a, claims, cel), groups: groups(a, claims, cel), extra: {} };
  const id = uid(a, claims, cel);
  if (id !== undefined && id !== '') user.uid = id;
  user.extra = extra(a, claims, cel);
  for (const rule of a.config.claimValidationRules) {
    if (rule.claim === '') continue;
    if (!Object.hasOwn(claims, rule.claim)) fail('required_claim', `oidc: required claim ${rule.claim} not present in ID token`);
    const v = claims[rule.claim];
    if (typeof v !== 'string') fail('required_claim', `oidc: parse claim ${rule.claim}: ${notAString(v)}`);
    if (v !== rule.requiredValue) fail('required_claim', `oidc: required claim ${rule.claim} value does not match. Got = ${messageValue(v)}, want = ${rule.requiredValue}`);
  }
  checkRules(a.mapper.claimValidationRules, cel(), 'oidc: error evaluating claim validation expression: ', 'claim_validation');
  if (a.mapper.userValidationRules.length > 0) {
    const celUser = { username: user.username, uid: user.uid ?? '', groups: user.groups, extra: user.extra };
    checkRules(a.mapper.userValidationRules, celUser, 'oidc: error evaluating user info validation rule: ', 'user_validation');
  }
  return user;
}
