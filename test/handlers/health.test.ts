/**
 * `/readyz` on a real server whose upstream and JWT issuer are both unreachable: the public body names
 * the failing checks with `reason withheld`, as kube-apiserver's healthz handler does, and holds
 * neither the upstream's address, nor the issuer's URL, nor the dial error; the reasons go to the log.
 * `?verbose` withholds them too (kube-apiserver's failure body is always the verbose one); on a
 * passing `/readyz` it lists the checks, as kube-apiserver's does.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { buildServer, startServer, type RunningServer } from '../../src/server.js';
import { TEST_CLIENT_ID } from '../helpers/oidc-provider.js';
import { waitFor } from '../helpers/wait.js';

/** Port 9 (discard) and port 1 on loopback: nothing listens, so every dial is refused. */
const ISSUER = 'https://127.0.0.1:9';
const UPSTREAM_PORT = '1';

let dir: string;
let proxy: RunningServer;
const logs: Record<string, unknown>[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ksp-readyz-'));
  const auth = join(dir, 'auth.yaml');
  writeFileSync(
    auth,
    `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${ISSUER}
    audiences: [${TEST_CLIENT_ID}]
  claimMappings:
    username: {claim: sub, prefix: ""}
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
  const config = await resolveConfig({ listen: '127.0.0.1:0', upstream: `http://127.0.0.1:${UPSTREAM_PORT}`, authn: 'impersonate', authenticationConfig: auth });
  proxy = await startServer(config, { logger: { level: 'info', stream } });
});

afterAll(async () => {
  await proxy?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('/readyz withholds the reasons of failed checks', () => {
  it.each(['/readyz', '/readyz?verbose', '/readyz?verbose=true'])('GET %s: 500, each check named, no address, URL or error in the body; the reasons are logged', async (path) => {
    const before = logs.length;
    const res = await fetch(`${proxy.url}${path}`);
    const body = await res.text();
    expect(res.status).toBe(500);
    expect(body).toBe('[+]shutdown ok\n[-]upstream failed: reason withheld\n[-]jwt failed: reason withheld\nreadyz check failed\n');
    for (const secret of ['127.0.0.1', ISSUER, 'ECONNREFUSED', `:${UPSTREAM_PORT}`]) expect(body).not.toContain(secret);
    // The log line, written before the answer: which checks failed and why.
    const line = await waitFor('the readyz log line', async () => logs.slice(before).find((l) => typeof l.msg === 'string' && l.msg.startsWith('readyz check failed')));
    expect(line.msg).toBe('readyz check failed: upstream,jwt');
    const reasons = JSON.stringify(line.checks);
    expect(reasons).toContain('ECONNREFUSED');
    expect(reasons).toContain(`127.0.0.1:${UPSTREAM_PORT}`);
    expect(reasons).toContain(`jwt authenticator for ${ISSUER}`);
  });

  it('GET /healthz and /livez stay `ok`', async () => {
    for (const path of ['/healthz', '/livez']) {
      const res = await fetch(`${proxy.url}${path}`);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('ok');
    }
  });
});

describe('/readyz?verbose on a ready server', () => {
  it('lists the checks and `readyz check passed`; without `verbose` the body is `ok`', async () => {
    const app = await buildServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:1' }), { upstreamProbe: { check: async () => ({ ok: true }) } });
    try {
      const verbose = await app.inject({ method: 'GET', url: '/readyz?verbose' });
      expect(verbose.statusCode).toBe(200);
      expect(verbose.body).toBe('[+]shutdown ok\n[+]upstream ok\nreadyz check passed\n');
      expect((await app.inject({ method: 'GET', url: '/readyz' })).body).toBe('ok');
    } finally {
      await app.close();
    }
  });
});
