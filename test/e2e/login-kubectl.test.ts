/**
 * `kube-stream-proxy login` as the real kubectl runs it (needs `npm run build`: kubectl starts
 * bin/kube-stream-proxy.js): kubectl 1.27 and 1.33 read the ExecCredential (exec `apiVersion`
 * client.authentication.k8s.io/v1 and v1beta1, `interactiveMode: Never`) and send its token. The
 * plugin answers from its token cache here (the device flow itself is tested in
 * test/src/login/login-command.test.ts), so the server sees exactly the cached ID token.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenCacheName } from '../../src/login/token-cache.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, type KubectlVersion } from '../helpers/kubectl.js';
import { startTestProvider, TEST_CLIENT_ID, type TestProvider } from '../helpers/oidc-provider.js';

const skip = kubectlE2eSkipReason();
const BIN = resolve(import.meta.dirname, '../../bin/kube-stream-proxy.js');

let idp: TestProvider;
let server: Server;
let dir: string;
const seen: string[] = [];

beforeAll(async () => {
  idp = await startTestProvider();
  dir = await mkdtemp(join(tmpdir(), 'ksp-login-kubectl-'));
  // The API server stand-in uses the provider's serving certificate (loopback) and records the token.
  server = createServer({ cert: idp.pki.server.cert, key: idp.pki.server.key }, (req, res) => {
    seen.push(req.headers.authorization ?? '');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ major: '1', minor: '33', gitVersion: 'v1.33.0' }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  server?.close();
  await idp?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function kubeconfig(apiVersion: string, cacheDir: string): Promise<string> {
  const port = (server.address() as { port: number }).port;
  const path = join(dir, `kubeconfig-${apiVersion.replace(/\W/g, '_')}`);
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: `https://127.0.0.1:${port}`, 'certificate-authority-data': idp.pki.ca.cert.toString('base64') } }],
    users: [
      {
        name: 'oidc',
        user: {
          exec: {
            apiVersion,
            command: process.execPath,
            args: [BIN, 'login', `--oidc-issuer-url=${idp.issuer}`, `--oidc-client-id=${TEST_CLIENT_ID}`, `--token-cache-dir=${cacheDir}`],
            interactiveMode: 'Never',
          },
        },
      },
    ],
    contexts: [{ name: 'c', context: { cluster: 'c', user: 'oidc' } }],
    'current-context': 'c',
  };
  await writeFile(path, JSON.stringify(config));
  return path;
}

describe.skipIf(skip !== undefined)('kubectl runs kube-stream-proxy login', () => {
  it.each<[KubectlVersion, string]>([
    ['1.27', 'client.authentication.k8s.io/v1'],
    ['1.33', 'client.authentication.k8s.io/v1'],
    ['1.33', 'client.authentication.k8s.io/v1beta1'],
  ])('kubectl %s with exec apiVersion %s sends the ID token', async (version, apiVersion) => {
    const cacheDir = join(dir, `cache-${version}-${apiVersion.replace(/\W/g, '_')}`);
    const token = await idp.mint({ exp: Math.floor(Date.now() / 1000) + 3600 });
    const cache = join(cacheDir, `${tokenCacheName({ issuer: idp.issuer, clientId: TEST_CLIENT_ID, scopes: ['openid'], extraParams: {} })}.json`);
    await mkdir(cacheDir, { recursive: true, mode: 0o700 });
    await writeFile(cache, JSON.stringify({ id_token: token }), { mode: 0o600 });
    const path = await kubeconfig(apiVersion, cacheDir);
    const before = seen.length;
    const r = await runKubectl(findKubectl(version), ['get', '--raw', '/version'], { kubeconfig: path, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.toString())).toMatchObject({ gitVersion: 'v1.33.0' });
    expect(seen.slice(before)).toContain(`Bearer ${token}`);
  });
});
