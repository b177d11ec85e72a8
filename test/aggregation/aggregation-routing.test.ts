/**
 * Aggregated APIs through the proxy (passthrough mode), against a real HTTPS extension API server
 * registered by `--apiservice-config` with `spec.service` (resolved through the API's EndpointSlices)
 * and a `caBundle`: routing of plain requests, watches and upgrades, the TLS server name, the
 * front-proxy certificate on the proxy's own probe only, redirects refused, availability and its
 * metrics when the backend dies and comes back, and reloads that leave open sessions alone.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { ProxyApiClient } from '../../src/api-client.js';
import { resolveConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { createCa, createClientCert, createServerCert, type CertAndKey } from '../helpers/certs.js';
import { counterValue } from '../helpers/metrics.js';
import { waitFor } from '../helpers/wait.js';
import { deterministicBytes } from '../helpers/random-data.js';
import { openConsole, startExtensionApiServer, type ExtensionApiServer } from './extension-apiserver.js';

const dir = mkdtempSync(join(tmpdir(), 'ksp-aggregation-'));
const configFile = join(dir, 'apiservices.yaml');
let ca: CertAndKey;
let backendTls: { cert: Buffer; key: Buffer; clientCa: Buffer };
let backend: ExtensionApiServer;
let backendPort: number;
let primary: Server;
const primarySeen: string[] = [];
let proxy: RunningServer;

/** The fake API the proxy resolves `things/ns` through: one ready endpoint on the backend's port. */
const api: ProxyApiClient = {
  reviewToken: async () => ({ authenticated: false }),
  reviewAccess: async () => ({ allowed: false, reason: '' }),
  readPod: async () => undefined,
  readNode: async () => undefined,
  readService: async (ns, name) => (ns === 'ns' && name === 'things' ? { type: 'ClusterIP', ports: [{ name: 'https', port: 443 }] } : undefined),
  listEndpointSlices: async () => [{ ports: [{ name: 'https', port: backendPort }], endpoints: [{ addresses: ['127.0.0.1'], ready: true }] }],
};

function apiServicesYaml(withThings: boolean): string {
  const things = `apiVersion: apiregistration.k8s.io/v1
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
`;
  const local = `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.apps
spec:
  group: apps
  version: v1
  service: null
  groupPriorityMinimum: 17800
  versionPriority: 15
`;
  return withThings ? `${things}---\n${local}` : local;
}

async function condition(name: string): Promise<{ status: string; reason: string } | undefined> {
  const res = await fetch(`${proxy.url}/apis/apiregistration.k8s.io/v1/apiservices/${name}`);
  if (res.status !== 200) return undefined;
  const body = (await res.json()) as { status: { conditions: { status: string; reason: string }[] } };
  return body.status.conditions[0];
}

beforeAll(async () => {
  ca = await createCa(dir);
  const serving = await createServerCert(dir, ca, { stem: 'things', cn: 'things.ns.svc', san: 'DNS:things.ns.svc' });
  const frontProxy = await createClientCert(dir, ca, { cn: 'front-proxy-client', name: 'front-proxy' });
  backendTls = { cert: serving.cert, key: serving.key, clientCa: ca.cert };
  backend = await startExtensionApiServer(backendTls);
  backendPort = backend.port;
  primary = createServer((req: IncomingMessage, res) => {
    primarySeen.push(req.url ?? '');
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ primary: true, url: req.url }));
  });
  primary.listen(0, '127.0.0.1');
  await once(primary, 'listening');
  writeFileSync(configFile, apiServicesYaml(true));
  const config = await resolveConfig({
    listen: '127.0.0.1:0',
    upstream: `http://127.0.0.1:${(primary.address() as AddressInfo).port}`,
    apiserviceConfig: configFile,
    proxyClientCertFile: frontProxy.certFile,
    proxyClientKeyFile: frontProxy.keyFile,
  });
  proxy = await startServer(config, { apiClient: api, aggregatorIntervals: { recheckMs: 1_000, retryMs: 200 } });
  await waitFor('v1.things.example.com available', async () => ((await condition('v1.things.example.com'))?.status === 'True' ? true : undefined));
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await backend?.close();
  primary?.close();
});

