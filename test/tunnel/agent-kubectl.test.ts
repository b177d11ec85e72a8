/**
 * Acceptance for clusters behind agents: two dev clusters (pods `alpha` and `beta`), one agent
 * process each, one proxy without a primary upstream; kubectl addresses each cluster as
 * `server: <proxy>/clusters/NAME`. kubectl 1.27 speaks SPDY (passthrough over the tunnel), 1.33
 * WebSocket v5 and the WebSocket port-forward tunnel, which the proxy (`--upstream-streaming auto`,
 * issue 32) passes through to each cluster as the demo's two clusters take them: `one` is modern
 * (apiserver and kubelet 1.36: its kubelet serves them itself), `two` has an older kubelet (1.35: its
 * apiserver translates). Proven by the counters of the proxy and of each cluster
 * (test/tunnel/stream-ways.ts); the proxy's own translator through a tunnel is in agent-matrix.test.ts
 * and agent-faults.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { join } from 'node:path';
import { sha256 } from '../helpers/hash.js';
import { startBytesServer, downloadDigest, type BytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { deterministicBytes, repeatedPatternDigest, writeDeterministicFile } from '../helpers/random-data.js';
import { get, startTunnelFixture, type AgentProcess, type TunnelFixture } from './tunnel-fixture.js';
import { CLUSTER_KIND_OPTIONS, foldEarlyClientExits, moved, sumWays, waysOf, websocketWays, type Ways } from './stream-ways.js';

const skipReason = kubectlE2eSkipReason();
const KB = 1000;
const MB = 1000 * KB;

/** kubectl 1.27 speaks SPDY only; 1.33 WebSocket (v5 exec/attach, the port-forward tunnel). */
const CLIENTS: { version: KubectlVersion; websocket: boolean }[] = [
  { version: '1.27', websocket: false },
  { version: '1.33', websocket: true },
];

