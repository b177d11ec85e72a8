/**
 * `demo --oidc`: single sign-on for the demo (issue 22). A real OpenID Provider on loopback
 * (`oidc-issuer.ts`, npm oidc-provider) with one demo user and a sign-in page; the proxy switched
 * to `--authn impersonate` with an AuthenticationConfiguration for that issuer and HTTPS (kubectl
 * sends exec-plugin credentials only over TLS); the dev clusters with token authentication (the
 * proxy's or the agents' own tokens) and a policy letting the OIDC group do anything; and a
 * kubeconfig user that runs `kube-stream-proxy login` (the device flow) as its exec plugin.
 *
 * Everything is written under `<kubeconfig dir>/oidc/`, the plugin's token cache included. The issuer listens on a free port, so a new
 * demo is a new issuer and the plugin's token cache (named by the issuer) never offers a token of an
 * old one.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError } from '../src/errors.js';
import type { ServeFlags } from '../src/config.js';
import type { DevClusterOptions } from './cluster/dev-cluster.js';
import { createTestPki, type TestPki } from './dev-pki.js';
import type { DevOidcIssuer, DevOidcUser } from './oidc-issuer.js';

/** The demo's one user: sign in with this name and password on the issuer's page. */
export const DEMO_OIDC_LOGIN = 'alice';
export const DEMO_OIDC_PASSWORD = 'demo-password';
export const DEMO_OIDC_USER: DevOidcUser = { password: DEMO_OIDC_PASSWORD, email: 'alice@example.com', emailVerified: true, groups: ['developers'], name: 'Alice' };

/** The Kubernetes user and group the demo user becomes (the AuthenticationConfiguration's mappings). */
export const DEMO_OIDC_USERNAME = 'alice@example.com';
export const DEMO_OIDC_GROUP = 'oidc:developers';

/** The dev clusters' user names for the proxy itself and for the agents (token authentication). */
const PROXY_USER = 'kube-stream-proxy';
const AGENT_USER = 'system:serviceaccount:kube-system:kube-stream-proxy-agent';
const METRICS_USER = 'system:serviceaccount:kube-system:metrics-server';

/** bin/kube-stream-proxy.js, which the kubeconfig's exec plugin runs (this file runs from dist/dev/ or, in tests, from dev/). */
const BIN = [resolve(import.meta.dirname, '../../bin/kube-stream-proxy.js'), resolve(import.meta.dirname, '../bin/kube-stream-proxy.js')].find((p) => existsSync(p))!;

/** What `demo --oidc` set up. */
export interface DemoOidc {
  issuer: DevOidcIssuer;
  /** The proxy's serving certificate (dev PKI) and its CA, for the kubeconfig. */
  pki: TestPki;
  /** The `serve` flags that turn the proxy into an OIDC-authenticating, impersonating one. */
  serveFlags: Partial<ServeFlags>;
  /** Token file of the metrics reader (dev-metrics reads the dev cluster with it). */
  metricsTokenFile: string;
  /** The agents' token file (`--upstream-token-file`) for clusters behind agents. */
  agentTokenFile: string;
  /** Dev cluster options: token authentication (the proxy's, the agents' and dev-metrics' tokens) and the policy. */
  clusterSecurity(): Pick<DevClusterOptions, 'tokenAuthFile' | 'authorizationPolicyFile'>;
  /** The kubeconfig user: `kube-stream-proxy login` as an exec plugin. */
  user: { exec: Record<string, unknown> };
  /** Banner lines. */
  banner: string;
  close(): Promise<void>;
}

/** The demo's AuthenticationConfiguration for `issuer`. */
export function demoAuthenticationConfiguration(issuer: Pick<DevOidcIssuer, 'issuer' | 'ca'>, clientId: string): string {
  return `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${issuer.issuer}
    audiences: [${clientId}]
    certificateAuthority: ${JSON.stringify(issuer.ca)}
  claimMappings:
    username: {claim: email, prefix: ""}
    groups: {claim: groups, prefix: "oidc:"}
  userValidationRules:
  - expression: "!user.username.startsWith('system:')"
    message: no system users
`;
}

