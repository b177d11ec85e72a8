/**
 * The proxy's token file, trimmed as client-go trims it, for every way the proxy learns its
 * credentials (`--upstream-token-file`, a kubeconfig's `token-file` or `tokenFile` auth provider, the
 * in-cluster service-account token) and for both consumers: the upstream's headers and the
 * client-node KubeConfig of TokenReview / SubjectAccessReview / pod and node lookups.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import { resolveConfig } from '../../src/config.js';
import { TokenFile, useTrimmedTokenFiles } from '../../src/token-file.js';

const work = mkdtempSync(join(tmpdir(), 'ksp-token-file-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The Authorization header client-node would send with `kc`. */
async function kubeConfigAuthorization(kc: KubeConfig): Promise<unknown> {
  const opts: { headers: Record<string, unknown> } = { headers: {} };
  await kc.applyToHTTPSOptions(opts as Parameters<KubeConfig['applyToHTTPSOptions']>[0]);
  return opts.headers.Authorization;
}

describe.each([
  ['LF', '\n'],
  ['CRLF', '\r\n'],
  ['spaces and tabs', ' \t'],
])('a token file ending in %s', (name, ending) => {
  const tokenPath = join(work, `token-${name.replace(/\W/g, '')}`);
  writeFileSync(tokenPath, `proxy-token${ending}`);

  it.each(['passthrough', 'impersonate'] as const)('--upstream-token-file, --authn %s: upstream headers and the API client send the trimmed token', async (authn) => {
    const config = await resolveConfig({ upstream: 'https://127.0.0.1:1', upstreamTokenFile: tokenPath, authn });
    expect(await config.upstream!.authHeaders()).toEqual({ Authorization: 'Bearer proxy-token' });
    expect(await kubeConfigAuthorization(await config.security!.apiKubeConfig())).toBe('Bearer proxy-token');
  });

  it.each([
    ['token-file', (path: string) => `    token-file: ${path}\n`],
    ['auth-provider tokenFile', (path: string) => `    auth-provider:\n      name: tokenFile\n      config:\n        tokenFile: ${path}\n`],
  ])('--kubeconfig with %s: upstream headers and the API client send the trimmed token', async (_kind, user) => {
    const kubeconfig = join(work, `kubeconfig-${name.replace(/\W/g, '')}-${_kind.replace(/\W/g, '')}`);
    writeFileSync(
      kubeconfig,
      'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n' +
        `users:\n- name: u\n  user:\n${user(tokenPath)}contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n`,
    );
    const config = await resolveConfig({ kubeconfig, authn: 'impersonate' });
    expect(await config.upstream!.authHeaders()).toMatchObject({ Authorization: 'Bearer proxy-token' });
    expect(await kubeConfigAuthorization(await config.security!.apiKubeConfig())).toBe('Bearer proxy-token');
  });

  it('in-cluster (client-node tokenFile provider): trimmed', async () => {
    const prefix = join(work, `in-cluster-${name.replace(/\W/g, '')}`);
    const dir = join(prefix, 'var/run/secrets/kubernetes.io/serviceaccount');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'token'), `proxy-token${ending}`);
    // Only read, never parsed, on the way to the Authorization header.
    writeFileSync(join(dir, 'ca.crt'), 'not a certificate');
    const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
    process.env.KUBERNETES_SERVICE_HOST = '127.0.0.1';
    process.env.KUBERNETES_SERVICE_PORT = '6443';
    try {
      const kc = new KubeConfig();
      kc.loadFromCluster(prefix);
      expect(await kubeConfigAuthorization(kc)).toBe(`Bearer proxy-token${ending}`);
      expect(await kubeConfigAuthorization(useTrimmedTokenFiles(kc))).toBe('Bearer proxy-token');
    } finally {
      for (const [k, v] of [['KUBERNETES_SERVICE_HOST', saved.host], ['KUBERNETES_SERVICE_PORT', saved.port]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});

describe('TokenFile', () => {
  it('refuses a file holding only whitespace', () => {
    const path = join(work, 'blank');
    writeFileSync(path, ' \r\n');
    expect(() => new TokenFile(path)).toThrow(/--upstream-token-file: .* is empty/);
  });
});
