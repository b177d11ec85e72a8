/**
 * The dev cluster's authorizer: a small JSON policy file with RBAC's matching rules, plus the
 * built-in `system:discovery` grant (non-resource discovery paths for every authenticated user).
 *
 * ```json
 * {"rules":[{"users":["alice"],"groups":["devs"],"verbs":["get","create"],
 *            "resources":["pods","pods/exec"],"namespaces":["default"],"names":["demo"]}]}
 * ```
 * A rule applies when the user is listed in `users` or one of its groups in `groups`. `verbs` and
 * `resources` (`resource` or `resource/subresource`; `*` and `*`/`subresource` as in RBAC) must match;
 * omitted `namespaces`, `names` or `apiGroups` match anything (a listed `namespaces` never matches a
 * cluster-scoped request unless it holds `*`). `nonResourceURLs` (exact, `*`, or a `prefix*`) grants
 * non-resource paths. A request no rule allows gets no opinion, which denies it.
 */
import { readFileSync } from 'node:fs';
import type { AuthorizerAttributes } from './request-attributes.js';
import { ALL_AUTHENTICATED } from './token-auth.js';

/** One rule of the policy file. */
export interface PolicyRule {
  /** User names the rule applies to. */
  users?: string[];
  /** Groups the rule applies to. */
  groups?: string[];
  /** Verbs (`get`, `list`, `watch`, `create`, `impersonate`, … or `*`). */
  verbs: string[];
  /** `resource` or `resource/subresource`, `*`, `*`/`subresource`. */
  resources?: string[];
  /** API groups (`""` is core); omitted = any. */
  apiGroups?: string[];
  /** Namespaces; omitted = any, cluster scope included. */
  namespaces?: string[];
  /** Object names (RBAC resourceNames); omitted = any. */
  names?: string[];
  /** Non-resource paths: `/healthz`, `/logs/*`, `*`. */
  nonResourceURLs?: string[];
}

/** The policy file's content. */
export interface Policy {
  rules: PolicyRule[];
}

/** An authorizer's answer. */
export interface Decision {
  allowed: boolean;
  /** Why (for SubjectAccessReview `status.reason`); `''` on no opinion, as RBAC answers. */
  reason: string;
}

/** SelfSubjectRulesReview's `status` rules (authorization.k8s.io/v1 ResourceRule / NonResourceRule). */
export interface SubjectRules {
  resourceRules: { verbs: string[]; apiGroups?: string[]; resources?: string[]; resourceNames?: string[] }[];
  nonResourceRules: { verbs: string[]; nonResourceURLs?: string[] }[];
  /** True when the authorizer cannot list everything it would allow. */
  incomplete: boolean;
}

/** Something that decides requests (the policy, or allow-all when there is none). */
export interface Authorizer {
  authorize(attrs: AuthorizerAttributes): Decision;
  /** What `user` may do in `namespace` (RBAC's `RulesFor`), for SelfSubjectRulesReview. */
  rulesFor(user: AuthorizerAttributes['user'], namespace: string): SubjectRules;
}

/** A policy file that cannot be used. */
export class PolicyFileError extends Error {
  override readonly name = 'PolicyFileError';
  readonly code = 'DEV_CLUSTER_BAD_POLICY_FILE' as const;
}

/** The `system:discovery` ClusterRole's paths, granted to `system:authenticated`. */
export const DISCOVERY_PATHS: readonly string[] = [
  '/api', '/api/*', '/apis', '/apis/*', '/version', '/version/', '/openapi', '/openapi/*',
  '/healthz', '/livez', '/readyz',
];

/**
 * The `system:basic-user` ClusterRole, granted to `system:authenticated`: every user may ask what
 * it may do itself (`kubectl auth can-i`).
 */
export const BASIC_USER_RULE: PolicyRule = {
  groups: [ALL_AUTHENTICATED],
  verbs: ['create'],
  apiGroups: ['authorization.k8s.io'],
  resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'],
};

/** The rest of `system:basic-user`: every user may ask who it is (`kubectl auth whoami`). */
export const BASIC_USER_WHOAMI_RULE: PolicyRule = {
  groups: [ALL_AUTHENTICATED],
  verbs: ['create'],
  apiGroups: ['authentication.k8s.io'],
  resources: ['selfsubjectreviews'],
};

const STRING_LIST_FIELDS = ['users', 'groups', 'verbs', 'resources', 'apiGroups', 'namespaces', 'names', 'nonResourceURLs'] as const;

