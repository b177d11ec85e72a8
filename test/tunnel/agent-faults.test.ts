/**
 * Issue 14's fault acceptance through agent tunnels, with real kubectl and real processes: two dev
 * clusters (pods `alpha` and `beta`), one agent process each, and the proxy as a child process (the
 * default `--upstream-streaming auto`) so it can be SIGKILLed and started again on the same ports.
 * kubectl 1.27 speaks SPDY (passthrough over the tunnel); kubectl 1.33 speaks WebSocket v5, which the
 * proxy passes through to `one`, a modern cluster (1.36), and translates itself for `two`, an old one
 * (apiserver 1.29 refuses v5 before the 101: the proxy falls back to its translator, the SPDY leg
 * riding the tunnel). Each way is proven by counters (test/tunnel/stream-ways.ts).
 * - agent SIGKILLed mid-stream → kubectl's session ends within 1 s (1.27 sees its connection close,
 *   1.33 passed through sees its WebSocket end as from a kube-apiserver, 1.33 translated gets the
 *   translator's Failure Status);
 * - proxy SIGKILLed and restarted → both agents are back within 10 s and serve again;
 * - kubectl SIGKILLed mid-exec → the pod's process is signalled within 1 s and the tunnel stream
 *   is gone (a shell trapping the signal around `sleep`; `cat` with stdin open, killed by SIGTERM);
 * - an exec the cluster refuses (403) comes back byte for byte as the apiserver wrote it: with
 *   `--upstream-streaming spdy` (the translator relays the refusal of its SPDY request) and with the
 *   default `auto` (the answer to the proxy's last attempt, after a fallback).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { constants as osConstants } from 'node:os';
import { PassThrough } from 'node:stream';
import type { ExecProcess } from '../../dev/cluster/pod.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { waitFor } from '../helpers/wait.js';
import { startTunnelFixture, type AgentProcess, type ProxyProcess, type TunnelFixture } from './tunnel-fixture.js';
import { CLUSTER_KIND_OPTIONS, moved, proxyWays, sumWays, waysOf, websocketWays, type ClusterKind, type Ways } from './stream-ways.js';

const skipReason = kubectlE2eSkipReason();

/** The bounds. */
const CLIENT_SEES_CLOSE_MS = 1_000;
const AGENTS_BACK_MS = 10_000;
const PROCESS_SIGNALLED_MS = 1_000;

/** The pod that exists only in each cluster. */
const POD: Record<string, string> = { one: 'alpha', two: 'beta' };

/** A modern cluster the proxy passes WebSockets to, and an old one it translates them for. */
const KIND: Record<string, ClusterKind> = { one: 'modern', two: 'old-apiserver' };

/** kubectl 1.27 speaks SPDY only; 1.33 WebSocket v5. */
const CLIENTS: { version: KubectlVersion; websocket: boolean }[] = [
  { version: '1.27', websocket: false },
  { version: '1.33', websocket: true },
];

/**
 * A shell that writes which signal it got into `marker` (in the pod's working directory) and exits;
 * prints "ready" first. The dev cluster signals the exec'd process group.
 */
function signalRecorder(marker: string): string[] {
  // Written under another name and renamed, so the marker appears only with its content in it.
  const traps = ['TERM', 'HUP', 'INT'].map((s) => `trap 'echo ${s} > ${marker}.tmp; mv ${marker}.tmp ${marker}; exit 0' ${s};`).join(' ');
  return ['sh', '-c', `${traps} echo ready; sleep 600 & wait`];
}

