/**
 * Issue 31, finding 7, on a real server: a token the issuer really signed, whose claim makes a
 * backtracking engine run for seconds per character (`claims.x.matches('^(a+)+$')` over
 * `aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!`), sent together with another caller's good token. Both callers
 * are answered (401 and 200: the regex runs on RE2, whose matching is linear), and the bad token's
 * second presentation is answered from the token cache: the latency histogram, which kube-apiserver
 * observes on cache misses only, still counts one failure. Every refusal is logged, without the
 * token. Before the fix this test ran the regex on `RegExp` for tens of seconds per presentation
 * and counted two failures.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProxyApiClient } from '../../src/api-client.js';
import { kubeHash } from '../../src/auth/jwt-metrics.js';
import { resolveConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { scrapeCounter } from '../helpers/metrics.js';
import { startTestProvider, TEST_CLIENT_ID, type TestProvider } from '../helpers/oidc-provider.js';
import { waitFor } from '../helpers/wait.js';

const RULE = "claims.x.matches('^(a+)+$')";
/** 29 `a`s and a `!`: 2^29 backtracking steps for RegExp, 30 characters for RE2. */
const CATASTROPHIC = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!';

let dir: string;
let idp: TestProvider;
let upstream: Server;
let proxy: RunningServer;
const upstreamSaw: IncomingMessage['headers'][] = [];
const logs: Record<string, unknown>[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ksp-cel-dos-'));
  idp = await startTestProvider();
  upstream = createServer((req, res) => {
    upstreamSaw.push(req.headers);
    res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"kind":"PodList","items":[]}');
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  writeFileSync(
    join(dir, 'auth.yaml'),
    `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${idp.issuer}
    audiences: [${TEST_CLIENT_ID}]
    certificateAuthority: ${JSON.stringify(idp.ca)}
  claimValidationRules:
  - expression: "${RULE}"
    message: x must be a run of a
  claimMappings:
    username: {claim: sub, prefix: "oidc:"}
`,
  );
  let partial = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      partial += chunk.toString('utf8');
      for (let nl = partial.indexOf('\n'); nl >= 0; nl = partial.indexOf('\n')) {
        const line = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        if (line.trim() !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      }
      cb();
    },
  });
  const api = { reviewToken: async () => ({ authenticated: false }) } as unknown as ProxyApiClient;
  const config = await resolveConfig({
    listen: '127.0.0.1:0',
    upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    authn: 'impersonate',
    authenticationConfig: join(dir, 'auth.yaml'),
  });
  proxy = await startServer(config, { apiClient: api, logger: { level: 'info', stream } });
  await waitFor('the issuer keys', async () => ((await fetch(`${proxy.url}/readyz`)).status === 200 ? true : undefined));
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  upstream?.close();
  await idp?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const get = async (token: string): Promise<number> => {
  const res = await fetch(`${proxy.url}/api/v1/namespaces/default/pods`, { headers: { Authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  return res.status;
};
const verifications = (result: 'success' | 'failure'): Promise<number> =>
  scrapeCounter(proxy.url, 'apiserver_authentication_jwt_authenticator_latency_seconds_count', { result, jwt_issuer_hash: kubeHash(idp.issuer) });

describe('a catastrophic regex claim in a signed token', () => {
  it("is refused on RE2 while another caller is answered; its second presentation is answered from the cache", async () => {
    const bad = await idp.mint({ sub: 'mallory', x: CATASTROPHIC });
    const good = await idp.mint({ sub: 'alice', x: 'aaaa' });
    // Both on the wire at once: the other caller is not held behind the bad token's evaluation.
    expect(await Promise.all([get(bad), get(good)])).toEqual([401, 200]);
    expect(upstreamSaw.map((h) => h['impersonate-user'])).toEqual(['oidc:alice']);
    expect(await verifications('failure')).toBe(1);
    expect(await verifications('success')).toBe(1);

    // Presented again: the same 401, and no second verification (no CEL run).
    expect(await get(bad)).toBe(401);
    expect(await verifications('failure')).toBe(1);

    const refusals = logs.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('jwt authentication failed'));
    expect(refusals.map((l) => l.msg)).toEqual(
      Array(2).fill(`jwt authentication failed: oidc: error evaluating claim validation expression: validation expression '${RULE}' failed: x must be a run of a`),
    );
    expect(JSON.stringify(logs)).not.toContain(bad.split('.')[2]!);
  });
});
