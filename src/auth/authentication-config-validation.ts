/**
 * Validation of an {@link AuthenticationConfiguration} with kube-apiserver's field paths and messages
 * (`k8s.io/apiserver/pkg/apis/apiserver/validation/validation.go`), compiling every CEL expression on
 * the way (a compile error is a validation error on the expression's field). Every error is returned,
 * as `field.ErrorList` collects them. The JWT authenticators are built only from a configuration that
 * validated, so the request path never compiles anything.
 */
import { X509Certificate } from 'node:crypto';
import {
  AUDIENCE_MATCH_ANY,
  type AuthenticationConfiguration,
  type ClaimValidationRule,
  type JwtAuthenticatorConfig,
  type PrefixedClaimOrExpression,
  type UserValidationRule,
} from './authentication-config.js';
import { compileClaimsExpression, compileUserExpression, isCompileFailure, selectsClaim, type CompiledExpression, type CompileFailure } from './cel-environment.js';
import { duplicate, FieldPath, internalError, invalid, required, tooMany, type FieldError } from './field-errors.js';

/** Most `jwt[]` entries kube-apiserver accepts. */
export const MAX_JWT_AUTHENTICATORS = 64;

/** A claim validation expression with its message. */
export interface CompiledValidationRule {
  compiled: CompiledExpression;
  message: string;
}

/** The compiled CEL of one JWT authenticator (kube-apiserver's `CELMapper`). */
export interface CelMapper {
  username?: CompiledExpression;
  groups?: CompiledExpression;
  uid?: CompiledExpression;
  extra: { key: string; compiled: CompiledExpression }[];
  claimValidationRules: CompiledValidationRule[];
  userValidationRules: CompiledValidationRule[];
}

/** A validated `jwt[]` entry and its compiled expressions. */
export interface CompiledJwtAuthenticator {
  config: JwtAuthenticatorConfig;
  mapper: CelMapper;
}

/** What validation found: every error, and the compiled authenticators (meaningful only when there are none). */
export interface ValidationResult {
  errors: FieldError[];
  authenticators: CompiledJwtAuthenticator[];
}

/** Options of {@link validateAuthenticationConfiguration}. */
export interface ValidationOptions {
  /** Issuers no JWT authenticator may claim (kube-apiserver: its `--service-account-issuer` values). */
  disallowedIssuers?: readonly string[];
}

