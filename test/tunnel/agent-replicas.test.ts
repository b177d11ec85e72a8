/**
 * Two proxy replicas (issue 14 item 6), real processes on loopback: proxy A in-process (the
 * fixture's), proxy B a child process of the built CLI; agents for clusters `one` and `two`, each
 * given both proxies (`--proxy-url` twice), hold one tunnel to each. Killing B (SIGKILL) leaves A
 * serving both clusters — kubectl exec and get pods — with the same agent processes; B restarted
 * on its port gets its tunnels back on their own. Needs `npx tsc -p tsconfig.json` (dist/) first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { freePort } from '../../bench/nginx.js';
import { counterValue } from '../helpers/metrics.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { get, spawnCli, startTunnelFixture, type AgentProcess, type TunnelFixture } from './tunnel-fixture.js';

const skipReason = kubectlE2eSkipReason();

/** The n-th (1-based) "tunnel established" line for `proxy` in an agent's log. */
function established(proxy: string, n: number): RegExp {
  const one = `"msg":"tunnel established"[^\\n]*"proxy":"${proxy.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}"|"proxy":"${proxy.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}"[^\\n]*"msg":"tunnel established"`;
  return new RegExp(Array.from({ length: n }, () => `(?:${one})`).join('[\\s\\S]*'));
}

describe.skipIf(skipReason !== undefined)('two proxy replicas, agents holding a tunnel to each', () => {
  let fx: TunnelFixture;
  let portB: number;
  let proxyB: AgentProcess | undefined;
  let urlB: string;
  const agents: Record<string, AgentProcess> = {};
  const kubeconfigsB: Record<string, string> = {};

  const startProxyB = async (): Promise<void> => {
    proxyB = spawnCli(['serve', '--listen', '127.0.0.1:0', '--agent-listen', `127.0.0.1:${portB}`, '--agent-token-file', fx.agentTokenFile]);
    const m = await proxyB.waitForOutput(/listening on (http:\/\/127\.0\.0\.1:\d+).*agents on http:\/\/127\.0\.0\.1:(\d+)/, 20_000);
    urlB = m[1]!;
    expect(Number(m[2])).toBe(portB);
    for (const c of ['one', 'two']) writeKubeconfig(kubeconfigsB[c]!, { server: `${urlB}/clusters/${c}`, name: c });
  };
  const metricB = async (name: string, labels: Record<string, string>): Promise<number> => counterValue((await get(urlB, '/metrics')).body, name, labels);

  beforeAll(async () => {
    fx = await startTunnelFixture({ one: ['alpha'], two: ['beta'] });
    portB = await freePort();
    for (const c of ['one', 'two']) kubeconfigsB[c] = join(fx.work, `kubeconfig-b-${c}`);
    await startProxyB();
    for (const c of ['one', 'two']) agents[c] = fx.startAgent(c, { proxyUrls: [fx.proxy.agentUrl!, `http://127.0.0.1:${portB}`] });
    await Promise.all(
      Object.values(agents).flatMap((a) => [a.waitForOutput(established(fx.proxy.agentUrl!, 1), 20_000), a.waitForOutput(established(`http://127.0.0.1:${portB}`, 1), 20_000)]),
    );
  }, 60_000);

  afterAll(async () => {
    await proxyB?.kill();
    await fx?.close();
  });

  const kubectl = (kubeconfig: string, args: string[]) => runKubectl(findKubectl('1.33'), args, { kubeconfig, timeoutMs: 30_000 });
  const servesBoth = async (kubeconfigs: Record<string, string>): Promise<void> => {
    const one = await kubectl(kubeconfigs.one!, ['exec', 'alpha', '--', 'echo', 'hello from one']);
    expect(one.code, summary(one)).toBe(0);
    expect(one.stdout.toString()).toBe('hello from one\n');
    const two = await kubectl(kubeconfigs.two!, ['exec', 'beta', '--', 'sh', '-c', 'echo hello from two; exit 3']);
    expect(two.code, summary(two)).toBe(3);
    expect(two.stdout.toString()).toBe('hello from two\n');
    const pods = await kubectl(kubeconfigs.two!, ['get', 'pods', '-o', 'name']);
    expect(pods.code, summary(pods)).toBe(0);
    expect(pods.stdout.toString().split('\n').filter((n) => n !== '').sort()).toEqual(['pod/beta', 'pod/demo']);
  };

  it('each replica has a tunnel of each cluster and serves both', async () => {
    for (const c of ['one', 'two']) {
      expect(await fx.metric('kube_stream_proxy_tunnel_agents', { cluster: c })).toBe(1);
      expect(await metricB('kube_stream_proxy_tunnel_agents', { cluster: c })).toBe(1);
    }
    await servesBoth(fx.kubeconfigs);
    await servesBoth(kubeconfigsB);
  });

  it('replica B killed: A serves both clusters with the same agents; B restarted gets its tunnels back', async () => {
    const pids = Object.fromEntries(Object.entries(agents).map(([c, a]) => [c, a.child.pid]));
    await proxyB!.kill('SIGKILL');
    await servesBoth(fx.kubeconfigs);
    for (const [c, a] of Object.entries(agents)) {
      expect(a.child.exitCode, a.output()).toBeNull();
      expect(a.child.pid).toBe(pids[c]);
      expect(await fx.metric('kube_stream_proxy_tunnel_agents', { cluster: c })).toBe(1);
      // One tunnel to A the whole time: A never saw a reconnect.
      expect(await fx.metric('kube_stream_proxy_tunnel_agent_connections_total', { cluster: c })).toBe(1);
    }
    // Back on its port: each agent's tunnel to B returns after its backoff (at most the 30 s cap).
    await startProxyB();
    await Promise.all(Object.values(agents).map((a) => a.waitForOutput(established(`http://127.0.0.1:${portB}`, 2), 60_000)));
    await servesBoth(kubeconfigsB);
  }, 150_000);
});