/** Validate a parsed policy document (throws {@link PolicyFileError} naming the bad field). */
export function parsePolicy(doc: unknown, source = 'policy'): Policy {
  if (typeof doc !== 'object' || doc === null || !Array.isArray((doc as { rules?: unknown }).rules)) {
    throw new PolicyFileError(`${source}: expected an object with a "rules" array`);
  }
  const rules = (doc as { rules: unknown[] }).rules.map((raw, i): PolicyRule => {
    const where = `${source}: rules[${i}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new PolicyFileError(`${where}: expected an object`);
    const rule = raw as Record<string, unknown>;
    for (const key of Object.keys(rule)) {
      if (!(STRING_LIST_FIELDS as readonly string[]).includes(key)) throw new PolicyFileError(`${where}: unknown field "${key}"`);
    }
    for (const key of STRING_LIST_FIELDS) {
      const v = rule[key];
      if (v !== undefined && (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))) {
        throw new PolicyFileError(`${where}.${key}: expected an array of strings`);
      }
    }
    if (!Array.isArray(rule.verbs) || rule.verbs.length === 0) throw new PolicyFileError(`${where}.verbs: required`);
    if (rule.resources === undefined && rule.nonResourceURLs === undefined) {
      throw new PolicyFileError(`${where}: needs "resources" or "nonResourceURLs"`);
    }
    return rule as unknown as PolicyRule;
  });
  return { rules };
}

/** Read and validate a policy file. */
export function loadPolicyFile(path: string): Policy {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    if (err instanceof SyntaxError) throw new PolicyFileError(`${path}: not valid JSON: ${err.message}`);
    throw err;
  }
  return parsePolicy(doc, path);
}

const has = (list: readonly string[] | undefined, value: string): boolean =>
  list === undefined || list.includes('*') || list.includes(value);

/** RBAC `ResourceMatches`: `*`, the exact `resource/subresource`, or `*`/`subresource`. */
function resourceMatches(list: readonly string[], resource: string, subresource: string): boolean {
  const combined = subresource ? `${resource}/${subresource}` : resource;
  return list.some((r) => r === '*' || r === combined || (subresource !== '' && r === `*/${subresource}`));
}

/** RBAC `NonResourceURLMatches`: exact, `*`, or a trailing-`*` prefix. */
function nonResourceURLMatches(list: readonly string[], path: string): boolean {
  return list.some((u) => u === '*' || u === path || (u.endsWith('*') && path.startsWith(u.slice(0, -1))));
}

/** True when `rule` applies to the user of `attrs`. */
function appliesTo(rule: PolicyRule, attrs: AuthorizerAttributes): boolean {
  return (rule.users ?? []).includes(attrs.user.name) || (rule.groups ?? []).some((g) => attrs.user.groups.includes(g));
}

/** True when `rule` grants `attrs` (ignoring whom it applies to). */
export function ruleAllows(rule: PolicyRule, attrs: AuthorizerAttributes): boolean {
  if (!rule.verbs.includes('*') && !rule.verbs.includes(attrs.verb)) return false;
  if (!attrs.resourceRequest) return rule.nonResourceURLs !== undefined && nonResourceURLMatches(rule.nonResourceURLs, attrs.path);
  if (rule.resources === undefined || !resourceMatches(rule.resources, attrs.resource, attrs.subresource)) return false;
  if (!has(rule.apiGroups, attrs.apiGroup)) return false;
  if (rule.namespaces !== undefined && !rule.namespaces.includes('*')) {
    if (attrs.namespace === '' || !rule.namespaces.includes(attrs.namespace)) return false;
  }
  if (rule.names !== undefined && !rule.names.includes('*') && !rule.names.includes(attrs.name)) return false;
  return true;
}

/** Authorizes by a {@link Policy}. */
export class PolicyAuthorizer implements Authorizer {
  constructor(readonly policy: Policy) {}

  /** Read `path` (throws {@link PolicyFileError} or the fs error). */
  static fromFile(path: string): PolicyAuthorizer {
    return new PolicyAuthorizer(loadPolicyFile(path));
  }

  authorize(attrs: AuthorizerAttributes): Decision {
    if (
      !attrs.resourceRequest &&
      attrs.verb === 'get' &&
      attrs.user.groups.includes(ALL_AUTHENTICATED) &&
      nonResourceURLMatches(DISCOVERY_PATHS, attrs.path)
    ) {
      return { allowed: true, reason: 'allowed by the built-in system:discovery grant to system:authenticated' };
    }
    if ([BASIC_USER_RULE, BASIC_USER_WHOAMI_RULE].some((rule) => appliesTo(rule, attrs) && ruleAllows(rule, attrs))) {
      return { allowed: true, reason: 'allowed by the built-in system:basic-user grant to system:authenticated' };
    }
    const index = this.policy.rules.findIndex((rule) => appliesTo(rule, attrs) && ruleAllows(rule, attrs));
    if (index >= 0) return { allowed: true, reason: `allowed by dev-cluster policy rule ${index}` };
    return { allowed: false, reason: '' };
  }

  rulesFor(user: AuthorizerAttributes['user'], namespace: string): SubjectRules {
    const applies = (rule: PolicyRule): boolean =>
      (rule.users ?? []).includes(user.name) || (rule.groups ?? []).some((g) => user.groups.includes(g));
    const inNamespace = (rule: PolicyRule): boolean =>
      rule.namespaces === undefined || rule.namespaces.includes('*') || rule.namespaces.includes(namespace);
    const out: SubjectRules = { resourceRules: [], nonResourceRules: [], incomplete: false };
    for (const rule of [BASIC_USER_RULE, BASIC_USER_WHOAMI_RULE, ...this.policy.rules]) {
      if (!applies(rule)) continue;
      if (rule.resources !== undefined && inNamespace(rule)) {
        const r: SubjectRules['resourceRules'][number] = { verbs: rule.verbs, apiGroups: rule.apiGroups ?? ['*'], resources: rule.resources };
        if (rule.names !== undefined) r.resourceNames = rule.names;
        out.resourceRules.push(r);
      }
      if (rule.nonResourceURLs !== undefined) out.nonResourceRules.push({ verbs: rule.verbs, nonResourceURLs: rule.nonResourceURLs });
    }
    if (user.groups.includes(ALL_AUTHENTICATED)) out.nonResourceRules.push({ verbs: ['get'], nonResourceURLs: [...DISCOVERY_PATHS] });
    return out;
  }
}

/** The authorizer when no policy file is given: every authenticated request is allowed. */
export const ALWAYS_ALLOW: Authorizer = {
  authorize: () => ({ allowed: true, reason: '' }),
  rulesFor: () => ({
    resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }],
    nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
    incomplete: false,
  }),
};