const DNS1123_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL}(\\.${DNS1123_LABEL})*`;
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);
const HTTP_PATH_FMT = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+";
const HTTP_PATH = new RegExp(`^${HTTP_PATH_FMT}$`);

/** Go's `url.Parse` outcome for what validation looks at. */
interface ParsedUrl {
  scheme: string;
  hasUser: boolean;
  query: string;
  fragment: string;
}

/**
 * Parse like Go's `url.Parse` as far as validation needs: a string without a scheme still parses
 * (with an empty scheme, so it is "URL scheme must be https"); with a scheme, WHATWG URL parsing.
 */
function parseUrl(raw: string): ParsedUrl | string {
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(raw)?.[1];
  if (scheme === undefined) {
    const hash = raw.indexOf('#');
    const beforeHash = hash < 0 ? raw : raw.slice(0, hash);
    const q = beforeHash.indexOf('?');
    return { scheme: '', hasUser: false, query: q < 0 ? '' : beforeHash.slice(q + 1), fragment: hash < 0 ? '' : raw.slice(hash + 1) };
  }
  try {
    const u = new URL(raw);
    return { scheme: scheme.toLowerCase(), hasUser: u.username !== '' || u.password !== '' || /^[^/]*\/\/[^/?#]*@/.test(raw), query: u.search.slice(1), fragment: u.hash.slice(1) };
  } catch {
    return `parse ${JSON.stringify(raw)}: invalid URL`;
  }
}

function validateUrl(raw: string, disallowed: ReadonlySet<string>, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  if (disallowed.has(raw)) errs.push(invalid(path, raw, `URL must not overlap with disallowed issuers: [${[...disallowed].sort().join(' ')}]`));
  const u = parseUrl(raw);
  if (typeof u === 'string') return [...errs, invalid(path, raw, u)];
  if (u.scheme !== 'https') errs.push(invalid(path, raw, 'URL scheme must be https'));
  if (u.hasUser) errs.push(invalid(path, raw, 'URL must not contain a username or password'));
  if (u.query !== '') errs.push(invalid(path, raw, 'URL must not contain a query'));
  if (u.fragment !== '') errs.push(invalid(path, raw, 'URL must not contain a fragment'));
  return errs;
}

function validateIssuer(a: JwtAuthenticatorConfig, disallowed: ReadonlySet<string>, path: FieldPath): FieldError[] {
  const issuer = a.issuer;
  const errs: FieldError[] = [];
  if (issuer.url === '') errs.push(required(path.child('url')));
  else errs.push(...validateUrl(issuer.url, disallowed, path.child('url')));
  if (issuer.discoveryURL !== '') {
    if (issuer.url !== '' && issuer.url.replace(/\/+$/, '') === issuer.discoveryURL.replace(/\/+$/, '')) {
      errs.push(invalid(path.child('discoveryURL'), issuer.discoveryURL, 'discoveryURL must be different from URL'));
    }
    errs.push(...validateUrl(issuer.discoveryURL, new Set(), path.child('discoveryURL')));
  }
  const audPath = path.child('audiences');
  if (issuer.audiences.length === 0) errs.push(required(audPath, `at least one ${audPath} is required`));
  else {
    const seen = new Set<string>();
    issuer.audiences.forEach((aud, i) => {
      if (aud === '') errs.push(required(audPath.index(i)));
      if (seen.has(aud)) errs.push(duplicate(audPath.index(i), aud));
      seen.add(aud);
    });
    const policy = issuer.audienceMatchPolicy;
    if (issuer.audiences.length > 1 && policy !== AUDIENCE_MATCH_ANY) {
      errs.push(invalid(path.child('audienceMatchPolicy'), policy, 'audienceMatchPolicy must be MatchAny for multiple audiences'));
    }
    if (issuer.audiences.length === 1 && policy !== '' && policy !== AUDIENCE_MATCH_ANY) {
      errs.push(invalid(path.child('audienceMatchPolicy'), policy, 'audienceMatchPolicy must be empty or MatchAny for single audience'));
    }
  }
  if (issuer.certificateAuthority !== '') {
    const problem = certificateAuthorityProblem(issuer.certificateAuthority);
    if (problem) errs.push(invalid(path.child('certificateAuthority'), '<omitted>', problem));
  }
  const egress = issuer.egressSelectorType;
  if (egress !== '' && egress !== 'controlplane' && egress !== 'cluster') {
    errs.push(invalid(path.child('egressSelectorType'), egress, 'egress selector must be either controlplane or cluster'));
  }
  return errs;
}

/** Why a PEM bundle is unusable (client-go's `cert.NewPoolFromBytes` text), or undefined. */
export function certificateAuthorityProblem(pem: string): string | undefined {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  let good = 0;
  for (const block of blocks) {
    try {
      new X509Certificate(block);
      good++;
    } catch (err) {
      return `x509: malformed certificate: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  return good === 0 ? 'data does not contain any valid RSA or ECDSA certificates' : undefined;
}

/** A compile failure as kube-apiserver's `convertCELErrorToValidationError` reports it. */
function compileError(path: FieldPath, expression: string, failure: CompileFailure): FieldError {
  return failure.internal ? internalError(path, failure.detail) : invalid(path, expression, failure.detail);
}

function compileClaims(expression: string, mustBeBool: boolean, path: FieldPath, errs: FieldError[]): CompiledExpression | undefined {
  const r = compileClaimsExpression(expression, mustBeBool);
  if (isCompileFailure(r)) {
    errs.push(compileError(path, expression, r));
    return undefined;
  }
  return r;
}

function validateClaimValidationRules(rules: ClaimValidationRule[], path: FieldPath, mapper: CelMapper): FieldError[] {
  const errs: FieldError[] = [];
  const seenClaims = new Set<string>();
  const seenExpressions = new Set<string>();
  rules.forEach((rule, i) => {
    const p = path.index(i);
    if (rule.claim !== '' && rule.expression !== '') errs.push(invalid(p, rule.claim, "claim and expression can't both be set"));
    else if (rule.claim === '' && rule.expression === '') errs.push(required(p, 'claim or expression is required'));
    else if (rule.claim !== '') {
      if (rule.message !== '') errs.push(invalid(p.child('message'), rule.message, 'may not be specified when claim is set'));
      if (seenClaims.has(rule.claim)) errs.push(duplicate(p.child('claim'), rule.claim));
      seenClaims.add(rule.claim);
    } else {
      if (rule.requiredValue !== '') errs.push(invalid(p.child('requiredValue'), rule.requiredValue, 'may not be specified when expression is set'));
      if (seenExpressions.has(rule.expression)) {
        errs.push(duplicate(p.child('expression'), rule.expression));
        return;
      }
      seenExpressions.add(rule.expression);
      const compiled = compileClaims(rule.expression, true, p.child('expression'), errs);
      if (compiled) mapper.claimValidationRules.push({ compiled, message: rule.message });
    }
  });
  return errs;
}

