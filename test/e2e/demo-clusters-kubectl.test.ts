/**
 * Issue 14, item 8: `kube-stream-proxy demo --clusters 2` as a real process (the built CLI): two dev
 * clusters, an agent each, the proxy with its agent listener on loopback, ONE kubeconfig with the
 * contexts `one-modern` and `two-older` (issue 32, item 5: a 1.36 kubelet that declares
 * `ExtendWebSocketsToKubelet`, and a 1.35 one). kubectl 1.33 execs in each context (WebSocket v5,
 * passed through by the proxy to each cluster's 1.36 apiserver, which hands it to one-modern's kubelet
 * and translates it itself for two-older: the counters of the proxy and of each cluster move by
 * exactly the sessions run, the proxy's translator by none) and `get pods` shows each cluster's own
 * pods only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLI, startDemo, type DemoProcess } from '../helpers/demo.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { fetchClusterWays, moved, proxyWays, sumWays, websocketWays, type Ways } from '../tunnel/stream-ways.js';

describe.skipIf(kubectlE2eSkipReason() !== undefined)('kube-stream-proxy demo --clusters 2, kubectl 1.33', () => {
  let work: string;
  let demo: DemoProcess;
  const kubectl = async (context: string, ...args: string[]) => {
    const r = await runKubectl(findKubectl('1.33'), ['--context', context, ...args], { kubeconfig: demo.kubeconfig, timeoutMs: 30_000 });
    return { ...r, out: r.stdout.toString(), summary: summary(r) };
  };
  /** A dev cluster's URL, from its line in the demo's banner. */
  const clusterUrl = (name: string): string => {
    const url = new RegExp(`^dev cluster "${name}" listening on (http://\\S+?),`, 'm').exec(demo.output())?.[1];
    if (!url) throw new Error(`no banner line for cluster ${name}:\n${demo.output()}`);
    return url;
  };
  /** The proxy's WebSocket counters and both clusters' (test/tunnel/stream-ways.ts; fallbacks included). */
  const ways = async (): Promise<Ways> => {
    const res = await fetch(new URL('/metrics', demo.proxyUrl));
    expect(res.status).toBe(200);
    return { ...proxyWays(await res.text(), { fallbacks: true }), ...(await fetchClusterWays('one-modern', clusterUrl('one-modern'))), ...(await fetchClusterWays('two-older', clusterUrl('two-older'))) };
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-demo-clusters-'));
    demo = await startDemo(work, ['--clusters', '2', '--listen', '127.0.0.1:0']);
  }, 60_000);

  afterAll(async () => {
    await demo?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('writes one kubeconfig with a context per cluster (server <proxy>/clusters/NAME) and prints the line to try', () => {
    expect(demo.kubeconfig).toBe(join(work, '.kube-stream-proxy', 'kubeconfig'));
    const config = JSON.parse(readFileSync(demo.kubeconfig, 'utf8')) as {
      clusters: { name: string; cluster: { server: string } }[];
      contexts: { name: string; context: { cluster: string } }[];
      'current-context': string;
    };
    expect(config.clusters).toEqual([
      { name: 'one-modern', cluster: { server: `${demo.proxyUrl.origin}/clusters/one-modern` } },
      { name: 'two-older', cluster: { server: `${demo.proxyUrl.origin}/clusters/two-older` } },
    ]);
    expect(config.contexts.map((c) => [c.name, c.context.cluster])).toEqual([
      ['one-modern', 'one-modern'],
      ['two-older', 'two-older'],
    ]);
    expect(config['current-context']).toBe('one-modern');
    expect(demo.output()).toContain(`try:\n  KUBECONFIG=${demo.kubeconfig} kubectl --context one-modern exec -it alpha -- sh\n`);
    expect(demo.output()).toMatch(/^dev cluster "one-modern" listening on http:\/\/127\.0\.0\.1:\d+, pods demo and alpha, agent connected; kubelet v1\.36\.0 declares ExtendWebSocketsToKubelet: its apiserver passes WebSockets to it /m);
    expect(demo.output()).toMatch(/^dev cluster "two-older" listening on http:\/\/127\.0\.0\.1:\d+, pods demo and beta, agent connected; kubelet v1\.35\.0 declares nothing: its apiserver translates WebSockets to SPDY /m);
    expect(demo.output()).toContain(`  KUBECONFIG=${demo.kubeconfig} kubectl get --raw /clusters/two-older/api/v1/nodes/dev-node/proxy/metrics | grep websocket_streaming`);
  });

  it("exec in each context reaches its own cluster, passed through (WebSocket v5 over the tunnel) to each cluster's way", async () => {
    const before = await ways();
    const one = await kubectl('one-modern', 'exec', 'alpha', '--', 'sh', '-c', 'echo "alpha in $(basename "$PWD")"');
    expect(one.code, one.summary).toBe(0);
    expect(one.out).toBe('alpha in alpha\n');
    const two = await kubectl('two-older', 'exec', 'beta', '--', 'sh', '-c', 'echo to-stderr >&2; exit 3');
    expect(two.code, two.summary).toBe(3);
    expect(two.stderr).toContain('to-stderr');
    // `demo` exists in both clusters: each context's `demo` is its own cluster's process folder.
    const demos = await Promise.all(['one-modern', 'two-older'].map((c) => kubectl(c, 'exec', 'demo', '--', 'pwd')));
    for (const d of demos) expect(d.code, d.summary).toBe(0);
    expect(demos[0]!.out).not.toBe(demos[1]!.out);
    // Two sessions per context, every one passed through by the proxy (its translator counted none, no
    // fallback): one-modern's apiserver handed both to its 1.36 kubelet, which served them over
    // WebSockets itself; two-older's translated both to SPDY for its 1.35 kubelet.
    await expect
      .poll(async () => moved(before, await ways()), { timeout: 5_000 })
      .toEqual(sumWays(websocketWays('modern', 'one-modern', 'exec', 2), websocketWays('older-kubelet', 'two-older', 'exec', 2)));
    // A pod of the other cluster is not there.
    const wrong = await kubectl('one-modern', 'exec', 'beta', '--', 'true');
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toMatch(/pods "beta" not found/);
  });

  it("get pods in each context lists that cluster's pods only", async () => {
    const names = async (context: string): Promise<string[]> => {
      const r = await kubectl(context, 'get', 'pods', '-o', 'name');
      expect(r.code, r.summary).toBe(0);
      return r.out.trim().split('\n').sort();
    };
    expect(await names('one-modern')).toEqual(['pod/alpha', 'pod/demo']);
    expect(await names('two-older')).toEqual(['pod/beta', 'pod/demo']);
  });

  it("each context's node says its kind; its kubelet's WebSocket counter is one `get --raw` away (the cluster prefix written out)", async () => {
    const features = async (context: string): Promise<string> => {
      const r = await kubectl(context, 'get', 'node', 'dev-node', '-o', 'jsonpath={.status.declaredFeatures}|{.status.nodeInfo.kubeletVersion}');
      expect(r.code, r.summary).toBe(0);
      return r.out;
    };
    expect(await features('one-modern')).toBe('["ExtendWebSocketsToKubelet"]|v1.36.0');
    expect(await features('two-older')).toBe('|v1.35.0');
    for (const context of ['one-modern', 'two-older']) {
      const r = await kubectl(context, 'get', '--raw', `/clusters/${context}/api/v1/nodes/dev-node/proxy/metrics`);
      expect(r.code, r.summary).toBe(0);
      expect(r.out).toMatch(/^# TYPE kubelet_websocket_streaming_requests_total counter$/m);
    }
  });

  it('SIGTERM stops the demo (agents, proxy, clusters) with exit code 0', async () => {
    await demo.stop();
    expect(await demo.exit, demo.output()).toBe(0);
    expect(demo.output()).not.toContain('agents did not finish closing');
  });
});

describe('kube-stream-proxy demo flags for clusters behind agents', () => {
  it.each([
    [['--clusters', '0'], /^kube-stream-proxy demo: --clusters: want a whole number from 1 to 16, got "0"\n/],
    [['--clusters', 'two'], /^kube-stream-proxy demo: --clusters: want a whole number from 1 to 16, got "two"\n/],
    [['--clusters', '17'], /^kube-stream-proxy demo: --clusters: want a whole number from 1 to 16, got "17"\n/],
    [['--agent-listen', '127.0.0.1:0'], /^kube-stream-proxy demo: --agent-listen needs --clusters\n/],
  ])('demo %j exits 2 with the reason, starting nothing', (args, message) => {
    const work = mkdtempSync(join(tmpdir(), 'ksp-demo-flags-'));
    try {
      const r = spawnSync(process.execPath, [CLI, 'demo', '--listen', '127.0.0.1:0', ...args], { cwd: work, encoding: 'utf8', timeout: 30_000 });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe('');
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('demo --help documents --clusters and --agent-listen', () => {
    const r = spawnSync(process.execPath, [CLI, 'demo', '--help'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^ {2}--clusters N {20}N clusters \(1-16\) behind agents, one kubeconfig context each\.$/m);
    expect(r.stdout).toMatch(/^ {2}--agent-listen HOST:PORT {8}The proxy's agent listener with --clusters/m);
  });
});
