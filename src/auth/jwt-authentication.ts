/**
 * The JWT authenticators of `serve`, from `--authentication-config FILE` or from the legacy
 * `--oidc-*` flags: checked when the flags are resolved (no issuer contacted; an invalid file or
 * flag is a {@link ConfigError} naming the field, exit code 2), started by the server with its
 * logger and the metrics of its Registry.
 *
 * Both give a {@link JwtAuthenticatorSource}: the {@link JwtAuthenticator} in force, read per
 * request (a reload of the file replaces it), shared by every cluster the proxy fronts (one identity
 * across clusters: a cluster behind an agent still reviews authorization itself).
 *
 * Only with `--authn impersonate`: in passthrough the proxy verifies no token, the upstream does.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { AuthenticationConfigFile, checkAuthenticationConfigFile, type AuthenticationConfigLogger } from './authentication-config-file.js';
import { validateAuthenticationConfiguration, type CompiledJwtAuthenticator } from './authentication-config-validation.js';
import type { AnonymousAuthConfig } from './authentication-config.js';
import { aggregateMessage } from './field-errors.js';
import { JwtAuthenticator } from './jwt-authenticator.js';
import type { JwtMetrics } from './jwt-metrics.js';
import { authenticationConfigFromOidcFlags, oidcFlagsSet, validateOidcFlags, type OidcFlags } from './oidc-flags.js';

/** What `serve` was told: the file (re-read when it changes), or the compiled `--oidc-*` flags (fixed). */
export type JwtAuthenticationConfig =
  | { kind: 'file'; path: string; disallowedIssuers?: readonly string[] }
  | { kind: 'flags'; authenticators: CompiledJwtAuthenticator[]; signingAlgorithms: string[] };

/** The JWT authenticators in force (read per request) and how to stop them. */
export interface JwtAuthenticatorSource {
  readonly authenticator: JwtAuthenticator;
  /** The file's `anonymous` as it was at start (a reload may not change it); absent with the `--oidc-*` flags. */
  readonly anonymous?: AnonymousAuthConfig;
  close(): void;
}

/** What the server gives when it starts the authenticators. */
export interface JwtStartOptions {
  logger: AuthenticationConfigLogger;
  metrics: JwtMetrics;
}

/**
 * Check `--authentication-config` and the `--oidc-*` flags (kube-apiserver's rules and messages):
 * undefined when neither is given. Throws {@link ConfigError}.
 */
export async function parseJwtAuthentication(file: string | undefined, oidc: OidcFlags, authn: 'passthrough' | 'impersonate', disallowedIssuers?: readonly string[]): Promise<JwtAuthenticationConfig | undefined> {
  const flagsSet = oidcFlagsSet(oidc);
  if (file === undefined && !flagsSet) return undefined;
  const errors = validateOidcFlags(oidc, file);
  if (errors.length > 0) throw new ConfigError(errors.join('; '));
  if (authn !== 'impersonate') {
    const what = file !== undefined ? '--authentication-config' : 'the --oidc-* flags';
    throw new ConfigError(`${what} need --authn=impersonate: with --authn=passthrough the proxy does not verify tokens (the upstream does)`);
  }
  if (file !== undefined) {
    await checkAuthenticationConfigFile(file, disallowedIssuers);
    return { kind: 'file', path: file, ...(disallowedIssuers ? { disallowedIssuers } : {}) };
  }
  let fromFlags;
  try {
    fromFlags = authenticationConfigFromOidcFlags(oidc);
  } catch (e) {
    throw new ConfigError(`--oidc-ca-file: ${(e as Error).message}`, { cause: e });
  }
  if (!fromFlags) return undefined;
  const { errors: invalid, authenticators } = validateAuthenticationConfiguration(fromFlags.config, disallowedIssuers ? { disallowedIssuers } : {});
  if (invalid.length > 0) throw new ConfigError(`--oidc-* flags: ${aggregateMessage(invalid)}`);
  return { kind: 'flags', authenticators, signingAlgorithms: fromFlags.signingAlgorithms };
}

/**
 * The issuer of the proxy's own token when it is a JWT (a service-account token of the cluster the
 * proxy calls: `--in-cluster`, or an `--upstream-token-file` holding one), read unverified; undefined
 * otherwise. kube-apiserver refuses a JWT authenticator for its own `--service-account-issuer`; the
 * proxy knows that issuer only this way, and passes it as a disallowed issuer, so the cluster's own
 * service-account tokens keep going to its TokenReview.
 */
export function serviceAccountIssuerOf(tokenFile: string | undefined): string | undefined {
  if (tokenFile === undefined) return undefined;
  try {
    const parts = readFileSync(tokenFile, 'utf8').trim().split('.');
    if (parts.length !== 3) return undefined;
    const iss = (JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as { iss?: unknown }).iss;
    return typeof iss === 'string' && iss !== '' ? iss : undefined;
  } catch {
    return undefined;
  }
}

/** Start the authenticators (never waiting on an issuer). The file is loaded again: a change since the check throws ConfigError. */
export async function startJwtAuthentication(config: JwtAuthenticationConfig, o: JwtStartOptions): Promise<JwtAuthenticatorSource> {
  if (config.kind === 'file') {
    return AuthenticationConfigFile.load(config.path, { logger: o.logger, metrics: o.metrics, ...(config.disallowedIssuers ? { disallowedIssuers: config.disallowedIssuers } : {}) });
  }
  const authenticator = new JwtAuthenticator(config.authenticators, { signingAlgorithms: config.signingAlgorithms, metrics: o.metrics, log: o.logger });
  return { authenticator, close: () => authenticator.close() };
}
