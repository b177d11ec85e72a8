/**
 * Issue 14, item 8: `kube-stream-proxy demo --clusters 2` as a real process (the built CLI): two dev
 * clusters, an agent each, the proxy with its agent listener on loopback, ONE kubeconfig with the
 * contexts `one` and `two`. kubectl 1.33 execs in each context (WebSocket v5, translated at the
 * proxy: the translator counter rises by exactly the sessions run) and `get pods` shows each
 * cluster's own pods only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLI, startDemo, type DemoProcess } from '../helpers/demo.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { scrapeCounter } from '../helpers/metrics.js';

describe.skipIf(kubectlE2eSkipReason() !== undefined)('kube-stream-proxy demo --clusters 2, kubectl 1.33', () => {
  let work: string;
  let demo: DemoProcess;
  const kubectl = async (context: string, ...args: string[]) => {
    const r = await runKubectl(findKubectl('1.33'), ['--context', context, ...args], { kubeconfig: demo.kubeconfig, timeoutMs: 30_000 });
    return { ...r, out: r.stdout.toString(), summary: summary(r) };
  };
  const translated = (): Promise<number> => scrapeCounter(demo.proxyUrl.origin, 'apiserver_stream_translator_requests_total', { code: '200' });

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
      { name: 'one', cluster: { server: `${demo.proxyUrl.origin}/clusters/one` } },
      { name: 'two', cluster: { server: `${demo.proxyUrl.origin}/clusters/two` } },
    ]);
    expect(config.contexts.map((c) => [c.name, c.context.cluster])).toEqual([
      ['one', 'one'],
      ['two', 'two'],
    ]);
    expect(config['current-context']).toBe('one');
    expect(demo.output()).toContain(`try:\n  KUBECONFIG=${demo.kubeconfig} kubectl --context one exec -it alpha -- sh\n`);
    expect(demo.output()).toMatch(/^dev cluster "two" listening on http:\/\/127\.0\.0\.1:\d+, pods demo and beta, agent connected/m);
  });

  it('exec in each context reaches its own cluster, translated (WebSocket v5 → SPDY over the tunnel)', async () => {
    const before = await translated();
    const one = await kubectl('one', 'exec', 'alpha', '--', 'sh', '-c', 'echo "alpha in $(basename "$PWD")"');
    expect(one.code, one.summary).toBe(0);
    expect(one.out).toBe('alpha in alpha\n');
    const two = await kubectl('two', 'exec', 'beta', '--', 'sh', '-c', 'echo to-stderr >&2; exit 3');
    expect(two.code, two.summary).toBe(3);
    expect(two.stderr).toContain('to-stderr');
    // `demo` exists in both clusters: each context's `demo` is its own cluster's process folder.
    const demos = await Promise.all(['one', 'two'].map((c) => kubectl(c, 'exec', 'demo', '--', 'pwd')));
    for (const d of demos) expect(d.code, d.summary).toBe(0);
    expect(demos[0]!.out).not.toBe(demos[1]!.out);
    expect((await translated()) - before).toBe(4);
    // A pod of the other cluster is not there.
    const wrong = await kubectl('one', 'exec', 'beta', '--', 'true');
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toMatch(/pods "beta" not found/);
  });

  it("get pods in each context lists that cluster's pods only", async () => {
    const names = async (context: string): Promise<string[]> => {
      const r = await kubectl(context, 'get', 'pods', '-o', 'name');
      expect(r.code, r.summary).toBe(0);
      return r.out.trim().split('\n').sort();
    };
    expect(await names('one')).toEqual(['pod/alpha', 'pod/demo']);
    expect(await names('two')).toEqual(['pod/beta', 'pod/demo']);
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
