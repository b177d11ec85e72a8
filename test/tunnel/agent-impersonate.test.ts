/**
 * `serve --authn impersonate` with a cluster behind an agent run `--access-as impersonate`: the
 * caller is authenticated (TokenReview) and authorized (SubjectAccessReview) by THAT cluster's
 * apiserver through the tunnel, with the agent's own token; every request then reaches the apiserver
 * with the agent's token plus `Impersonate-*` for the caller. Real processes on loopback: a TLS proxy,
 * an agent child process, a TLS dev cluster (its own CA, verified by the agent) with token
 * authentication and a policy. `secured` is a modern cluster (1.36): kubectl 1.33's WebSockets are
 * passed through to it (issue 32, `--upstream-streaming auto`), impersonated on the WebSocket
 * request itself. `legacy` (apiserver 1.29, the same users and policy, its own agent) refuses them
 * before the 101, so the proxy translates: there the impersonated request is the translator's SPDY one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCa, createServerCert, type CertAndKey } from '../helpers/certs.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary } from '../helpers/kubectl.js';
import { get, startTunnelFixture, type AgentProcess, type TunnelFixture } from './tunnel-fixture.js';
import { CLUSTER_KIND_OPTIONS, moved, waysOf, websocketWays, type Ways } from './stream-ways.js';

const skipReason = kubectlE2eSkipReason();
const AGENT_USER = 'system:serviceaccount:kube-system:kube-stream-proxy-agent';

describe.skipIf(skipReason !== undefined)('--authn impersonate through an agent (--access-as impersonate)', () => {
  let fx: TunnelFixture;
  let firstAgent: AgentProcess;
  let kubeconfigs: Record<'viewer' | 'admin' | 'stranger' | 'adminLegacy', string>;
  let bytes: BytesServer;
  // The cluster's apiserver serves TLS with its own CA: the agent verifies it (--upstream-ca-file).
  let pkiDir: string;
  let apiserverCa: CertAndKey;
  const requestsTo = (path: string, cluster = 'secured') => fx.clusters[cluster]!.requests.filter((r) => r.url.split('?')[0] === path);
  /** The counters that moved while `fn` ran (test/tunnel/stream-ways.ts). */
  const waysDuring = async (fn: () => Promise<void>, o: { fallbacks?: boolean } = {}): Promise<() => Promise<Ways>> => {
    const before = await waysOf(fx, o);
    await fn();
    return async () => moved(before, await waysOf(fx, o));
  };

  beforeAll(async () => {
    pkiDir = mkdtempSync(join(tmpdir(), 'ksp-apiserver-pki-'));
    apiserverCa = await createCa(pkiDir, 'secured apiserver CA', 'apiserver-ca');
    const serving = await createServerCert(pkiDir, apiserverCa, { stem: 'apiserver' });
    // "viewer" may read pods; "admin" (group admins) may exec, attach and port-forward.
    const securedCluster = (work: string) => {
      writeFileSync(
        join(work, 'users.csv'),
        [`agent-sa-token,${AGENT_USER},a1,""`, 'viewer-token,viewer,u1,""', 'admin-token,admin,u2,"admins"'].join('\n') + '\n',
      );
      writeFileSync(
        join(work, 'policy.json'),
        JSON.stringify({
          rules: [
            // The agent's RBAC: review callers and impersonate them, nothing else.
            { users: [AGENT_USER], verbs: ['create'], resources: ['tokenreviews', 'subjectaccessreviews'] },
            { users: [AGENT_USER], verbs: ['impersonate'], resources: ['users', 'groups', 'uids'] },
            { users: ['viewer'], verbs: ['get', 'list', 'watch'], resources: ['pods', 'namespaces'] },
            { groups: ['admins'], verbs: ['get', 'list', 'watch', 'create'], resources: ['pods', 'pods/exec', 'pods/attach', 'pods/portforward', 'namespaces'] },
          ],
        }),
      );
      return { tokenAuthFile: join(work, 'users.csv'), authorizationPolicyFile: join(work, 'policy.json'), tls: { cert: serving.cert, key: serving.key } };
    };
    fx = await startTunnelFixture(
      { secured: ['gamma'], legacy: ['gamma'] },
      { secured: securedCluster, legacy: (work) => ({ ...securedCluster(work), ...CLUSTER_KIND_OPTIONS['old-apiserver'] }) },
      { tls: true, authn: 'impersonate' },
    );
    const saToken = join(fx.work, 'agent-sa.token');
    writeFileSync(saToken, 'agent-sa-token\n');
    expect(fx.clusters.secured!.url).toMatch(/^https:/);
    const agentArgs = ['--access-as', 'impersonate', '--upstream-ca-file', apiserverCa.certFile, '--upstream-token-file', saToken];
    firstAgent = fx.startAgent('secured', { args: agentArgs });
    const legacyAgent = fx.startAgent('legacy', { args: agentArgs });
    await Promise.all([firstAgent, legacyAgent].map((a) => a.waitForOutput(/tunnel established/, 20_000)));
    const kc = (name: string, token: string, cluster = 'secured'): string => {
      const path = join(fx.work, `kubeconfig-${name}-${cluster}`);
      writeKubeconfig(path, { server: `${fx.proxy.url}/clusters/${cluster}`, name, token, caPem: fx.ca!.toString('utf8') });
      return path;
    };
    bytes = await startBytesServer();
    kubeconfigs = { viewer: kc('viewer', 'viewer-token'), admin: kc('admin', 'admin-token'), stranger: kc('stranger', 'no-such-token'), adminLegacy: kc('admin', 'admin-token', 'legacy') };
  }, 60_000);

  afterAll(async () => {
    await bytes?.close();
    await fx?.close();
    if (pkiDir) rmSync(pkiDir, { recursive: true, force: true });
  });

  const kubectl = (who: keyof typeof kubeconfigs, args: string[], version: '1.27' | '1.33' = '1.33') =>
    runKubectl(findKubectl(version), args, { kubeconfig: kubeconfigs[who], timeoutMs: 30_000 });

  it('viewer can get pods; the cluster reviewed the token with the agent\'s credentials', async () => {
    const before = requestsTo('/apis/authentication.k8s.io/v1/tokenreviews').length;
    const list = await kubectl('viewer', ['get', 'pods', '-o', 'name']);
    expect(list.code, summary(list)).toBe(0);
    expect(list.stdout.toString()).toContain('pod/gamma\n');
    const reviews = requestsTo('/apis/authentication.k8s.io/v1/tokenreviews').slice(before);
    expect(reviews.length).toBeGreaterThanOrEqual(1);
    for (const r of reviews) {
      expect(r.headers.authorization).toBe('Bearer agent-sa-token');
      expect(r.user).toBe(AGENT_USER);
    }
    // The list itself: the agent's token and Impersonate-User viewer; never the caller's token.
    const lists = requestsTo('/api/v1/namespaces/default/pods');
    expect(lists.length).toBeGreaterThanOrEqual(1);
    const last = lists.at(-1)!;
    expect(last.headers.authorization).toBe('Bearer agent-sa-token');
    expect(last.headers['impersonate-user']).toBe('viewer');
    expect(last.user).toBe('viewer');
    expect(fx.clusters.secured!.requests.some((r) => r.headers.authorization === 'Bearer viewer-token' && !r.url.includes('reviews'))).toBe(false);
  });

  it.each(['1.27', '1.33'] as const)('kubectl %s: viewer cannot exec: 403 from the cluster\'s SubjectAccessReview naming the user', async (version) => {
    const before = requestsTo('/apis/authorization.k8s.io/v1/subjectaccessreviews').length;
    const denied = await kubectl('viewer', ['exec', 'gamma', '--', 'true'], version);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain('pods "gamma" is forbidden: User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "default"');
    const sars = requestsTo('/apis/authorization.k8s.io/v1/subjectaccessreviews').slice(before);
    expect(sars.length).toBeGreaterThanOrEqual(1);
    expect(sars.every((r) => r.headers.authorization === 'Bearer agent-sa-token')).toBe(true);
    // Refused before any upgrade: no exec request reached the apiserver for viewer.
    expect(requestsTo('/api/v1/namespaces/default/pods/gamma/exec').some((r) => r.headers['impersonate-user'] === 'viewer')).toBe(false);
  });

  it('admin can exec (kubectl 1.33, its v5 WebSocket passed through); that WebSocket request carries the agent\'s token and Impersonate-User', async () => {
    const execsBefore = requestsTo('/api/v1/namespaces/default/pods/gamma/exec').length;
    const ways = await waysDuring(async () => {
      const echo = await kubectl('admin', ['exec', 'gamma', '--', 'echo', 'impersonated']);
      expect(echo.code, summary(echo)).toBe(0);
      expect(echo.stdout.toString()).toBe('impersonated\n');
    });
    // Passed through by the proxy, served by the cluster's 1.36 kubelet over WebSockets.
    await expect.poll(ways, { timeout: 5_000 }).toEqual(websocketWays('modern', 'secured', 'exec', 1));
    const execs = requestsTo('/api/v1/namespaces/default/pods/gamma/exec').slice(execsBefore);
    expect(execs).toHaveLength(1);
    const exec = execs[0]!;
    expect(exec.upgrade).toBe(true);
    expect(exec.method).toBe('GET');
    expect(String(exec.headers.upgrade).toLowerCase()).toBe('websocket');
    expect(String(exec.headers['sec-websocket-protocol']).split(',')[0]!.trim()).toBe('v5.channel.k8s.io');
    expect(exec.headers.authorization).toBe('Bearer agent-sa-token');
    expect(exec.headers['impersonate-user']).toBe('admin');
    expect(exec.headers['impersonate-group']).toBe('admins, system:authenticated');
    expect(exec.user).toBe('admin');
  });

  it('admin can exec through an older cluster (kubectl 1.33; apiserver 1.29 refuses v5, the proxy translates); both requests carry the agent\'s token and Impersonate-User', async () => {
    const path = '/api/v1/namespaces/default/pods/gamma/exec';
    const execsBefore = requestsTo(path, 'legacy').length;
    const ways = await waysDuring(async () => {
      const echo = await runKubectl(findKubectl('1.33'), ['exec', 'gamma', '--', 'echo', 'translated'], { kubeconfig: kubeconfigs.adminLegacy, timeoutMs: 30_000 });
      expect(echo.code, summary(echo)).toBe(0);
      expect(echo.stdout.toString()).toBe('translated\n');
    }, { fallbacks: true });
    // The first session to this cluster: its WebSocket refused (403, as a 1.29 kubelet refuses v5),
    // then translated by the proxy, the SPDY leg riding the agent's tunnel.
    await expect.poll(ways, { timeout: 5_000 }).toEqual({ ...websocketWays('old-apiserver', 'legacy', 'exec', 1), 'proxy/fallback/websocket->spdy/403': 1 });
    const execs = requestsTo(path, 'legacy').slice(execsBefore);
    expect(execs.map((r) => `${r.method} ${String(r.headers.upgrade)}`)).toEqual(['GET websocket', 'POST SPDY/3.1']);
    for (const exec of execs) {
      expect(exec.headers.authorization).toBe('Bearer agent-sa-token');
      expect(exec.headers['impersonate-user']).toBe('admin');
      expect(exec.headers['impersonate-group']).toBe('admins, system:authenticated');
      expect(exec.user).toBe('admin');
    }
  });

  it('admin can exec with kubectl 1.27 (SPDY passthrough, impersonated the same way)', async () => {
    const echo = await kubectl('admin', ['exec', 'gamma', '--', 'echo', 'spdy'], '1.27');
    expect(echo.code, summary(echo)).toBe(0);
    expect(echo.stdout.toString()).toBe('spdy\n');
    expect(requestsTo('/api/v1/namespaces/default/pods/gamma/exec').at(-1)!.headers['impersonate-user']).toBe('admin');
  });

  it('admin port-forwards with kubectl 1.33 (the port-forward tunnel, passed through); its WebSocket request is impersonated', async () => {
    const before = requestsTo('/api/v1/namespaces/default/pods/gamma/portforward').length;
    const ways = await waysDuring(async () => {
      const pf = startKubectl(findKubectl('1.33'), ['port-forward', 'pod/gamma', `:${bytes.port}`], { kubeconfig: kubeconfigs.admin, env: {} });
      try {
        const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytes.port}\\b`), 30_000);
        const got = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/${64 * 1000}?seed=9`);
        expect({ sha256: got.sha256, byteLength: got.byteLength }).toEqual(bytes.expected(64 * 1000, 9));
      } finally {
        await pf.stop('SIGINT', 5_000);
      }
    });
    await expect.poll(ways, { timeout: 5_000 }).toEqual(websocketWays('modern', 'secured', 'portforward', 1));
    const forwards = requestsTo('/api/v1/namespaces/default/pods/gamma/portforward').slice(before);
    expect(forwards.map((f) => `${f.method} ${String(f.headers.upgrade)}`)).toEqual(['GET websocket']);
    for (const f of forwards) {
      expect(f.headers.authorization).toBe('Bearer agent-sa-token');
      expect(f.headers['impersonate-user']).toBe('admin');
    }
  });

  it('a caller\'s own impersonation (kubectl --as) is checked by the cluster: admin may not impersonate', async () => {
    const r = await kubectl('admin', ['--as', 'someone-else', 'get', 'pods']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('users "someone-else" is forbidden: User "admin" cannot impersonate resource "users"');
    expect(fx.clusters.secured!.requests.some((x) => x.headers['impersonate-user'] === 'someone-else')).toBe(false);
  });

  it('an unknown token is refused with 401 (the cluster\'s TokenReview said no)', async () => {
    const r = await kubectl('stranger', ['get', 'pods']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Unauthorized|must be logged in/);
    const anonymous = await get(fx.proxy.url, '/clusters/secured/api/v1/namespaces/default/pods', fx.ca);
    expect(anonymous.status).toBe(401);
  });

  it('a request without a cluster prefix gets the 404 (no default upstream) without any review', async () => {
    const before = fx.clusters.secured!.requests.length;
    const res = await fetchWithToken('/api/v1/namespaces/default/pods', 'admin-token');
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body)).toMatchObject({ kind: 'Status', code: 404, reason: 'NotFound' });
    expect(res.body).toContain('address a cluster as /clusters/NAME/api/v1/namespaces/default/pods');
    expect(fx.clusters.secured!.requests.length).toBe(before);
  });

  it.each(['/clusters/secured/metrics', '/clusters/secured/logs/'])('%s (outside the Kubernetes API) is refused by the agent with 403', async (path) => {
    const res = await fetchWithToken(path, 'admin-token');
    expect(res.status).toBe(403);
    const status = JSON.parse(res.body) as { reason: string; message: string };
    expect(status.reason).toBe('Forbidden');
    expect(status.message).toContain('the agent for cluster "secured" serves only the Kubernetes API');
    expect(fx.clusters.secured!.requests.some((r) => r.url.startsWith('/metrics') || r.url.startsWith('/logs'))).toBe(false);
  });

  it('an agent whose --access-as does not match the proxy\'s --authn is refused at connect (400), logged and counted', async () => {
    const before = await fx.metric('kube_stream_proxy_tunnel_agent_refusals_total', { reason: 'bad_request' });
    const passthrough = fx.startAgent('secured', { args: ['--upstream-ca-file', apiserverCa.certFile] });
    const m = await passthrough.waitForOutput(/proxy refused the agent.*/, 20_000);
    expect(m[0]).toContain('"status":400');
    expect(m[0]).toContain('does not match this proxy\'s --authn=impersonate');
    await passthrough.kill();
    expect(await fx.metric('kube_stream_proxy_tunnel_agent_refusals_total', { reason: 'bad_request' })).toBeGreaterThan(before);
  });

  // Last: it replaces the agent the other cases use.
  it('an agent given --kubeconfig (its CA and token taken from the kubeconfig) serves impersonated execs', async () => {
    const agentKubeconfig = join(fx.work, 'agent-kubeconfig');
    writeKubeconfig(agentKubeconfig, { server: fx.clusters.secured!.url, name: 'agent', token: 'agent-sa-token', caPem: apiserverCa.cert.toString('utf8') });
    await firstAgent.kill();
    // No --upstream-ca-file / --upstream-token-file: without the kubeconfig's CA the TLS dial fails,
    // without its token the reviews are anonymous and refused.
    const second = fx.startAgent('secured', { args: ['--access-as', 'impersonate', '--kubeconfig', agentKubeconfig] });
    try {
      await second.waitForOutput(/tunnel established/, 20_000);
      const execsBefore = requestsTo('/api/v1/namespaces/default/pods/gamma/exec').length;
      const r = await kubectl('admin', ['exec', 'gamma', '--', 'echo', 'via-kubeconfig-agent']);
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toBe('via-kubeconfig-agent\n');
      const execs = requestsTo('/api/v1/namespaces/default/pods/gamma/exec').slice(execsBefore);
      expect(execs.length).toBeGreaterThanOrEqual(1);
      expect(execs.at(-1)!.headers.authorization).toBe('Bearer agent-sa-token');
      expect(execs.at(-1)!.headers['impersonate-user']).toBe('admin');
    } finally {
      await second.kill();
    }
  });

  // Last too: it replaces the agent.
  it('an agent run --in-cluster (service-account token and CA files, KUBERNETES_SERVICE_HOST/PORT) serves impersonated execs', async () => {
    const root = join(fx.work, 'in-cluster-root');
    const saDir = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
    mkdirSync(saDir, { recursive: true });
    writeFileSync(join(saDir, 'token'), 'agent-sa-token\n');
    writeFileSync(join(saDir, 'ca.crt'), apiserverCa.cert);
    writeFileSync(join(saDir, 'namespace'), 'kube-system');
    const api = new URL(fx.clusters.secured!.url);
    const agent = fx.startAgent('secured', {
      upstream: null,
      args: ['--access-as', 'impersonate', '--in-cluster'],
      env: { ...process.env, KSP_IN_CLUSTER_PATH_PREFIX: root, KUBERNETES_SERVICE_HOST: api.hostname, KUBERNETES_SERVICE_PORT: api.port },
    });
    try {
      await agent.waitForOutput(/tunnel established/, 20_000);
      expect(agent.output()).toContain(`upstream https://${api.hostname}:${api.port}`);
      const execsBefore = requestsTo('/api/v1/namespaces/default/pods/gamma/exec').length;
      const r = await kubectl('admin', ['exec', 'gamma', '--', 'echo', 'via-in-cluster-agent']);
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toBe('via-in-cluster-agent\n');
      const execs = requestsTo('/api/v1/namespaces/default/pods/gamma/exec').slice(execsBefore);
      expect(execs.at(-1)!.headers.authorization).toBe('Bearer agent-sa-token');
      expect(execs.at(-1)!.headers['impersonate-user']).toBe('admin');
    } finally {
      await agent.kill();
    }
  });

  async function fetchWithToken(path: string, token: string): Promise<{ status: number; body: string }> {
    const { request } = await import('node:https');
    return new Promise((resolve, reject) => {
      const req = request(new URL(path, fx.proxy.url), { ca: fx.ca!, headers: { Authorization: `Bearer ${token}` } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
  }
});