function validatePrefixedClaimOrExpression(m: PrefixedClaimOrExpression, path: FieldPath, claimOrExpressionRequired: boolean, errs: FieldError[]): CompiledExpression | undefined {
  if (m.expression !== '' && m.claim !== '') errs.push(invalid(path, '', "claim and expression can't both be set"));
  else if (m.expression === '' && m.claim === '' && claimOrExpressionRequired) errs.push(required(path, 'claim or expression is required'));
  else if (m.expression !== '') {
    if (m.prefix !== undefined) errs.push(invalid(path.child('prefix'), m.prefix, 'may not be specified when expression is set'));
    return compileClaims(m.expression, false, path.child('expression'), errs);
  } else if (m.claim !== '' && m.prefix === undefined) {
    errs.push(required(path.child('prefix'), 'prefix is required when claim is set. It can be set to an empty string to disable prefixing'));
  }
  return undefined;
}

/** `utilvalidation.IsDomainPrefixedPath`. */
function domainPrefixedPathErrors(path: FieldPath, key: string): FieldError[] {
  if (key === '') return [required(path)];
  const slash = key.indexOf('/');
  const host = slash < 0 ? key : key.slice(0, slash);
  const rest = slash < 0 ? '' : key.slice(slash + 1);
  if (slash < 0 || host === '' || rest === '') return [invalid(path, key, 'must be a domain-prefixed path (such as "acme.io/foo")')];
  const errs: FieldError[] = [];
  if (host.length > 253) errs.push(invalid(path, host, 'must be no more than 253 characters'));
  if (!DNS1123_SUBDOMAIN.test(host)) {
    errs.push(
      invalid(
        path,
        host,
        `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '${DNS1123_SUBDOMAIN_FMT}')`,
      ),
    );
  }
  if (!HTTP_PATH.test(rest)) return [...errs, invalid(path, rest, `Invalid path (regex used for validation is '${HTTP_PATH_FMT}')`)];
  return errs;
}

function isKubernetesDomain(key: string): boolean {
  const slash = key.indexOf('/');
  const domain = slash < 0 ? '' : key.slice(0, slash);
  return domain === 'kubernetes.io' || domain.endsWith('.kubernetes.io') || domain === 'k8s.io' || domain.endsWith('.k8s.io');
}

interface EmailUse {
  email: boolean;
  emailVerified: boolean;
}

function validateClaimMappings(a: JwtAuthenticatorConfig, path: FieldPath, mapper: CelMapper, emailUse: EmailUse): FieldError[] {
  const m = a.claimMappings;
  const errs: FieldError[] = [];
  const username = validatePrefixedClaimOrExpression(m.username, path.child('username'), true, errs);
  if (username) {
    mapper.username = username;
    emailUse.email ||= selectsClaim(username.ast, 'email');
    emailUse.emailVerified ||= selectsClaim(username.ast, 'email_verified');
  }
  const groups = validatePrefixedClaimOrExpression(m.groups, path.child('groups'), false, errs);
  if (groups) mapper.groups = groups;
  if (m.uid.claim !== '' && m.uid.expression !== '') errs.push(invalid(path.child('uid'), '', "claim and expression can't both be set"));
  else if (m.uid.expression !== '') {
    const uid = compileClaims(m.uid.expression, false, path.child('uid', 'expression'), errs);
    if (uid) mapper.uid = uid;
  }
  const seenKeys = new Set<string>();
  m.extra.forEach((e, i) => {
    const p = path.child('extra').index(i);
    errs.push(...domainPrefixedPathErrors(p.child('key'), e.key));
    if (e.key !== e.key.toLowerCase()) errs.push(invalid(p.child('key'), e.key, 'must be lowercase'));
    if (isKubernetesDomain(e.key)) errs.push(invalid(p.child('key'), e.key, 'k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use'));
    if (seenKeys.has(e.key)) {
      errs.push(duplicate(p.child('key'), e.key));
      return;
    }
    seenKeys.add(e.key);
    if (e.valueExpression === '') {
      errs.push(required(p.child('valueExpression')));
      return;
    }
    const compiled = compileClaims(e.valueExpression, false, p.child('valueExpression'), errs);
    if (compiled) {
      mapper.extra.push({ key: e.key, compiled });
      emailUse.emailVerified ||= selectsClaim(compiled.ast, 'email_verified');
    }
  });
  if (emailUse.email && !emailUse.emailVerified) {
    errs.push(
      invalid(
        path.child('username', 'expression'),
        m.username.expression,
        'claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression',
      ),
    );
  }
  return errs;
}

