/**
 * An aggregated API server and a JWT caller (issue 22): with `--authn impersonate
 * --authentication-config`, the proxy verifies the OIDC ID token itself and presents the user to the
 * extension API server as `X-Remote-User` / `X-Remote-Group` with its front-proxy certificate, on a
 * plain request and on an upgrade (the token in the WebSocket subprotocol, as a browser sends it);
 * the backend's request log shows the OIDC user and never the token. A real HTTPS extension API
 * server (test/aggregation/extension-apiserver.ts) and the real OpenID Provider.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { ProxyApiClient } from '../../src/api-client.js';
import { resolveConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { createCa, createClientCert, createServerCert } from '../helpers/certs.js';
import { authenticationConfigFor, startTestProvider, type TestProvider } from '../helpers/oidc-provider.js';
import { waitFor } from '../helpers/wait.js';
import { startExtensionApiServer, type ExtensionApiServer } from './extension-apiserver.js';

const ALICE = 'alice@example.com';
let dir: string;
let idp: TestProvider;
let backend: ExtensionApiServer;
let primary: Server;
let proxy: RunningServer;
let token: string;
const reviews: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ksp-aggregation-jwt-'));
  idp = await startTestProvider();
  const ca = await createCa(dir);
  const serving = await createServerCert(dir, ca, { stem: 'things', cn: 'things.ns.svc', san: 'DNS:things.ns.svc' });
  const frontProxy = await createClientCert(dir, ca, { cn: 'front-proxy-client', name: 'front-proxy' });
  backend = await startExtensionApiServer({ cert: serving.cert, key: serving.key, clientCa: ca.cert });
  primary = createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}'));
  primary.listen(0, '127.0.0.1');
  await once(primary, 'listening');
  writeFileSync(
    join(dir, 'apiservices.yaml'),
    `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.things.example.com
spec:
  group: things.example.com
  version: v1
  service: {namespace: ns, name: things, port: 443}
  caBundle: ${ca.cert.toString('base64')}
  groupPriorityMinimum: 1000
  versionPriority: 15
`,
  );
  writeFileSync(join(dir, 'auth.yaml'), authenticationConfigFor(idp));
  const api: ProxyApiClient = {
    reviewToken: async (t) => {
      reviews.push(t);
      return { authenticated: false };
    },
    reviewAccess: async () => ({ allowed: true, reason: '' }),
    readPod: async () => undefined,
    readNode: async () => undefined,
    readService: async (ns, name) => (ns === 'ns' && name === 'things' ? { type: 'ClusterIP', ports: [{ name: 'https', port: 443 }] } : undefined),
    listEndpointSlices: async () => [{ ports: [{ name: 'https', port: backend.port }], endpoints: [{ addresses: ['127.0.0.1'], ready: true }] }],
  };
  const config = await resolveConfig({
    listen: '127.0.0.1:0',
    upstream: `http://127.0.0.1:${(primary.address() as AddressInfo).port}`,
    authn: 'impersonate',
    authenticationConfig: join(dir, 'auth.yaml'),
    apiserviceConfig: join(dir, 'apiservices.yaml'),
    proxyClientCertFile: frontProxy.certFile,
    proxyClientKeyFile: frontProxy.keyFile,
  });
  proxy = await startServer(config, { apiClient: api, aggregatorIntervals: { recheckMs: 1_000, retryMs: 200 } });
  token = await idp.mint({ email: ALICE, email_verified: true, groups: ['developers', 'oncall'] });
  await waitFor('JWT keys known and the APIService available', async () => {
    const res = await fetch(`${proxy.url}/apis/apiregistration.k8s.io/v1/apiservices/v1.things.example.com`, { headers: { Authorization: `Bearer ${token}` } });
    if (res.status !== 200) return undefined;
    const body = (await res.json()) as { status?: { conditions: { status: string }[] } };
    return body.status?.conditions[0]?.status === 'True' ? true : undefined;
  });
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await backend?.close();
  primary?.close();
  await idp?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('aggregated API, JWT caller', () => {
  it("the backend's request log shows the OIDC user as X-Remote-User and its groups as X-Remote-Group, plain and upgraded; never the token", async () => {
    const before = backend.requests.length;
    const res = await fetch(`${proxy.url}/apis/things.example.com/v1/namespaces/default/widgets`, { headers: { Authorization: `Bearer ${token}`, 'X-Remote-User': 'system:admin' } });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { seenUser: string }).seenUser).toBe(ALICE);
    const subprotocol = `base64url.bearer.authorization.k8s.io.${Buffer.from(token).toString('base64url')}`;
    const ws = new WebSocket(`${proxy.url.replace('http', 'ws')}/apis/things.example.com/v1/namespaces/default/widgets/w1/console`, [subprotocol, 'plain.kubevirt.io']);
    await once(ws, 'open');
    expect(ws.protocol).toBe('plain.kubevirt.io');
    ws.close();
    await once(ws, 'close');
    const seen = backend.requests.slice(before).filter((r) => r.url.includes('/widgets'));
    expect(seen.map((r) => r.url)).toEqual(['/apis/things.example.com/v1/namespaces/default/widgets', '/apis/things.example.com/v1/namespaces/default/widgets/w1/console']);
    for (const r of seen) {
      const lines = (name: string): string[] => r.rawHeaders.flatMap((v, i) => (i % 2 === 0 && v.toLowerCase() === name ? [r.rawHeaders[i + 1]!] : []));
      expect(r.clientCN, r.url).toBe('front-proxy-client');
      expect(lines('x-remote-user'), r.url).toEqual([ALICE]);
      expect(lines('x-remote-group'), r.url).toEqual(['oidc:developers', 'oidc:oncall', 'system:authenticated']);
      expect(r.headers.authorization, r.url).toBeUndefined();
      expect(JSON.stringify(r.rawHeaders), r.url).not.toContain(token.split('.')[2]!);
    }
    expect(reviews).toEqual([]);
  });

  it('a JWT its issuer refuses is 401 before the backend, without a TokenReview', async () => {
    const before = backend.requests.length;
    const expired = await idp.mint({ email: ALICE, email_verified: true, exp: Math.floor(Date.now() / 1000) - 1 });
    const res = await fetch(`${proxy.url}/apis/things.example.com/v1/namespaces/default/widgets`, { headers: { Authorization: `Bearer ${expired}` } });
    expect(res.status).toBe(401);
    expect(backend.requests.slice(before).filter((r) => r.url.includes('/widgets'))).toEqual([]);
    expect(reviews).toEqual([]);
  });
});