/** Poll (every 5 ms) until `file` exists; resolves with performance.now() then. */
async function fileAppears(file: string, timeoutMs = 5_000): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (!existsSync(file)) {
    if (performance.now() > deadline) throw new Error(`${file} did not appear within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return performance.now();
}

describe.skipIf(skipReason !== undefined)('faults through agent tunnels (proxy and agents as processes)', () => {
  let fx: TunnelFixture<ProxyProcess>;
  const agents: Record<string, AgentProcess> = {};

  const startAgent = async (cluster: string): Promise<void> => {
    agents[cluster] = fx.startAgent(cluster);
    await agents[cluster].waitForOutput(/tunnel established/, 30_000);
  };

  beforeAll(async () => {
    fx = await startTunnelFixture({ one: ['alpha'], two: ['beta'] }, { one: () => CLUSTER_KIND_OPTIONS[KIND.one!], two: () => CLUSTER_KIND_OPTIONS[KIND.two!] }, { proxyProcess: true });
    await Promise.all(['one', 'two'].map(startAgent));
  }, 90_000);

  afterAll(async () => {
    await fx?.close();
  });

  const echoWorks = async (version: KubectlVersion, cluster: string, text: string): Promise<void> => {
    const r = await runKubectl(findKubectl(version), ['exec', POD[cluster]!, '--', 'echo', text], { kubeconfig: fx.kubeconfigs[cluster]!, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(0);
    expect(r.stdout.toString()).toBe(`${text}\n`);
  };

  // kubectl 1.27 (SPDY passthrough) sees its connection close: with no Status on the error stream
  // it exits 0 — what it does when a kube-apiserver connection drops too. kubectl 1.33 passed
  // through to `one` sees its WebSocket end without a close frame, prints gorilla's 1006 and exits
  // 1, as when a kube-apiserver connection drops. kubectl 1.33 translated by the proxy for `two` gets
  // the translator's Failure Status on channel 3, prints its message and exits 1.
  it.each([
    { version: '1.27' as const, cluster: 'one', failure: undefined },
    { version: '1.33' as const, cluster: 'one', failure: 'error: error reading from error stream: next reader: websocket: close 1006 (abnormal closure): unexpected EOF' },
    { version: '1.33' as const, cluster: 'two', failure: 'Internal error occurred: error reading from error stream: the upstream connection was closed' },
  ])(`agent SIGKILLed mid-stream: kubectl $version's session through /clusters/$cluster ends within ${CLIENT_SEES_CLOSE_MS} ms`, async ({ version, cluster, failure }) => {
    const before = await waysOf(fx);
    const session = startKubectl(findKubectl(version), ['exec', POD[cluster]!, '--', 'sh', '-c', 'echo started; sleep 60'], { kubeconfig: fx.kubeconfigs[cluster]!, env: {} });
    try {
      await session.waitForOutput(/started/, 30_000);
      const exited = once(session.child, 'exit').then(([code]) => ({ code: code as number | null, at: performance.now() }));
      const killedAt = performance.now();
      agents[cluster]!.child.kill('SIGKILL');
      const exit = await Promise.race([exited, new Promise<undefined>((r) => setTimeout(r, 10_000, undefined))]);
      const output = JSON.stringify(session.output());
      expect(exit, `kubectl still running 10 s after the agent was killed: ${output}`).toBeDefined();
      const elapsed = exit!.at - killedAt;
      console.log(`kubectl ${version}: session ended ${elapsed.toFixed(0)} ms after the agent was SIGKILLed (exit ${exit!.code})`);
      if (failure) {
        expect(exit!.code, output).toBe(1);
        expect(session.output().stderr).toContain(failure);
      } else {
        expect(exit!.code, output).toBe(0);
      }
      expect(elapsed, output).toBeLessThan(CLIENT_SEES_CLOSE_MS);
    } finally {
      await session.stop('SIGKILL', 5_000);
      await agents[cluster]!.kill();
    }
    // The way the session went: SPDY moves no WebSocket counter; a passed-through one is counted with
    // the cluster's kubelet; a translated one ends with the translator's 500.
    const way = async (): Promise<Ways> => moved(before, await waysOf(fx));
    if (version === '1.27') expect(await way()).toEqual({});
    else if (KIND[cluster] === 'modern') expect(await way()).toEqual(websocketWays('modern', cluster, 'exec', 1));
    else await expect.poll(way, { timeout: 5_000 }).toEqual({ 'proxy/exec/translated_at_apiserver': 1, 'proxy/translator/500': 1 });
    // The cluster is unavailable until its agent is back, then served again.
    const res = await fetch(`${fx.proxy.url}/clusters/${cluster}/api`);
    expect(res.status).toBe(503);
    await startAgent(cluster);
    await echoWorks(version, cluster, `back-${cluster}`);
  });

  /** Agents of `cluster` connected to the proxy (undefined while /metrics cannot be read). */
  const connectedAgents = (cluster: string): Promise<number | undefined> => fx.metric('kube_stream_proxy_tunnel_agents', { cluster }).catch(() => undefined);

  it(`proxy SIGKILLed and restarted on the same ports: both agents reconnect within ${AGENTS_BACK_MS / 1000} s and serve again`, async () => {
    const marks = Object.fromEntries(Object.entries(agents).map(([c, a]) => [c, a.output().length]));
    const { downMs } = await fx.proxy.restart(); // SIGKILL, then the same command on the same two ports
    const listeningAt = performance.now();
    console.log(`proxy down for ${downMs.toFixed(0)} ms (SIGKILL to listening again)`);
    const back = await Promise.all(
      ['one', 'two'].map((c) =>
        waitFor(`agent ${c} connected to the restarted proxy`, async () => ((await connectedAgents(c)) === 1 ? performance.now() : undefined), 20_000, 50),
      ),
    );
    const elapsed = Math.max(...back) - listeningAt;
    console.log(`agents back ${back.map((t) => (t - listeningAt).toFixed(0)).join(' ms, ')} ms after the restarted proxy listened`);
    expect(elapsed).toBeLessThan(AGENTS_BACK_MS);
    // The same agent processes (not restarted) lost their tunnel, backed off and reconnected: one
    // new tunnel each on the new proxy.
    for (const c of ['one', 'two']) {
      expect(agents[c]!.child.exitCode).toBeNull();
      expect(agents[c]!.output().slice(marks[c])).toMatch(/"msg":"reconnecting"/);
      expect(await fx.metric('kube_stream_proxy_tunnel_agent_connections_total', { cluster: c })).toBe(1);
      expect((agents[c]!.output().slice(marks[c]).match(/tunnel established/g) ?? []).length).toBe(1);
    }
    const before = await waysOf(fx);
    for (const { version } of CLIENTS) for (const c of ['one', 'two']) await echoWorks(version, c, `after-restart-${version}-${c}`);
    // 1.33's two execs went their ways through the new process: passed through to one's kubelet, and
    // translated for two — after one WebSocket attempt refused again (the memory of the killed
    // process is gone). Its counters hold those two sessions only.
    const newProcess = { 'proxy/exec/proxied_to_upstream': 1, 'proxy/exec/translated_at_apiserver': 1, 'proxy/translator/200': 1, 'proxy/fallback/websocket->spdy/403': 1 };
    expect(proxyWays(await fx.metrics(), { fallbacks: true })).toEqual(newProcess);
    expect(moved(before, await waysOf(fx))).toEqual(sumWays(websocketWays('modern', 'one', 'exec', 1), websocketWays('old-apiserver', 'two', 'exec', 1)));
  }, 120_000);

  describe.each(CLIENTS)('kubectl $version', ({ version, websocket }) => {
    it.each(['one', 'two'])(`SIGKILLed mid-exec through /clusters/%s: the pod's process is signalled within ${PROCESS_SIGNALLED_MS} ms`, async (cluster) => {
      const marker = `signalled-${version.replace('.', '')}-${cluster}`;
      const markerFile = join(fx.clusters[cluster]!.dataDir, 'default', POD[cluster]!, marker);
      const pod = fx.clusters[cluster]!.pods.get('default', POD[cluster]!)!;
      const before = await waysOf(fx);
      const session = startKubectl(findKubectl(version), ['exec', POD[cluster]!, '--', ...signalRecorder(marker)], { kubeconfig: fx.kubeconfigs[cluster]!, env: {} });
      try {
        await session.waitForOutput(/ready/, 30_000);
        expect(pod.execs.size).toBeGreaterThan(0);
        const activeDuring = await fx.metric('kube_stream_proxy_tunnel_streams_active', { cluster });
        const goneAt = performance.now();
        session.child.kill('SIGKILL');
        const signalledAt = await fileAppears(markerFile);
        const signal = readFileSync(markerFile, 'utf8').trim();
        console.log(`kubectl ${version} via ${cluster}: process got SIG${signal} ${(signalledAt - goneAt).toFixed(0)} ms after kubectl was SIGKILLed`);
        expect(signal).toBe('TERM');
        expect(signalledAt - goneAt).toBeLessThan(PROCESS_SIGNALLED_MS);
        // The exec'd process is gone and the session's tunnel stream closed.
        await expect.poll(() => pod.execs.size, { timeout: 5_000 }).toBe(0);
        await expect.poll(() => fx.metric('kube_stream_proxy_tunnel_streams_active', { cluster }), { timeout: 5_000 }).toBeLessThan(activeDuring);
      } finally {
        await session.stop('SIGKILL', 5_000);
      }
      // The way it went. A translated session is counted when it ends, with the code it ended with
      // (the client gone: 500).
      const way = async (): Promise<Ways> => moved(before, await waysOf(fx));
      if (!websocket) expect(await way()).toEqual({});
      else if (KIND[cluster] === 'modern') expect(await way()).toEqual(websocketWays('modern', cluster, 'exec', 1));
      else await expect.poll(way, { timeout: 5_000 }).toEqual({ 'proxy/exec/translated_at_apiserver': 1, 'proxy/translator/500': 1 });
    });

    // stdin open. How cat ends depends on which the cluster acts on first: the stdin stream's reset
    // (read as EOF, as the kubelet does: cat exits 0) or the connection's end (SIGTERM to the group:
    // 143). Both are seen on both paths (it is a race inside the cluster); either way cat is gone
    // within the bound. The signal itself is proven by the trapping shell above.
    it.each(['one', 'two'])(`SIGKILLed mid \`exec -i … cat\` through /clusters/%s: cat ends within ${PROCESS_SIGNALLED_MS} ms`, async (cluster) => {
      const pod = fx.clusters[cluster]!.pods.get('default', POD[cluster]!)!;
      const stdin = new PassThrough();
      const session = startKubectl(findKubectl(version), ['exec', '-i', POD[cluster]!, '--', 'cat'], { kubeconfig: fx.kubeconfigs[cluster]!, env: {}, stdin });
      try {
        stdin.write('echoed by cat\n');
        await session.waitForOutput(/echoed by cat/, 30_000);
        expect(pod.execs.size).toBe(1);
        const cat = [...pod.execs][0]!.process as ExecProcess['process'] & { exited: Promise<number> };
        const exited = cat.exited.then((code) => ({ code, at: performance.now() }));
        const goneAt = performance.now();
        session.child.kill('SIGKILL');
        const exit = await Promise.race([exited, new Promise<undefined>((r) => setTimeout(r, 5_000, undefined))]);
        expect(exit, 'cat still running 5 s after kubectl was SIGKILLed').toBeDefined();
        console.log(`kubectl ${version} via ${cluster}: cat exited ${exit!.code} ${(exit!.at - goneAt).toFixed(0)} ms after kubectl was SIGKILLed`);
        expect([0, 128 + osConstants.signals.SIGTERM]).toContain(exit!.code);
        expect(exit!.at - goneAt).toBeLessThan(PROCESS_SIGNALLED_MS);
        await expect.poll(() => pod.execs.size, { timeout: 5_000 }).toBe(0);
      } finally {
        stdin.destroy();
        await session.stop('SIGKILL', 5_000);
      }
    });
  });
});