function validateUserValidationRules(rules: UserValidationRule[], path: FieldPath, mapper: CelMapper): FieldError[] {
  const errs: FieldError[] = [];
  const seen = new Set<string>();
  rules.forEach((rule, i) => {
    const p = path.index(i);
    if (rule.expression === '') {
      errs.push(required(p.child('expression')));
      return;
    }
    if (seen.has(rule.expression)) {
      errs.push(duplicate(p.child('expression'), rule.expression));
      return;
    }
    seen.add(rule.expression);
    const r = compileUserExpression(rule.expression);
    if (isCompileFailure(r)) errs.push(compileError(p.child('expression'), rule.expression, r));
    else mapper.userValidationRules.push({ compiled: r, message: rule.message });
  });
  return errs;
}

/** Validate and compile one `jwt[]` entry (`validateJWTAuthenticator`). */
export function compileJwtAuthenticator(a: JwtAuthenticatorConfig, path: FieldPath, disallowed: ReadonlySet<string> = new Set()): { errors: FieldError[]; compiled: CompiledJwtAuthenticator } {
  const mapper: CelMapper = { extra: [], claimValidationRules: [], userValidationRules: [] };
  const emailUse: EmailUse = { email: false, emailVerified: false };
  const errors = [...validateIssuer(a, disallowed, path.child('issuer')), ...validateClaimValidationRules(a.claimValidationRules, path.child('claimValidationRules'), mapper)];
  emailUse.emailVerified = mapper.claimValidationRules.some((r) => selectsClaim(r.compiled.ast, 'email_verified'));
  errors.push(...validateClaimMappings(a, path.child('claimMappings'), mapper, emailUse));
  errors.push(...validateUserValidationRules(a.userValidationRules, path.child('userValidationRules'), mapper));
  return { errors, compiled: { config: a, mapper } };
}

/** Validate the whole configuration (`ValidateAuthenticationConfiguration`), compiling its expressions. */
export function validateAuthenticationConfiguration(config: AuthenticationConfiguration, options: ValidationOptions = {}): ValidationResult {
  const root = FieldPath.of('jwt');
  if (config.jwt.length > MAX_JWT_AUTHENTICATORS) return { errors: [tooMany(root, config.jwt.length, MAX_JWT_AUTHENTICATORS)], authenticators: [] };
  const disallowed = new Set(options.disallowedIssuers ?? []);
  const errors: FieldError[] = [];
  const authenticators: CompiledJwtAuthenticator[] = [];
  const seenIssuers = new Set<string>();
  const seenDiscovery = new Set<string>();
  config.jwt.forEach((a, i) => {
    const p = root.index(i);
    const r = compileJwtAuthenticator(a, p, disallowed);
    errors.push(...r.errors);
    authenticators.push(r.compiled);
    if (seenIssuers.has(a.issuer.url)) errors.push(duplicate(p.child('issuer', 'url'), a.issuer.url));
    seenIssuers.add(a.issuer.url);
    if (a.issuer.discoveryURL !== '') {
      if (seenDiscovery.has(a.issuer.discoveryURL)) errors.push(duplicate(p.child('issuer', 'discoveryURL'), a.issuer.discoveryURL));
      seenDiscovery.add(a.issuer.discoveryURL);
    }
  });
  if (config.anonymous && !config.anonymous.enabled && config.anonymous.conditions.length > 0) {
    errors.push(invalid(FieldPath.of('anonymous', 'conditions'), config.anonymous.conditions, 'enabled should be set to true when conditions are defined'));
  }
  return { errors, authenticators };
}
