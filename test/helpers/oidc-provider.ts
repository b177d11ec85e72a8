/** The test IdP is the demo's OpenID Provider (`dev/oidc-issuer.ts`): the tests and `demo --oidc` share it. */
export * from '../../dev/oidc-issuer.js';
