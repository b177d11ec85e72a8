/**
 * `serve`'s `--authentication-config` and `--oidc-*` flags turned into the JWT authentication
 * configuration (src/auth/jwt-authentication.ts, imported only when one of them is given: without
 * them the proxy never loads jose's verification, the CEL engine or the config file loader).
 */
import type { AuthnMode } from './request-auth.js';
import type { JwtAuthenticationConfig } from './jwt-authentication.js';

/** The flags, as `ServeFlags` names them (camelCase of the flag names). */
export interface JwtServeFlags {
  authenticationConfig?: string;
  oidcIssuerUrl?: string;
  oidcClientId?: string;
  oidcCaFile?: string;
  oidcUsernameClaim?: string;
  oidcUsernamePrefix?: string;
  oidcGroupsClaim?: string;
  oidcGroupsPrefix?: string;
  /** Comma-separated. */
  oidcSigningAlgs?: string;
  /** Each `key=value`. */
  oidcRequiredClaim?: string[];
  /** Where the proxy's own token comes from (its issuer is a disallowed JWT issuer). */
  inCluster?: boolean;
  upstreamTokenFile?: string;
}

/**
 * `--authentication-config` and `--oidc-*` (src/auth/jwt-authentication.ts), loaded only when one of
 * them is given: without them the proxy never loads jose, the CEL engine or the YAML parser.
 */
export async function parseJwtServeFlags(flags: JwtServeFlags, authn: AuthnMode): Promise<JwtAuthenticationConfig | undefined> {
  const oidc = [flags.oidcIssuerUrl, flags.oidcClientId, flags.oidcCaFile, flags.oidcUsernameClaim, flags.oidcUsernamePrefix, flags.oidcGroupsClaim, flags.oidcGroupsPrefix, flags.oidcSigningAlgs];
  if (flags.authenticationConfig === undefined && oidc.every((f) => f === undefined) && !(flags.oidcRequiredClaim?.length)) return undefined;
  const { parseJwtAuthentication, serviceAccountIssuerOf } = await import('./jwt-authentication.js');
  // The proxy's own cluster's service-account issuer, when its token tells it: a disallowed JWT issuer.
  const tokenFile = flags.inCluster ? `${process.env.KSP_IN_CLUSTER_PATH_PREFIX ?? ''}/var/run/secrets/kubernetes.io/serviceaccount/token` : flags.upstreamTokenFile;
  const iss = serviceAccountIssuerOf(tokenFile);
  return parseJwtAuthentication(
    flags.authenticationConfig,
    {
      ...(flags.oidcIssuerUrl !== undefined ? { issuerURL: flags.oidcIssuerUrl } : {}),
      ...(flags.oidcClientId !== undefined ? { clientID: flags.oidcClientId } : {}),
      ...(flags.oidcCaFile !== undefined ? { caFile: flags.oidcCaFile } : {}),
      ...(flags.oidcUsernameClaim !== undefined ? { usernameClaim: flags.oidcUsernameClaim } : {}),
      ...(flags.oidcUsernamePrefix !== undefined ? { usernamePrefix: flags.oidcUsernamePrefix } : {}),
      ...(flags.oidcGroupsClaim !== undefined ? { groupsClaim: flags.oidcGroupsClaim } : {}),
      ...(flags.oidcGroupsPrefix !== undefined ? { groupsPrefix: flags.oidcGroupsPrefix } : {}),
      ...(flags.oidcSigningAlgs !== undefined ? { signingAlgs: flags.oidcSigningAlgs.split(',').map((v) => v.trim()).filter((v) => v !== '') } : {}),
      ...(flags.oidcRequiredClaim !== undefined && flags.oidcRequiredClaim.length > 0 ? { requiredClaims: flags.oidcRequiredClaim } : {}),
    },
    authn,
    iss === undefined ? undefined : [iss],
  );
}