/** The answer to an upgrade request: status, headers and body bytes. */
interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** Send an upgrade request to `base` + `path` and collect a non-101 answer. */
function upgradeRequest(base: string, path: string, method: string, headers: Record<string, string>): Promise<RawAnswer> {
  return new Promise((resolveAnswer, reject) => {
    const req = httpRequest(new URL(path, base), { method, headers: { Connection: 'Upgrade', ...headers } });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      reject(new Error(`unexpected ${res.statusCode} upgrade`));
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolveAnswer({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** How the proxy of the 403 cases speaks to the cluster (`--upstream-streaming`). */
type UpstreamStreamingMode = 'spdy' | 'auto';

describe.each<{ mode: UpstreamStreamingMode }>([{ mode: 'spdy' }, { mode: 'auto' }])('an exec the cluster refuses (403) comes back through the tunnel as the apiserver wrote it (--upstream-streaming $mode)', ({ mode }) => {
  let fx: TunnelFixture;

  beforeAll(async () => {
    fx = await startTunnelFixture(
      { secured: ['gamma'] },
      {
        // "viewer" may read pods, not exec.
        secured: (work) => {
          writeFileSync(join(work, 'users.csv'), 'viewer-token,viewer,u1,""\n');
          writeFileSync(join(work, 'policy.json'), JSON.stringify({ rules: [{ users: ['viewer'], verbs: ['get', 'list', 'watch'], resources: ['pods'] }] }));
          return { tokenAuthFile: join(work, 'users.csv'), authorizationPolicyFile: join(work, 'policy.json') };
        },
      },
      // `spdy`: the proxy's translator is what relays the v5 request's refusal (its purpose here).
      // `auto`: what kubectl gets by default, the answer to the proxy's last attempt.
      { serveFlags: () => ({ upstreamStreaming: mode }) },
    );
    await fx.startAgent('secured').waitForOutput(/tunnel established/, 30_000);
  }, 60_000);

  afterAll(async () => {
    await fx?.close();
  });

  const exec = '/api/v1/namespaces/default/pods/gamma/exec?command=true&stdin=true&stdout=true&stderr=true';
  const spdy = { method: 'POST', headers: { Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'v4.channel.k8s.io' } };
  const websocket = (protocol: string) => ({
    method: 'GET',
    headers: { Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Protocol': protocol },
  });
  type Upgrade = { method: string; headers: Record<string, string> };
  /** One row: the client's request, the request whose direct answer it must get, and what is counted. */
  interface RefusalCase {
    protocol: string;
    request: Upgrade;
    direct: Upgrade;
    verb: string;
    /** The proxy's counters the refusal moves (test/tunnel/stream-ways.ts, fallbacks included). */
    counted: Ways;
  }
  // kubectl's methods: POST for SPDY, GET for WebSocket (so the apiserver's verb is create or get).
  // With `spdy`, v5 is translated at once: the proxy's SPDY request (a POST) is what the apiserver
  // refuses, and its answer is what the WebSocket client gets, in place of a 101; SPDY and v4 pass
  // through. With `auto`, v5 and SPDY are first passed through. The apiserver's refusal is its
  // authorizer's Forbidden Status: a refused v5 (a GET) is asked once more over SPDY (a POST,
  // `create`: no less), translated, and that second answer is relayed; a refused SPDY `create` is never
  // asked again as a WebSocket `get`, so its answer is relayed as it came (docs/translator.md). v4 is a
  // legacy WebSocket: always passed through.
  const CASES: Record<UpstreamStreamingMode, RefusalCase[]> = {
    spdy: [
      { protocol: 'SPDY/3.1 (passthrough)', request: spdy, direct: spdy, verb: 'create', counted: {} },
      { protocol: 'WebSocket v4 (passthrough)', request: websocket('v4.channel.k8s.io'), direct: websocket('v4.channel.k8s.io'), verb: 'get', counted: { 'proxy/exec/proxied_to_upstream': 1 } },
      { protocol: 'WebSocket v5 (translated)', request: websocket('v5.channel.k8s.io'), direct: spdy, verb: 'create', counted: { 'proxy/exec/translated_at_apiserver': 1, 'proxy/translator/403': 1 } },
    ],
    auto: [
      { protocol: 'SPDY/3.1 (refused by the authorizer: relayed, never asked again as a WebSocket)', request: spdy, direct: spdy, verb: 'create', counted: {} },
      { protocol: 'WebSocket v4 (passthrough)', request: websocket('v4.channel.k8s.io'), direct: websocket('v4.channel.k8s.io'), verb: 'get', counted: { 'proxy/exec/proxied_to_upstream': 1 } },
      {
        protocol: 'WebSocket v5 (refused, then translated)',
        request: websocket('v5.channel.k8s.io'),
        direct: spdy,
        verb: 'create',
        counted: { 'proxy/exec/translated_at_apiserver': 1, 'proxy/translator/403': 1, 'proxy/fallback/websocket->spdy/403': 1 },
      },
    ],
  };

  it.each(CASES[mode])('$protocol: status, content type and body bytes equal the direct answer', async ({ request, direct: directRequest, verb, counted }) => {
    const token = { Authorization: 'Bearer viewer-token' };
    const before = await waysOf(fx, { fallbacks: true });
    const direct = await upgradeRequest(fx.clusters.secured!.url, exec, directRequest.method, { ...directRequest.headers, ...token });
    const tunnelled = await upgradeRequest(fx.proxy.url, `/clusters/secured${exec}`, request.method, { ...request.headers, ...token });
    expect(direct.status).toBe(403);
    expect(JSON.parse(direct.body.toString('utf8'))).toMatchObject({ kind: 'Status', code: 403, reason: 'Forbidden' });
    expect((JSON.parse(direct.body.toString('utf8')) as { message: string }).message).toContain(`User "viewer" cannot ${verb} resource "pods/exec"`);
    expect(tunnelled.status).toBe(direct.status);
    expect(tunnelled.headers['content-type']).toBe(direct.headers['content-type']);
    expect(tunnelled.body.equals(direct.body), `direct: ${direct.body.toString()}\ntunnelled: ${tunnelled.body.toString()}`).toBe(true);
    // Refused before any 101, so the cluster counted nothing; the proxy counted the way it took.
    expect(moved(before, await waysOf(fx, { fallbacks: true }))).toEqual(counted);
  });
});