describe('aggregated API routing (passthrough)', () => {
  it('sends /apis/<group>/<version>/… to the resolved endpoint with SNI <svc>.<ns>.svc; the caller credentials go, the front-proxy certificate and a client X-Remote-User do not', async () => {
    const before = backend.requests.length;
    const res = await fetch(`${proxy.url}/apis/things.example.com/v1/namespaces/default/widgets`, { headers: { Authorization: 'Bearer caller-token', 'X-Remote-User': 'mallory' } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { items: unknown[] }).items).toHaveLength(1);
    const seen = backend.requests.slice(before).find((r) => r.url === '/apis/things.example.com/v1/namespaces/default/widgets')!;
    expect(seen.servername).toBe('things.ns.svc');
    expect(seen.headers.authorization).toBe('Bearer caller-token');
    expect(seen.headers['x-remote-user']).toBeUndefined();
    expect(seen.clientCN).toBeUndefined();
    // The availability probe is the proxy's own call: front-proxy certificate and kube-aggregator's identity.
    const probe = backend.requests.find((r) => r.url === '/apis/things.example.com/v1')!;
    expect(probe.clientCN).toBe('front-proxy-client');
    expect(probe.headers['x-remote-user']).toBe('system:kube-aggregator');
    expect(probe.headers['x-remote-group']).toBe('system:masters');
  });

  it('aggregated discovery lists the backend group-version, read through its legacy /apis/<g>/<v> after a 406, from the cache: discovery requests never reach the backend', async () => {
    const fetchesBefore = backend.requests.filter((r) => r.url === '/apis' || r.url === '/apis/things.example.com/v1').length;
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${proxy.url}/apis`, { headers: { Accept: 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList' } });
      const doc = (await res.json()) as { items: { metadata: { name: string }; versions: { version: string; freshness: string; resources: { resource: string; scope: string; subresources?: { subresource: string }[] }[] }[] }[] };
      const things = doc.items.find((g) => g.metadata.name === 'things.example.com')!;
      expect(things.versions).toEqual([
        {
          version: 'v1',
          freshness: 'Current',
          resources: [expect.objectContaining({ resource: 'widgets', scope: 'Namespaced', subresources: [expect.objectContaining({ subresource: 'console' })] })],
        },
      ]);
    }
    const fetchesAfter = backend.requests.filter((r) => r.url === '/apis' || r.url === '/apis/things.example.com/v1').length;
    // Only the availability probe may have come by meanwhile (every second in this test); five discovery answers cost no fetch each.
    expect(fetchesAfter - fetchesBefore).toBeLessThan(5);
    expect(backend.requests.some((r) => r.url === '/apis' && String(r.headers.accept).includes('apidiscovery.k8s.io'))).toBe(true);
  });

  it('leaves a local APIService and every other path to the primary upstream', async () => {
    for (const path of ['/apis/apps/v1/deployments', '/api/v1/pods', '/apis/unregistered.example.com/v1/x']) {
      const res = await fetch(`${proxy.url}${path}`);
      expect(((await res.json()) as { primary: boolean }).primary, path).toBe(true);
    }
    expect(primarySeen).toEqual(expect.arrayContaining(['/apis/apps/v1/deployments', '/api/v1/pods', '/apis/unregistered.example.com/v1/x']));
  });

  it('refuses a backend redirect with 502, as kube-aggregator does', async () => {
    const res = await fetch(`${proxy.url}/apis/things.example.com/v1/redirect`, { redirect: 'manual' });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { message: string }).message).toBe('the backend attempted to redirect this request, which is not permitted');
  });

  it('streams a watch unbuffered: the first event arrives before the backend ends the response', async () => {
    const res = await fetch(`${proxy.url}/apis/things.example.com/v1/namespaces/default/widgets?watch=true`);
    const reader = res.body!.getReader();
    const first = Buffer.from((await reader.read()).value!).toString();
    expect(first).toContain('"w1"');
    backend.releaseWatch();
    let rest = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += Buffer.from(value).toString();
    }
    expect(rest).toContain('"w2"');
  });

  it('passes a KubeVirt-style WebSocket console (plain.kubevirt.io, binary frames) through byte-exact, 10 MB each way, the subprotocol list unchanged', async () => {
    const before = backend.requests.length;
    const ws = new WebSocket(`${proxy.url.replace('http', 'ws')}/apis/things.example.com/v1/namespaces/default/widgets/w1/console`, ['fantasy.protocol', 'plain.kubevirt.io'], { headers: { Origin: 'https://console.example' } });
    await once(ws, 'open');
    expect(ws.protocol).toBe('plain.kubevirt.io');
    const data = deterministicBytes(13, 10 * 1024 * 1024);
    const got = createHash('sha256');
    let received = 0;
    const done = new Promise<void>((resolve) => {
      ws.on('message', (m: Buffer) => {
        got.update(m);
        received += m.length;
        if (received >= data.length) resolve();
      });
    });
    for (let off = 0; off < data.length; off += 64 * 1024) ws.send(data.subarray(off, off + 64 * 1024), { binary: true });
    await done;
    expect(received).toBe(data.length);
    expect(got.digest('hex')).toBe(createHash('sha256').update(data).digest('hex'));
    const seen = backend.requests.slice(before).find((r) => r.url.endsWith('/console'))!;
    expect(seen.headers['sec-websocket-protocol']).toBe('fantasy.protocol,plain.kubevirt.io');
    expect(seen.headers.origin).toBe('https://console.example');
    ws.close();
    await once(ws, 'close');
  });

  it('passes any other upgrade (SPDY) through after the 101, byte-exact, and a refused upgrade comes back verbatim', async () => {
    const socket: Socket = netConnect({ host: '127.0.0.1', port: Number(new URL(proxy.url).port) });
    await once(socket, 'connect');
    const data = deterministicBytes(21, 10 * 1024 * 1024);
    socket.write('POST /apis/things.example.com/v1/namespaces/default/widgets/w1/portforward HTTP/1.1\r\nHost: proxy\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
    let buffered = Buffer.alloc(0);
    const headEnd = await new Promise<number>((resolve) => {
      const onData = (c: Buffer): void => {
        buffered = Buffer.concat([buffered, c]);
        const i = buffered.indexOf('\r\n\r\n');
        if (i >= 0) {
          socket.off('data', onData);
          resolve(i + 4);
        }
      };
      socket.on('data', onData);
    });
    expect(buffered.subarray(0, headEnd).toString()).toMatch(/^HTTP\/1\.1 101 /);
    const got = createHash('sha256');
    let received = buffered.length - headEnd;
    got.update(buffered.subarray(headEnd));
    const done = new Promise<void>((resolve) => {
      socket.on('data', (c: Buffer) => {
        got.update(c);
        received += c.length;
        if (received >= data.length) resolve();
      });
    });
    socket.write(data);
    await done;
    expect(got.digest('hex')).toBe(createHash('sha256').update(data).digest('hex'));
    socket.destroy();

    const refused = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const ws = new WebSocket(`${proxy.url.replace('http', 'ws')}/apis/things.example.com/v1/namespaces/default/widgets/off/console`, ['plain.kubevirt.io']);
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      ws.on('open', () => reject(new Error('upgraded')));
      ws.on('error', () => {});
    });
    expect(refused.status).toBe(409);
    expect(JSON.parse(refused.body)).toMatchObject({ kind: 'Status', message: 'VMI is not running', code: 409 });
  });

  it('reload: removing and re-adding the group does not drop an open session; the group follows the file', async () => {
    const { ws, echo } = await openConsole(proxy.url);
    expect(await echo('before')).toBe('before');
    writeFileSync(configFile, apiServicesYaml(false));
    await waitFor('v1.things.example.com removed', async () => ((await fetch(`${proxy.url}/apis/apiregistration.k8s.io/v1/apiservices/v1.things.example.com`)).status === 404 ? true : undefined));
    const routedAway = await fetch(`${proxy.url}/apis/things.example.com/v1/namespaces/default/widgets`);
    expect(((await routedAway.json()) as { primary?: boolean }).primary).toBe(true);
    expect(await echo('during')).toBe('during');
    writeFileSync(configFile, apiServicesYaml(true));
    await waitFor('v1.things.example.com back', async () => ((await condition('v1.things.example.com'))?.status === 'True' ? true : undefined));
    expect(await echo('after')).toBe('after');
    ws.close();
    await once(ws, 'close');
  });

  it('backend down: 503 "service unavailable", Available False (FailedDiscoveryCheck) in kubectl’s Table, the gauge reads 1, the rest keeps working; back within seconds after a restart', async () => {
    await backend.close();
    await waitFor('unavailable', async () => ((await condition('v1.things.example.com'))?.status === 'False' ? true : undefined));
    expect((await condition('v1.things.example.com'))?.reason).toBe('FailedDiscoveryCheck');
    const res = await fetch(`${proxy.url}/apis/things.example.com/v1/namespaces/default/widgets`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ kind: 'Status', message: 'service unavailable', reason: 'ServiceUnavailable', code: 503 });
    expect(((await (await fetch(`${proxy.url}/api/v1/pods`)).json()) as { primary: boolean }).primary).toBe(true);
    const table = (await (await fetch(`${proxy.url}/apis/apiregistration.k8s.io/v1/apiservices`, { headers: { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' } })).json()) as {
      columnDefinitions: { name: string }[];
      rows: { cells: string[] }[];
    };
    expect(table.columnDefinitions.map((c) => c.name)).toEqual(['Name', 'Service', 'Available', 'Age']);
    expect(table.rows.map((r) => r.cells.slice(0, 3))).toEqual([
      ['v1.apps', 'Local', 'True'],
      ['v1.things.example.com', 'ns/things', 'False (FailedDiscoveryCheck)'],
    ]);
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(counterValue(metrics, 'aggregator_unavailable_apiservice', { name: 'v1.things.example.com' })).toBe(1);
    expect(counterValue(metrics, 'aggregator_unavailable_apiservice_total', { name: 'v1.things.example.com', reason: 'FailedDiscoveryCheck' })).toBeGreaterThanOrEqual(1);
    expect(counterValue(metrics, 'kube_stream_proxy_apiservice_requests_total', { apiservice: 'v1.things.example.com', code: '200' })).toBeGreaterThanOrEqual(1);
    expect((await fetch(`${proxy.url}/readyz`)).status).toBe(200);

    backend = await startExtensionApiServer(backendTls, backendPort);
    const started = Date.now();
    await waitFor('available again', async () => ((await condition('v1.things.example.com'))?.status === 'True' ? true : undefined), 30_000);
    expect(Date.now() - started).toBeLessThan(30_000);
    expect((await fetch(`${proxy.url}/apis/things.example.com/v1/namespaces/default/widgets`)).status).toBe(200);
    const after = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(counterValue(after, 'aggregator_unavailable_apiservice', { name: 'v1.things.example.com' })).toBe(0);
  });
});

describe('aggregated API identity (impersonate)', () => {
  let impersonating: RunningServer;
  const alice = { username: 'alice', uid: 'u-7', groups: ['devs', 'system:authenticated'], extra: { 'example.com/team': ['blue'] } };
  beforeAll(async () => {
    const frontProxy = await createClientCert(dir, ca, { cn: 'front-proxy-client', name: 'front-proxy-2' });
    const config = await resolveConfig({
      listen: '127.0.0.1:0',
      upstream: `http://127.0.0.1:${(primary.address() as AddressInfo).port}`,
      authn: 'impersonate',
      apiserviceConfig: configFile,
      proxyClientCertFile: frontProxy.certFile,
      proxyClientKeyFile: frontProxy.keyFile,
    });
    const reviewing: ProxyApiClient = { ...api, reviewToken: async (t) => (t === 'alice-token' ? { authenticated: true, user: alice } : { authenticated: false }) };
    impersonating = await startServer(config, { apiClient: reviewing, aggregatorIntervals: { recheckMs: 1_000, retryMs: 200 } });
    await waitFor('available', async () => {
      const res = await fetch(`${impersonating.url}/apis/apiregistration.k8s.io/v1/apiservices/v1.things.example.com`, { headers: { Authorization: 'Bearer alice-token' } });
      const body = (await res.json()) as { status?: { conditions: { status: string }[] } };
      return body.status?.conditions[0]?.status === 'True' ? true : undefined;
    });
  }, 60_000);
  afterAll(async () => impersonating?.close());

  it('presents the verified caller as X-Remote-User/Uid/Group/Extra-* with the front-proxy certificate, on plain requests and on the upgrade request itself; never the caller token or its own X-Remote-*', async () => {
    const before = backend.requests.length;
    const headers = { Authorization: 'Bearer alice-token', 'X-Remote-User': 'system:admin', 'X-Remote-Group': 'system:masters', 'X-Remote-Extra-Scopes': 'all', 'X-Remote-Uid': '0' };
    const res = await fetch(`${impersonating.url}/apis/things.example.com/v1/namespaces/default/widgets`, { headers });
    expect(res.status, await res.clone().text()).toBe(200);
    const ws = new WebSocket(`${impersonating.url.replace('http', 'ws')}/apis/things.example.com/v1/namespaces/default/widgets/w1/console`, ['plain.kubevirt.io'], { headers });
    await once(ws, 'open');
    ws.close();
    await once(ws, 'close');
    const seen = backend.requests.slice(before).filter((r) => r.url.includes('/namespaces/default/widgets'));
    expect(seen.map((r) => r.url)).toEqual(['/apis/things.example.com/v1/namespaces/default/widgets', '/apis/things.example.com/v1/namespaces/default/widgets/w1/console']);
    for (const r of seen) {
      const lines = (name: string): string[] => r.rawHeaders.flatMap((v, i) => (i % 2 === 0 && v.toLowerCase() === name ? [r.rawHeaders[i + 1]!] : []));
      expect(r.clientCN, r.url).toBe('front-proxy-client');
      expect(lines('x-remote-user'), r.url).toEqual(['alice']);
      expect(lines('x-remote-uid'), r.url).toEqual(['u-7']);
      expect(lines('x-remote-group'), r.url).toEqual(['devs', 'system:authenticated']);
      expect(lines('x-remote-extra-example.com%2fteam'), r.url).toEqual(['blue']);
      expect(lines('x-remote-extra-scopes'), r.url).toEqual([]);
      expect(r.headers.authorization, r.url).toBeUndefined();
    }
  });

  it('a browser bearer token in the subprotocol list is authenticated and removed, as for pods; the backend sees the verified caller and the other protocol', async () => {
    const before = backend.requests.length;
    const token = `base64url.bearer.authorization.k8s.io.${Buffer.from('alice-token').toString('base64url')}`;
    const ws = new WebSocket(`${impersonating.url.replace('http', 'ws')}/apis/things.example.com/v1/namespaces/default/widgets/w1/console`, [token, 'plain.kubevirt.io']);
    await once(ws, 'open');
    expect(ws.protocol).toBe('plain.kubevirt.io');
    ws.close();
    await once(ws, 'close');
    const seen = backend.requests.slice(before).find((r) => r.url.endsWith('/console'))!;
    expect(seen.headers['sec-websocket-protocol']).toBe('plain.kubevirt.io');
    expect(seen.headers['x-remote-user']).toBe('alice');
    expect(seen.headers.authorization).toBeUndefined();
  });

  it('refuses an unauthenticated caller with 401 before anything reaches the backend', async () => {
    const before = backend.requests.length;
    const res = await fetch(`${impersonating.url}/apis/things.example.com/v1/namespaces/default/widgets`, { headers: { Authorization: 'Bearer wrong' } });
    expect(res.status).toBe(401);
    expect(backend.requests.slice(before).filter((r) => r.url.includes('widgets'))).toEqual([]);
  });
});