describe.skipIf(skipReason !== undefined)('kubectl → proxy /clusters/NAME → agent tunnel → dev cluster', () => {
  let fx: TunnelFixture;
  const agents: Record<string, AgentProcess> = {};
  let bytes: BytesServer;

  beforeAll(async () => {
    fx = await startTunnelFixture({ one: ['alpha'], two: ['beta'] }, { one: () => CLUSTER_KIND_OPTIONS.modern, two: () => CLUSTER_KIND_OPTIONS['older-kubelet'] });
    bytes = await startBytesServer();
    for (const c of ['one', 'two']) agents[c] = fx.startAgent(c);
    await Promise.all(Object.values(agents).map((a) => a.waitForOutput(/tunnel established/, 20_000)));
  }, 60_000);

  afterAll(async () => {
    await bytes?.close();
    await fx?.close();
  });

  /**
   * Run `fn`; then the counters moved by exactly `expected` (1.33) or not at all (1.27, SPDY).
   * `expected` may be given the number of exec sessions the proxy passed through (kubectl cp runs
   * one or more). `cpDownloadFrom`: `fn` ran one `kubectl cp POD:FILE …` in that cluster, which may
   * leave before its session's Status (foldEarlyClientExits: counted 500 by a translating apiserver).
   */
  const ways = async (websocket: boolean, expected: Ways | ((sessions: number) => Ways), fn: () => Promise<void>, cpDownloadFrom?: string): Promise<void> => {
    const before = await waysOf(fx);
    await fn();
    const now = async (): Promise<Ways> => moved(before, await waysOf(fx));
    if (!websocket) return expect(await now()).toEqual({});
    const sessions = (await now())['proxy/exec/proxied_to_upstream'] ?? 0;
    if (typeof expected === 'function') expect(sessions).toBeGreaterThan(0);
    const settled = async (): Promise<Ways> => (cpDownloadFrom ? foldEarlyClientExits(await now(), cpDownloadFrom).ways : now());
    await expect.poll(settled, { timeout: 5_000 }).toEqual(typeof expected === 'function' ? expected(sessions) : expected);
    if (cpDownloadFrom) expect(foldEarlyClientExits(await now(), cpDownloadFrom).clientGone, 'at most the download left before its Status').toBeLessThanOrEqual(1);
  };

  describe.each(CLIENTS)('kubectl $version', ({ version, websocket }) => {
    const bin = (): string => findKubectl(version);
    const run = (cluster: string, args: string[], o: { stdin?: Buffer; cwd?: string } = {}) =>
      runKubectl(bin(), args, { kubeconfig: fx.kubeconfigs[cluster]!, timeoutMs: 60_000, ...(o.stdin ? { stdin: o.stdin } : {}), ...(o.cwd ? { cwd: o.cwd } : {}) });

    it('exec echo, exit code 3 and stdin reach the right cluster', async () => {
      // 1.33: two sessions passed through to one's kubelet, one to two's apiserver, which translated it.
      await ways(websocket, sumWays(websocketWays('modern', 'one', 'exec', 2), websocketWays('older-kubelet', 'two', 'exec', 1)), async () => {
        const echo = await run('one', ['exec', 'alpha', '--', 'echo', 'hello from one']);
        expect(echo.code, summary(echo)).toBe(0);
        expect(echo.stdout.toString()).toBe('hello from one\n');
        const exit3 = await run('two', ['exec', 'beta', '--', 'sh', '-c', 'echo to-stderr >&2; exit 3']);
        expect(exit3.code, summary(exit3)).toBe(3);
        expect(exit3.stderr).toContain('to-stderr');
        const input = deterministicBytes(14, 300 * KB);
        const cat = await run('one', ['exec', '-i', 'alpha', '--', 'sha256sum'], { stdin: input });
        expect(cat.code, summary(cat)).toBe(0);
        expect(cat.stdout.toString().split(' ')[0]).toBe(sha256(input));
      });
      // The pod `beta` exists only in cluster two. (Its 404 comes before any 101, so the proxy also
      // asks in the other protocol, and kubectl 1.33 retries over SPDY: docs/translator.md.)
      const wrong = await run('one', ['exec', 'beta', '--', 'true']);
      expect(wrong.code).not.toBe(0);
      expect(wrong.stderr).toMatch(/pods "beta" not found/);
    });

    it('20 MB stdin (sha256) and 100 MB stdout (byte-exact) through the tunnel', () =>
      ways(websocket, sumWays(websocketWays('modern', 'one', 'exec', 1), websocketWays('older-kubelet', 'two', 'exec', 1)), async () => {
        const input = deterministicBytes(15, 20 * MB);
        const inR = await runKubectl(bin(), ['exec', '-i', 'alpha', '--', 'sha256sum'], { kubeconfig: fx.kubeconfigs.one!, stdin: input, timeoutMs: 120_000 });
        expect(inR.code, summary(inR)).toBe(0);
        expect(inR.stdout.toString().split(' ')[0]).toBe(sha256(input));
        const outR = await runKubectl(bin(), ['exec', 'beta', '--', 'sh', '-c', `yes abcdefghij | head -c ${100 * MB}`], {
          kubeconfig: fx.kubeconfigs.two!,
          hashStdout: true,
          timeoutMs: 120_000,
        });
        expect(outR.code, summary(outR)).toBe(0);
        expect(outR.stdoutDigest).toEqual(repeatedPatternDigest('abcdefghij\n', 100 * MB));
      }),
      240_000,
    );

    it('get pods -w receives an event of its own cluster only', async () => {
      const name = `watched-${version.replace('.', '-')}`;
      const watch = startKubectl(bin(), ['get', 'pods', '-w', '-o', 'name'], { kubeconfig: fx.kubeconfigs.one!, env: {} });
      try {
        await watch.waitForOutput(/pod\/alpha/, 30_000);
        fx.clusters.two!.pods.create({ name: `${name}-other` });
        fx.clusters.one!.pods.create({ name });
        await watch.waitForOutput(new RegExp(`pod/${name}\\b`), 30_000);
        expect(watch.output().stdout).not.toContain(`${name}-other`);
      } finally {
        await watch.stop('SIGINT', 5_000);
      }
    });

    it('get pods shows only that cluster\'s pods', async () => {
      const one = await run('one', ['get', 'pods', '-o', 'name']);
      const two = await run('two', ['get', 'pods', '-o', 'name']);
      expect(one.code, summary(one)).toBe(0);
      const names = (r: typeof one): string[] => r.stdout.toString().split('\n').filter((n) => n !== '' && !n.includes('watched-'));
      expect(names(one).sort()).toEqual(['pod/alpha', 'pod/demo']);
      expect(names(two).sort()).toEqual(['pod/beta', 'pod/demo']);
    });

    // kubectl 1.33 port-forwards over WebSocket: one tunnel session, passed through to one's kubelet.
    it('port-forward carries a few KB', () =>
      ways(websocket, websocketWays('modern', 'one', 'portforward', 1), async () => {
        const pf = startKubectl(bin(), ['port-forward', 'pod/alpha', `:${bytes.port}`], { kubeconfig: fx.kubeconfigs.one!, env: {} });
        try {
          const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytes.port}\\b`), 30_000);
          const got = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/${64 * KB}?seed=7`);
          expect({ sha256: got.sha256, byteLength: got.byteLength }).toEqual(bytes.expected(64 * KB, 7));
        } finally {
          await pf.stop('SIGINT', 5_000);
        }
      }),
    );

    // kubectl 1.33's cp runs tar in exec sessions over v5: two's apiserver translates each.
    it('cp 2 MB to the pod and back', () =>
      ways(websocket, (n) => websocketWays('older-kubelet', 'two', 'exec', n), async () => {
        const src = join(fx.work, `cp-${version}.bin`);
        const digest = await writeDeterministicFile(src, 21, 2 * MB);
        const up = await run('two', ['cp', `cp-${version}.bin`, `beta:up-${version}.bin`], { cwd: fx.work });
        expect(up.code, summary(up)).toBe(0);
        const back = join(fx.work, `back-${version}.bin`);
        const down = await run('two', ['cp', `beta:up-${version}.bin`, `back-${version}.bin`], { cwd: fx.work });
        expect(down.code, summary(down)).toBe(0);
        expect(sha256(readFileSync(back))).toBe(digest.sha256);
      }, 'two'),
    );
  });

  it('a cluster without an agent gets a 503 Status naming it, within 1 s', async () => {
    const started = performance.now();
    const res = await fetch(`${fx.proxy.url}/clusters/missing/api/v1/namespaces/default/pods`);
    const elapsed = performance.now() - started;
    const body = (await res.json()) as { kind: string; code: number; message: string };
    expect(res.status).toBe(503);
    expect(body).toMatchObject({ kind: 'Status', code: 503 });
    expect(body.message).toContain('cluster "missing"');
    expect(elapsed).toBeLessThan(1000);
    const kubectl = await runKubectl(findKubectl('1.33'), ['exec', 'alpha', '--', 'true'], { kubeconfig: fx.kubeconfigs.missing!, timeoutMs: 30_000 });
    expect(kubectl.code).not.toBe(0);
    // kubectl's discovery prints only the reason of a 503 (ServiceUnavailable), not its message.
    expect(kubectl.stderr).toContain('ServiceUnavailable');
  });

  it('a request without a cluster prefix gets a 404 Status (no default upstream)', async () => {
    const res = await fetch(`${fx.proxy.url}/api/v1/namespaces/default/pods`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { message: string }).message).toContain('/clusters/NAME');
  });

  it('an agent with a wrong token is refused and says why', async () => {
    const refusalsBefore = await fx.metric('kube_stream_proxy_tunnel_agent_refusals_total', { reason: 'unauthorized' });
    const bad = fx.startAgent('one', { token: 'not-a-token' });
    try {
      const m = await bad.waitForOutput(/"msg":"proxy refused the agent".*/, 20_000);
      expect(m[0]).toContain('"status":401');
      expect(m[0]).toContain('unknown agent token');
      expect(await fx.metric('kube_stream_proxy_tunnel_agent_refusals_total', { reason: 'unauthorized' })).toBeGreaterThan(refusalsBefore);
      // The good agent still serves the cluster.
      expect(await fx.metric('kube_stream_proxy_tunnel_agents', { cluster: 'one' })).toBe(1);
    } finally {
      await bad.kill();
    }
    // Another cluster's token is not valid for this cluster.
    const crossed = fx.startAgent('one', { token: fx.tokens.two! });
    try {
      const m = await crossed.waitForOutput(/"msg":"proxy refused the agent".*/, 20_000);
      expect(m[0]).toContain('"status":403');
    } finally {
      await crossed.kill();
    }
  });

  it('metrics count agents and tunnel streams per cluster', async () => {
    expect(await fx.metric('kube_stream_proxy_tunnel_agents', { cluster: 'one' })).toBe(1);
    expect(await fx.metric('kube_stream_proxy_tunnel_agents', { cluster: 'two' })).toBe(1);
    expect(await fx.metric('kube_stream_proxy_tunnel_streams_opened_total', { cluster: 'one' })).toBeGreaterThan(0);
    expect(await fx.metric('kube_stream_proxy_tunnel_agent_connections_total', { cluster: 'two' })).toBeGreaterThanOrEqual(1);
  });

  // kubectl 1.27 (SPDY passthrough) sees its connection close: with no Status on the error stream
  // it exits 0 — what it does when a kube-apiserver connection drops too. kubectl 1.33 (its v5
  // session passed through to two's apiserver) sees its WebSocket end without a close frame and
  // exits non-zero, as when a kube-apiserver connection drops.
  it.each([
    { version: '1.27' as const, failure: false },
    { version: '1.33' as const, failure: true },
  ])('killing the agent mid-stream ends a kubectl $version session within a few seconds; a new agent serves again', async ({ version, failure }) => {
    const session = startKubectl(findKubectl(version), ['exec', 'beta', '--', 'sh', '-c', 'echo started; sleep 60'], { kubeconfig: fx.kubeconfigs.two!, env: {} });
    try {
      await session.waitForOutput(/started/, 30_000);
      const killedAt = performance.now();
      await agents.two!.kill('SIGKILL');
      const exit = await session.stop('SIGCONT', 10_000);
      expect(exit.killed, JSON.stringify(session.output())).toBe(false);
      if (failure) expect(exit.code, JSON.stringify(session.output())).not.toBe(0);
      expect(performance.now() - killedAt).toBeLessThan(5_000);
    } finally {
      await session.stop('SIGKILL', 5_000);
    }
    const res = await fetch(`${fx.proxy.url}/clusters/two/api`);
    expect(res.status).toBe(503);
    agents.two = fx.startAgent('two');
    await agents.two.waitForOutput(/tunnel established/, 20_000);
    const echo = await runKubectl(findKubectl(version), ['exec', 'beta', '--', 'echo', 'back'], { kubeconfig: fx.kubeconfigs.two!, timeoutMs: 30_000 });
    expect(echo.code, summary(echo)).toBe(0);
    expect(echo.stdout.toString()).toBe('back\n');
  });
});

