/**
 * kube-apiserver's legacy `--oidc-*` flags, mapped onto the same {@link AuthenticationConfiguration}
 * the `--authentication-config` file gives (kubernetes/kubernetes
 * `pkg/kubeapiserver/options/authentication.go`, `ToAuthenticationConfig` and
 * `validateOIDCOptions`), with kube-apiserver's defaults and messages:
 * - `--oidc-username-claim` defaults to `sub`; without `--oidc-username-prefix`, a claim other than
 *   `email` is prefixed with `<issuer-url>#`; the prefix `-` means none;
 * - `--oidc-client-id` is the one audience; `--oidc-ca-file`'s content is `certificateAuthority`;
 * - `--oidc-required-claim k=v` (repeatable) become `claim`/`requiredValue` rules;
 * - `--oidc-signing-algs` (default RS256) restricts the algorithms, which the file form cannot.
 * Giving any of them with `--authentication-config` is refused. The command line is not wired here:
 * `src/config.ts` calls these functions.
 */
import { readFileSync } from 'node:fs';
import type { AuthenticationConfiguration, JwtAuthenticatorConfig } from './authentication-config.js';
import { ALL_SIGNING_ALGORITHMS } from './issuer-authenticator.js';

/** The flags, by kube-apiserver's names. */
export const OIDC_FLAG_NAMES = [
  'oidc-issuer-url',
  'oidc-client-id',
  'oidc-ca-file',
  'oidc-username-claim',
  'oidc-username-prefix',
  'oidc-groups-claim',
  'oidc-groups-prefix',
  'oidc-signing-algs',
  'oidc-required-claim',
] as const;

/** `--oidc-username-claim`'s default. */
export const DEFAULT_OIDC_USERNAME_CLAIM = 'sub';

/** `--oidc-signing-algs`' default. */
export const DEFAULT_OIDC_SIGNING_ALGS = ['RS256'];

/** The `--oidc-*` values as given (undefined = flag not given). */
export interface OidcFlags {
  issuerURL?: string;
  clientID?: string;
  /** Path of the PEM CA file. */
  caFile?: string;
  usernameClaim?: string;
  usernamePrefix?: string;
  groupsClaim?: string;
  groupsPrefix?: string;
  /** `--oidc-signing-algs`, split on commas. */
  signingAlgs?: string[];
  /** `--oidc-required-claim` values, each `key=value`. */
  requiredClaims?: string[];
}

/** The configuration the flags stand for, and the algorithms they allow. */
export interface OidcFlagsConfig {
  config: AuthenticationConfiguration;
  signingAlgorithms: string[];
}

/** Whether any `--oidc-*` flag was given (kube-apiserver's `FlagsSet`). */
export function oidcFlagsSet(flags: OidcFlags): boolean {
  return Object.values(flags).some((v) => v !== undefined);
}

/**
 * The start-up errors of this flag combination (empty when fine): the `--authentication-config`
 * conflict, a half-given issuer/client pair, an algorithm outside the allow-list, a malformed
 * required claim.
 */
export function validateOidcFlags(flags: OidcFlags, authenticationConfigFile?: string): string[] {
  if (!oidcFlagsSet(flags)) return [];
  if (authenticationConfigFile) return ['authentication-config file and oidc-* flags are mutually exclusive'];
  const errors: string[] = [];
  if (!flags.issuerURL || !flags.clientID) errors.push('oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set');
  for (const alg of flags.signingAlgs ?? []) {
    if (!(ALL_SIGNING_ALGORITHMS as readonly string[]).includes(alg)) errors.push(`oidc: unsupported signing alg: ${JSON.stringify(alg)}`);
  }
  for (const pair of flags.requiredClaims ?? []) {
    if (!pair.includes('=')) errors.push(`invalid argument ${JSON.stringify(pair)} for "--oidc-required-claim" flag: malformed pair, expect string=string`);
  }
  return errors;
}

/**
 * The configuration `--oidc-*` flags stand for, or undefined when they do not configure an
 * authenticator (no issuer or no client id). Call {@link validateOidcFlags} first; the result still
 * goes through `validateAuthenticationConfiguration`, as kube-apiserver validates it.
 */
export function authenticationConfigFromOidcFlags(flags: OidcFlags, readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): OidcFlagsConfig | undefined {
  if (!flags.issuerURL || !flags.clientID) return undefined;
  const usernameClaim = flags.usernameClaim ?? DEFAULT_OIDC_USERNAME_CLAIM;
  let usernamePrefix = flags.usernamePrefix ?? '';
  // Legacy behaviour (k/k #31380): claims other than email are prefixed with the issuer URL.
  if (usernamePrefix === '' && usernameClaim !== 'email') usernamePrefix = `${flags.issuerURL}#`;
  if (usernamePrefix === '-') usernamePrefix = '';
  const required = new Map<string, string>();
  for (const pair of flags.requiredClaims ?? []) {
    const eq = pair.indexOf('=');
    required.set(pair.slice(0, eq), pair.slice(eq + 1));
  }
  const jwt: JwtAuthenticatorConfig = {
    issuer: {
      url: flags.issuerURL,
      discoveryURL: '',
      certificateAuthority: flags.caFile ? readFile(flags.caFile) : '',
      audiences: [flags.clientID],
      audienceMatchPolicy: '',
      egressSelectorType: '',
    },
    claimValidationRules: [...required].map(([claim, requiredValue]) => ({ claim, requiredValue, expression: '', message: '' })),
    claimMappings: {
      username: { claim: usernameClaim, prefix: usernamePrefix, expression: '' },
      groups: flags.groupsClaim ? { claim: flags.groupsClaim, prefix: flags.groupsPrefix ?? '', expression: '' } : { claim: '', expression: '' },
      uid: { claim: '', expression: '' },
      extra: [],
    },
    userValidationRules: [],
  };
  return { config: { apiVersion: '', jwt: [jwt] }, signingAlgorithms: flags.signingAlgs?.length ? flags.signingAlgs : [...DEFAULT_OIDC_SIGNING_ALGS] };
}