/** Start the issuer and write every file `demo --oidc` needs under `dir`. Throws ConfigError without oidc-provider. */
export async function startDemoOidc(dir: string): Promise<DemoOidc> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  let mod: typeof import('./oidc-issuer.js');
  try {
    mod = await import('./oidc-issuer.js');
  } catch (e) {
    throw new ConfigError(`--oidc: ${(e as Error).message}`, { cause: e });
  }
  let issuer: DevOidcIssuer;
  try {
    issuer = await mod.startDevOidcIssuer({ users: { [DEMO_OIDC_LOGIN]: DEMO_OIDC_USER }, dir: join(dir, 'issuer') });
  } catch (e) {
    if (e instanceof mod.OidcProviderMissingError) throw new ConfigError(`--oidc: ${e.message}`, { cause: e });
    throw e;
  }
  mkdirSync(join(dir, 'pki'), { recursive: true, mode: 0o700 });
  const pki = await createTestPki(join(dir, 'pki'));
  const write = (name: string, content: string): string => {
    const path = join(dir, name);
    writeFileSync(path, content, { mode: 0o600 });
    return path;
  };
  const token = (): string => randomBytes(24).toString('base64url');
  const proxyToken = token();
  const agentToken = token();
  const metricsToken = token();
  const proxyTokenFile = write('proxy.token', `${proxyToken}\n`);
  const agentTokenFile = write('agent.token', `${agentToken}\n`);
  const metricsTokenFile = write('metrics.token', `${metricsToken}\n`);
  const idpCaFile = write('issuer-ca.pem', issuer.ca);
  const authConfigFile = write('authentication-config.yaml', demoAuthenticationConfiguration(issuer, mod.DEMO_CLIENT_ID));
  const tokens = write('cluster-tokens.csv', [`${proxyToken},${PROXY_USER},proxy,""`, `${agentToken},${AGENT_USER},agent,""`, `${metricsToken},${METRICS_USER},metrics,""`].join('\n') + '\n');
  const reviewer = [PROXY_USER, AGENT_USER];
  const policy = write(
    'cluster-policy.json',
    JSON.stringify({
      rules: [
        // The proxy (direct) or the agent (behind it) reviews callers and impersonates them.
        { users: reviewer, verbs: ['create'], resources: ['tokenreviews', 'subjectaccessreviews'] },
        { users: reviewer, verbs: ['impersonate'], resources: ['users', 'groups', 'uids', 'userextras/authentication.kubernetes.io/credential-id'] },
        // The proxy resolves the aggregated dev-metrics through the API.
        { users: [PROXY_USER], verbs: ['get', 'list', 'watch'], resources: ['pods', 'nodes', 'services', 'endpointslices'] },
        // dev-metrics reads the kubelet's resource metrics and publishes its EndpointSlice.
        { users: [METRICS_USER], verbs: ['*'], resources: ['*'], nonResourceURLs: ['*'] },
        // The signed-in demo user may do anything.
        { groups: [DEMO_OIDC_GROUP], verbs: ['*'], resources: ['*'], nonResourceURLs: ['*'] },
      ],
    }),
  );
  const exec = {
    apiVersion: 'client.authentication.k8s.io/v1',
    command: process.execPath,
    args: [BIN, 'login', `--oidc-issuer-url=${issuer.issuer}`, `--oidc-client-id=${mod.DEMO_CLIENT_ID}`, '--oidc-extra-scope=email,groups', `--certificate-authority=${idpCaFile}`, `--token-cache-dir=${join(dir, 'token-cache')}`],
    interactiveMode: 'IfAvailable',
    provideClusterInfo: false,
  };
  return {
    issuer,
    pki,
    serveFlags: {
      authn: 'impersonate',
      authenticationConfig: authConfigFile,
      tlsCertFile: pki.server.certFile,
      tlsPrivateKeyFile: pki.server.keyFile,
      upstreamTokenFile: proxyTokenFile,
    },
    metricsTokenFile,
    agentTokenFile,
    clusterSecurity: () => ({ tokenAuthFile: tokens, authorizationPolicyFile: policy }),
    user: { exec },
    banner:
      `OpenID Provider (npm oidc-provider) listening on ${issuer.issuer}: sign in as ${DEMO_OIDC_LOGIN} / ${DEMO_OIDC_PASSWORD}\n` +
      `the proxy authenticates with it (--authentication-config ${authConfigFile}, --authn impersonate); kubectl logs in with kube-stream-proxy login (device code: open the URL it prints)\n`,
    close: () => issuer.close(),
  };
}
