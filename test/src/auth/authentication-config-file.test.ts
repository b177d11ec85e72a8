/**
 * `--authentication-config` loading and reloading: start-up errors, a ConfigMap-style symlink swap
 * seen by the directory watch, bad reloads keeping the last good configuration (logged, counted,
 * remembered), a reload whose issuer is unreachable, the `anonymous` change refusal, and the
 * controller metrics under kube-apiserver's names.
 */
import { once } from 'node:events';
import { mkdir, mkdtemp, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AuthenticationConfigFile, type AuthenticationConfigFileOptions } from '../../../src/auth/authentication-config-file.js';
import { createJwtMetrics, kubeHash } from '../../../src/auth/jwt-metrics.js';
import { ConfigError } from '../../../src/errors.js';
import { counterValue } from '../../helpers/metrics.js';
import { startTestProvider, TEST_CLIENT_ID, type TestProvider } from '../../helpers/oidc-provider.js';

let idp: TestProvider;
let dir: string;
const files: AuthenticationConfigFile[] = [];

beforeAll(async () => {
  idp = await startTestProvider();
});
afterAll(async () => {
  await idp?.close();
});
afterEach(async () => {
  for (const f of files.splice(0)) f.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const indent = (s: string, n: number): string => s.trimEnd().split('\n').map((l) => ' '.repeat(n) + l).join('\n');

function yaml(o: { prefix?: string; url?: string; anonymous?: string } = {}): string {
  return `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${o.url ?? idp.issuer}
    audiences: [${TEST_CLIENT_ID}]
    certificateAuthority: |
${indent(idp.ca, 6)}
  claimMappings:
    username: {claim: sub, prefix: "${o.prefix ?? 'a:'}"}
${o.anonymous ?? ''}`;
}

interface Harness {
  file: AuthenticationConfigFile;
  registry: Registry;
  errors: string[];
  reloads: (status: string) => Promise<number>;
}

async function load(path: string, options: AuthenticationConfigFileOptions = {}): Promise<Harness> {
  const registry = new Registry();
  const metrics = createJwtMetrics(registry, { apiserverId: 'proxy-a' });
  const errors: string[] = [];
  const file = await AuthenticationConfigFile.load(path, {
    metrics,
    debounceMs: 20,
    pollIntervalMs: 0,
    logger: { info() {}, warn() {}, error: (_o, m) => errors.push(m) },
    ...options,
  });
  files.push(file);
  const reloads = async (status: string): Promise<number> =>
    counterValue(await registry.metrics(), 'apiserver_authentication_config_controller_automatic_reloads_total', { status, apiserver_id_hash: kubeHash('proxy-a') });
  return { file, registry, errors, reloads };
}

async function username(file: AuthenticationConfigFile): Promise<string | undefined> {
  return (await file.authenticator.authenticateToken(await idp.mint()))?.user.username;
}

describe('AuthenticationConfigFile', () => {
  it('an invalid file at start-up is a ConfigError naming the field', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ksp-authn-'));
    const path = join(dir, 'authn.yaml');
    await writeFile(path, yaml({ url: 'http://issuer.example.com' }));
    const err = await AuthenticationConfigFile.load(path).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(`--authentication-config ${path}: invalid authentication configuration: jwt[0].issuer.url: Invalid value: "http://issuer.example.com": URL scheme must be https`);
    await writeFile(path, '');
    expect(((await AuthenticationConfigFile.load(path).catch((e: unknown) => e)) as Error).message).toBe(
      `--authentication-config ${path}: failed to load authentication configuration from file "${path}": empty config data`,
    );
    const missing = (await AuthenticationConfigFile.load(join(dir, 'nope.yaml')).catch((e: unknown) => e)) as Error;
    expect(missing.message).toMatch(/^failed to load authentication configuration from file ".*nope\.yaml": ENOENT/);
  });

  it('a ConfigMap symlink swap is seen by the directory watch and applied; the config info metric follows', async () => {
    // The kubelet's layout: authn.yaml -> ..data/authn.yaml, ..data -> ..<timestamp>/, swapped by rename.
    dir = await mkdtemp(join(tmpdir(), 'ksp-authn-'));
    await mkdir(join(dir, '..v1'));
    await writeFile(join(dir, '..v1', 'authn.yaml'), yaml({ prefix: 'first:' }));
    await symlink('..v1', join(dir, '..data'));
    await symlink(join('..data', 'authn.yaml'), join(dir, 'authn.yaml'));
    const h = await load(join(dir, 'authn.yaml'));
    await h.file.authenticator.waitReady(10_000, 20);
    expect(await username(h.file)).toBe('first:alice');
    const first = h.file.authenticator;

    await mkdir(join(dir, '..v2'));
    const second = yaml({ prefix: 'second:' });
    await writeFile(join(dir, '..v2', 'authn.yaml'), second);
    await symlink('..v2', join(dir, '..data_tmp'));
    const changed = once(h.file, 'change');
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    await changed;
    expect(h.file.authenticator).not.toBe(first);
    expect(await username(h.file)).toBe('second:alice');
    expect(await h.reloads('success')).toBe(1);
    const info = await h.registry.metrics();
    expect(counterValue(info, 'apiserver_authentication_config_controller_last_config_info', { apiserver_id_hash: kubeHash('proxy-a'), hash: kubeHash(second) })).toBe(1);
    expect(counterValue(info, 'apiserver_authentication_config_controller_last_config_info')).toBe(1);
    expect(counterValue(info, 'apiserver_authentication_config_controller_automatic_reload_last_timestamp_seconds', { status: 'success' })).toBeGreaterThan(Date.now() / 1000 - 60);
  });

  it('a bad reload keeps the last good configuration, is logged and counted once (the same bytes are not retried)', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ksp-authn-'));
    const path = join(dir, 'authn.yaml');
    await writeFile(path, yaml());
    const h = await load(path, { watch: false });
    await h.file.authenticator.waitReady(10_000, 20);
    const good = h.file.authenticator;
    await writeFile(path, yaml({ url: 'https://issuer.example.com?x=1' }));
    const rejected = once(h.file, 'rejected');
    await h.file.reload();
    expect(((await rejected)[0] as Error).message).toContain('jwt[0].issuer.url: Invalid value: "https://issuer.example.com?x=1": URL must not contain a query');
    expect(h.file.authenticator).toBe(good);
    expect(await username(h.file)).toBe('a:alice');
    expect(h.errors).toEqual([expect.stringMatching(/^--authentication-config .*: invalid authentication configuration: jwt\[0\]\.issuer\.url: .*\(keeping the configuration in force\)$/)]);
    await h.file.reload();
    await h.file.reload();
    expect(await h.reloads('failure')).toBe(1);
    // Garbage is a decode failure, also remembered.
    await writeFile(path, 'kind: [');
    await h.file.reload();
    await h.file.reload();
    expect(await h.reloads('failure')).toBe(2);
    expect(h.errors[1]).toMatch(/yaml: /);
  });

  it('a reload whose issuer never becomes ready fails after the update timeout, keeps the old set, and is retried', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ksp-authn-'));
    const path = join(dir, 'authn.yaml');
    await writeFile(path, yaml());
    const h = await load(path, { watch: false, updateTimeoutMs: 300, authenticator: { retryIntervalMs: 50 } });
    await h.file.authenticator.waitReady(10_000, 20);
    const good = h.file.authenticator;
    await writeFile(path, yaml({ url: 'https://127.0.0.1:1' }));
    await h.file.reload();
    expect(h.file.authenticator).toBe(good);
    expect(h.errors[0]).toMatch(/failed to update authentication config: jwt authenticator for https:\/\/127\.0\.0\.1:1: fetching the discovery document/);
    await h.file.reload();
    expect(await h.reloads('failure')).toBe(2);
    expect(await username(h.file)).toBe('a:alice');
  });

  it('a reload may not change anonymous', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ksp-authn-'));
    const path = join(dir, 'authn.yaml');
    await writeFile(path, yaml({ anonymous: 'anonymous: {enabled: true, conditions: [{path: /livez}]}\n' }));
    const h = await load(path, { watch: false });
    await writeFile(path, yaml({ anonymous: 'anonymous: {enabled: true, conditions: [{path: /livez}, {path: /readyz}]}\n' }));
    await h.file.reload();
    expect(h.errors[0]).toContain('anonymous: Forbidden: changed from initial configuration file');
    expect(h.file.config.anonymous).toEqual({ enabled: true, conditions: [{ path: '/livez' }] });
  });

  it('an unreadable file is a failure retried at the next read; the poll alone picks up changes', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ksp-authn-'));
    const path = join(dir, 'authn.yaml');
    await writeFile(path, yaml());
    const h = await load(path, { watch: false, pollIntervalMs: 50 });
    await unlink(path);
    await once(h.file, 'rejected');
    await once(h.file, 'rejected'); // retried by the poll
    expect(h.errors[0]).toMatch(/failed to read authentication config file: ENOENT/);
    await writeFile(path, yaml({ prefix: 'polled:' }));
    await once(h.file, 'change');
    await h.file.authenticator.waitReady(10_000, 20);
    expect(await username(h.file)).toBe('polled:alice');
  });
});
