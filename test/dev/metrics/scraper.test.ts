import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { ClusterClient, ClusterRequestError } from '../../../dev/metrics/cluster-client.js';
import { MetricsStore } from '../../../dev/metrics/metrics-store.js';
import { MetricsScraper } from '../../../dev/metrics/scraper.js';
import { createTestPki, type TestPki } from '../../helpers/certs.js';

// The scraper against a dev cluster that wants HTTPS and bearer tokens, with an authorizer: the
// path a metrics-server with its own service account takes.
const TOKENS = ['t-metrics,metrics,uid-m', 't-rotated,metrics,uid-m', 't-lister,lister,uid-l'].join('\n');
const POLICY = {
  rules: [
    { users: ['metrics'], verbs: ['get', 'list'], resources: ['nodes', 'pods', 'nodes/proxy'] },
    { users: ['lister'], verbs: ['get', 'list'], resources: ['nodes', 'pods'] },
  ],
};

let dir: string;
let pki: TestPki;
let cluster: DevCluster;
let tokenFile: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dev-metrics-scraper-'));
  pki = await createTestPki(dir);
  writeFileSync(join(dir, 'tokens.csv'), TOKENS);
  writeFileSync(join(dir, 'policy.json'), JSON.stringify(POLICY));
  tokenFile = join(dir, 'token');
  cluster = await startDevCluster({
    tls: { cert: pki.server.cert, key: pki.server.key },
    tokenAuthFile: join(dir, 'tokens.csv'),
    authorizationPolicyFile: join(dir, 'policy.json'),
    pods: ['web'],
  });
});
afterAll(async () => {
  await cluster?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const scraperWith = (token: string | undefined): { scraper: MetricsScraper; store: MetricsStore } => {
  if (token !== undefined) writeFileSync(tokenFile, `${token}\n`);
  const client = new ClusterClient({ url: cluster.url, ca: pki.ca.cert, tokenFile: token === undefined ? undefined : tokenFile });
  const store = new MetricsStore(15_000);
  return { scraper: new MetricsScraper(client, store, 60_000), store };
};

describe('MetricsScraper', () => {
  it('lists, scrapes through nodes/proxy over HTTPS with the token, and fills the store', async () => {
    const { scraper, store } = scraperWith('t-metrics');
    expect((await scraper.scrapeOnce()).errors).toEqual([]);
    expect([...scraper.pods.keys()]).toEqual(['default/demo', 'default/web']);
    expect([...scraper.nodes.keys()]).toEqual(['dev-node']);
    expect(scraper.nodes.get('dev-node')!.labels['kubernetes.io/hostname']).toBe('dev-node');
    expect(store.podUsage('default', 'web')).toBeUndefined(); // one point so far
    writeFileSync(tokenFile, 't-rotated\n'); // re-read per request
    expect((await scraper.scrapeOnce()).errors).toEqual([]);
    expect(store.podUsage('default', 'web')!.containers.map((c) => c.name)).toEqual(['web']);
    expect(store.nodeUsage('dev-node')!.memoryBytes).toBeGreaterThan(0);
    const last = cluster.requests.at(-1)!;
    expect(last.url).toBe('/api/v1/nodes/dev-node/proxy/metrics/resource');
    expect(last.user).toBe('metrics');
    expect(scraper.rounds).toBe(2);
  });

  it('reports a 401 without a token and keeps running', async () => {
    const { scraper } = scraperWith(undefined);
    const r = await scraper.scrapeOnce();
    expect(r.errors).toHaveLength(2);
    for (const e of r.errors) expect(e).toMatch(/: 401 /);
    expect(scraper.pods.size).toBe(0);
  });

  it('reports a node it may not proxy to, and drops that node\'s series', async () => {
    const { scraper, store } = scraperWith('t-lister');
    const r = await scraper.scrapeOnce();
    expect(r.errors).toEqual([expect.stringMatching(/^node dev-node: GET \/api\/v1\/nodes\/dev-node\/proxy\/metrics\/resource: 403 /)]);
    expect(scraper.pods.size).toBe(2);
    expect(store.nodeUsage('dev-node')).toBeUndefined();
  });
});

describe('ClusterClient', () => {
  it('fails on an untrusted server certificate, a refused connection and a timeout', async () => {
    await expect(new ClusterClient({ url: cluster.url }).getText('/version')).rejects.toThrow(/certificate/);
    await expect(new ClusterClient({ url: 'http://127.0.0.1:9' }).getText('/version')).rejects.toBeInstanceOf(ClusterRequestError);
    const { createServer } = await import('node:net');
    const held: import('node:net').Socket[] = [];
    const silent = createServer((s) => void held.push(s)); // accepts, never answers
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as { port: number }).port;
    await expect(new ClusterClient({ url: `http://127.0.0.1:${port}`, timeoutMs: 200 }).getText('/x')).rejects.toThrow(/no answer within 200 ms/);
    for (const s of held) s.destroy();
    await new Promise<void>((r) => silent.close(() => r()));
  });
  it('refuses a non-http URL', () => {
    expect(() => new ClusterClient({ url: 'ftp://x' })).toThrow(/not an http\(s\) URL/);
  });
});
