/** The test IdP is the demo's OpenID Provider (`dev/oidc-issuer.ts`): the tests and `demo --oidc` share it. */
import { TEST_CLIENT_ID, type TestProvider } from '../../dev/oidc-issuer.js';

export * from '../../dev/oidc-issuer.js';

/**
 * An AuthenticationConfiguration for `idp` as the tests use it: the `email` claim is the user name,
 * `groups` prefixed with `oidc:`, and no `system:` user names.
 */
export function authenticationConfigFor(idp: Pick<TestProvider, 'issuer' | 'ca'>): string {
  return `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${idp.issuer}
    audiences: [${TEST_CLIENT_ID}]
    certificateAuthority: ${JSON.stringify(idp.ca)}
  claimMappings:
    username: {claim: email, prefix: ""}
    groups: {claim: groups, prefix: "oidc:"}
  userValidationRules:
  - expression: "!user.username.startsWith('system:')"
    message: no system users
`;
}
