import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevMetrics, type DevMetrics } from '../../../dev/metrics/dev-metrics.js';
import { createCa, createClientCert, createServerCert, type CertAndKey } from '../../helpers/certs.js';

// A dev-metrics registered as an APIService backend: HTTPS with the SAN kube-aggregator dials, and
// request-header authentication of the front proxy. No cluster is needed for these requests.
const SNI = 'metrics-server.kube-system.svc';
let dir: string;
let ca: CertAndKey;
let frontProxy: CertAndKey;
let intruder: CertAndKey;
let stranger: CertAndKey;
let metrics: DevMetrics;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dev-metrics-pki-'));
  ca = await createCa(dir);
  const otherCa = await createCa(dir, 'other CA', 'other-ca');
  const server = await createServerCert(dir, ca, { cn: SNI, san: `DNS:${SNI},DNS:metrics-server.kube-system,IP:127.0.0.1` });
  [frontProxy, intruder, stranger] = await Promise.all([
    createClientCert(dir, ca, { cn: 'front-proxy-client', name: 'front' }),
    createClientCert(dir, ca, { cn: 'someone-else', name: 'intruder' }),
    createClientCert(dir, otherCa, { cn: 'front-proxy-client', name: 'stranger' }),
  ]);
  metrics = await startDevMetrics({
    cluster: 'http://127.0.0.1:9', // never answers: these tests only look at authentication
    scrapeIntervalMs: 60_000,
    tls: { cert: server.cert, key: server.key },
    requestHeader: { clientCa: ca.cert, allowedNames: ['front-proxy-client'] },
  });
});
afterAll(async () => {
  await metrics?.close();
  rmSync(dir, { recursive: true, force: true });
});

function call(o: { client?: CertAndKey; headers?: Record<string, string | string[]>; servername?: string; path?: string }): Promise<{ code: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${metrics.url}${o.path ?? '/apis/metrics.k8s.io/v1beta1'}`,
      { ca: ca.cert, servername: o.servername ?? SNI, cert: o.client?.cert, key: o.client?.key, headers: o.headers, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ code: res.statusCode!, body: text.startsWith('{') ? JSON.parse(text) : text }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const identity = {
  'X-Remote-User': 'alice',
  'X-Remote-Group': ['dev', 'system:authenticated'],
  'X-Remote-Extra-Scopes%2Fread': 'pods',
};

describe('dev-metrics behind a front proxy', () => {
  it('serves the aggregator name (SAN) and takes the user from a verified front proxy', async () => {
    const r = await call({ client: frontProxy, headers: identity });
    expect(r.code).toBe(200);
    expect(r.body.kind).toBe('APIResourceList');
    expect(metrics.requests.at(-1)).toEqual({
      method: 'GET',
      url: '/apis/metrics.k8s.io/v1beta1',
      user: 'alice',
      groups: ['dev', 'system:authenticated'],
      extra: { 'scopes/read': ['pods'] },
      frontProxy: 'front-proxy-client',
    });
  });

  it('fails the TLS handshake for a name its certificate does not hold', async () => {
    await expect(call({ client: frontProxy, headers: identity, servername: 'metrics.other.svc' })).rejects.toThrow(/altnames|Hostname/);
  });

  it.each([
    ['no client certificate', undefined, identity, 'no client certificate verified by the request-header CA'],
    ['a certificate of another CA', 'stranger', identity, 'no client certificate verified by the request-header CA'],
    ['a CommonName that is not allowed', 'intruder', identity, 'front proxy certificate CN "someone-else" is not an allowed name'],
    ['no X-Remote-User', 'front', { 'X-Remote-Group': 'dev' }, 'no user in the request headers'],
  ])('refuses %s with 401', async (_name, who, headers, reason) => {
    const client = who === 'front' ? frontProxy : who === 'intruder' ? intruder : who === 'stranger' ? stranger : undefined;
    const r = await call({ client, headers });
    expect(r.code).toBe(401);
    expect(r.body).toEqual({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 });
    expect(metrics.requests.at(-1)).toMatchObject({ refused: reason });
    expect(metrics.requests.at(-1)!.user).toBeUndefined();
  });
});

describe('health checks', () => {
  it('answers /healthz and /livez without a front-proxy certificate (probes)', async () => {
    expect(await call({ path: '/healthz' })).toEqual({ code: 200, body: 'ok' });
    expect(await call({ path: '/livez' })).toEqual({ code: 200, body: 'ok' });
    expect((await call({ path: '/healthz/../apis' })).code).toBe(401); // normalised to /apis
  });
});

describe('startDevMetrics options', () => {
  it('refuses request-header authentication without TLS', async () => {
    await expect(startDevMetrics({ cluster: 'http://127.0.0.1:9', requestHeader: { clientCa: ca.cert } })).rejects.toThrow(/needs TLS/);
  });
});