describe.skipIf(skipReason !== undefined)('kubectl → TLS proxy → TLS agent tunnel → a cluster that authenticates and authorizes', () => {
  let fx: TunnelFixture;

  beforeAll(async () => {
    fx = await startTunnelFixture(
      { secured: ['gamma'] },
      {
        // "viewer" may read pods, not exec; anonymous requests are refused.
        secured: (work) => {
          writeFileSync(join(work, 'users.csv'), 'viewer-token,viewer,u1,""\n');
          writeFileSync(
            join(work, 'policy.json'),
            JSON.stringify({ rules: [{ users: ['viewer'], verbs: ['get', 'list', 'watch'], resources: ['pods', 'namespaces'] }] }),
          );
          return { tokenAuthFile: join(work, 'users.csv'), authorizationPolicyFile: join(work, 'policy.json') };
        },
      },
      { tls: true },
    );
    await fx.startAgent('secured').waitForOutput(/tunnel established/, 20_000);
  }, 60_000);

  afterAll(async () => {
    await fx?.close();
  });

  // What reaches the cluster for one `kubectl exec` the cluster refuses, in order (method, upgrade).
  // The proxy (`--upstream-streaming auto`) asks in the client's protocol first. The cluster's
  // authorizer answers with a Forbidden Status: a refused WebSocket (a GET, `get` and since 1.35
  // `create`) is asked once more over SPDY (a POST, `create`: no less), but a refused SPDY `create`
  // is never asked again as a WebSocket `get` (docs/translator.md). So kubectl 1.27 makes one
  // attempt; 1.33 makes its WebSocket one (then the proxy's SPDY one), then its own SPDY one; and
  // the message the user reads names `create`, as kube-apiserver's own answer to kubectl does.
  const REFUSED_EXEC: Record<string, { attempts: string[]; verb: string }> = {
    '1.27': { attempts: ['POST SPDY/3.1'], verb: 'create' },
    '1.33': { attempts: ['GET websocket', 'POST SPDY/3.1', 'POST SPDY/3.1'], verb: 'create' },
  };

  describe.each(CLIENTS)('kubectl $version', ({ version }) => {
    const bin = (): string => findKubectl(version);
    it('the apiserver\'s 403 on exec comes back through the tunnel; the caller\'s token rides through', async () => {
      const kubeconfig = join(fx.work, `kubeconfig-viewer-${version}`);
      writeKubeconfig(kubeconfig, { server: `${fx.proxy.url}/clusters/secured`, name: 'viewer', token: 'viewer-token', caPem: fx.ca!.toString('utf8') });
      const list = await runKubectl(bin(), ['get', 'pods', '-o', 'name'], { kubeconfig, timeoutMs: 30_000 });
      expect(list.code, summary(list)).toBe(0);
      expect(list.stdout.toString()).toContain('pod/gamma');
      const execPath = '/api/v1/namespaces/default/pods/gamma/exec';
      const seen = fx.clusters.secured!.requests.length;
      const denied = await runKubectl(bin(), ['exec', 'gamma', '--', 'true'], { kubeconfig, timeoutMs: 30_000 });
      expect(denied.code).not.toBe(0);
      expect(denied.stderr).toMatch(/Forbidden|forbidden/);
      expect(denied.stderr).toContain(`Error from server (Forbidden): pods "gamma" is forbidden: User "viewer" cannot ${REFUSED_EXEC[version]!.verb} resource "pods/exec" in API group "" in the namespace "default"`);
      // Every attempt reached the cluster with the caller's own token, and was refused as viewer.
      const execs = fx.clusters.secured!.requests.slice(seen).filter((r) => r.url.split('?')[0] === execPath);
      expect(execs.map((r) => `${r.method} ${String(r.headers.upgrade)}`)).toEqual(REFUSED_EXEC[version]!.attempts);
      for (const r of execs) {
        expect(r.headers.authorization).toBe('Bearer viewer-token');
        expect(r.user).toBe('viewer');
      }
      // Without a token the apiserver's 401 comes back (kubectl itself would then prompt for a password).
      const anonymous = await get(fx.proxy.url, '/clusters/secured/api/v1/namespaces/default/pods', fx.ca);
      expect(anonymous.status).toBe(401);
      expect(JSON.parse(anonymous.body)).toMatchObject({ kind: 'Status', code: 401, reason: 'Unauthorized' });
    });

  });
});
