/**
 * `kube-stream-proxy demo` (what `npm start` runs): dev clusters and the proxy on loopback, and a
 * kubeconfig pointing kubectl at the proxy.
 *
 * - Default: one dev cluster as the proxy's `--upstream` (a modern one: kube-apiserver and kubelet
 *   1.36, the kubelet serving WebSockets itself), the aggregated dev-metrics (`demo-metrics.ts`), one
 *   context.
 * - `clusters: N`: N dev clusters behind agents (docs/agent.md), modern and older in turn so both ways
 *   of WebSocket streaming are one command away — `one-modern` (kubelet 1.36, declares
 *   `ExtendWebSocketsToKubelet`: its apiserver passes WebSockets to it) with pods `demo` and `alpha`,
 *   `two-older` (kubelet 1.35: its apiserver translates them) with `demo` and `beta`, … — one
 *   in-process {@link TunnelAgent} each, dialing the proxy's `--agent-listen` (loopback) with its token
 *   from the proxy's `--agent-token-file`, and one context per cluster (`server:
 *   <proxy>/clusters/NAME`). No direct upstream, no dev-metrics.
 *
 * - `oidc`: either of those with single sign-on (`demo-oidc.ts`): a real OpenID Provider, the proxy
 *   in `--authn impersonate` over HTTPS with an AuthenticationConfiguration for it, the dev clusters
 *   with token authentication, agents `--access-as impersonate`, and a kubeconfig user that runs
 *   `kube-stream-proxy login` (one login for every context).
 *
 * The CLI (`cli.ts`) parses the flags; this module starts, reports and stops the topology.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { resolveConfig } from '../src/config.js';
import { METRICS_SERVICE, startDemoMetrics } from './demo-metrics.js';
import { gitVersion, kubeletServesWebSockets } from './cluster/cluster-versions.js';
import { startDevCluster, type DevCluster } from './cluster/dev-cluster.js';
import { ConfigError } from '../src/errors.js';
import { writeKubeconfig } from './kubeconfig.js';
import type { DemoOidc } from './demo-oidc.js';
import { parseHostPort } from '../src/listen-address.js';
import { upstreamFromFiles } from '../src/routing/upstream.js';
import { startServer, type RunningServer, type ServerOptions } from '../src/server.js';
import { TunnelAgent } from '../src/tunnel/agent.js';
import { demoRecordingFlags } from './demo-recording.js';

/** How long the demo's shutdown waits for its agents once the proxy has closed their tunnels. */
export const DEMO_AGENT_STOP_WAIT_MS = 2_000;

/** Most clusters `demo --clusters` starts (each is a dev cluster and an agent in this process). */
export const DEMO_MAX_CLUSTERS = 16;

/** How long the demo waits for each agent's tunnel at start-up before it gives up. */
export const DEMO_AGENT_CONNECT_TIMEOUT_MS = 20_000;

const CLUSTER_NAMES = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];

/** The kubelet version of a multi-cluster demo's older clusters (the even-numbered ones). */
export const DEMO_OLDER_KUBELET_VERSION = '1.35';
const POD_NAMES = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa'];

/** What `demo` is asked for (flags already parsed; files and ports not yet touched). */
export interface DemoOptions {
  /** Proxy address, `HOST:PORT`. */
  listen: string;
  /** Dev cluster address `HOST:PORT`; with several clusters, port P gives P, P+1, … (0: free ports). */
  devClusterListen: string;
  /** The kubeconfig to write (absolute); the demo's other files go next to it. */
  kubeconfig: string;
  featureGates?: string;
  shutdownGracePeriod?: string;
  /** Clusters behind agents (1…{@link DEMO_MAX_CLUSTERS}); undefined: the single direct cluster. */
  clusters?: number;
  /** The proxy's agent listener with `clusters` (default 127.0.0.1:0). */
  agentListen?: string;
  /** Single sign-on: an OpenID Provider, the proxy in impersonate mode, a `kube-stream-proxy login` kubeconfig. */
  oidc?: boolean;
  /** The proxy's logger (Fastify's `logger` option); JSON lines at info on stdout by default. */
  logger?: ServerOptions['logger'];
}

/** One cluster of a multi-cluster demo. */
export interface DemoCluster {
  /** Cluster name = kubeconfig context name = `/clusters/NAME`. */
  name: string;
  /** The pod only this cluster has (besides `demo`, which every dev cluster has). */
  pod: string;
  /** `modern`: kubelet 1.36, WebSockets passed to it; `older`: kubelet 1.35, WebSockets translated by its apiserver. */
  kubelet: DemoKubelet;
  devCluster: DevCluster;
  agent: TunnelAgent;
}

/** A running demo. */
export interface RunningDemo {
  proxy: RunningServer;
  kubeconfig: string;
  /** The clusters behind agents (empty for the single direct cluster). */
  clusters: DemoCluster[];
  /** With `oidc`: the OpenID Provider and the files around it. */
  oidc?: DemoOidc;
  /** What the CLI prints once everything is up (ends with the lines to try). */
  banner: string;
  /** Graceful stop: the proxy's drain (the shutdown grace period) and the agents', then the clusters. */
  shutdown(): Promise<void>;
}

/** The two kinds of dev cluster a multi-cluster demo alternates. */
export type DemoKubelet = 'modern' | 'older';

/**
 * Cluster `i` (0-based) of a multi-cluster demo: its name (which says its kubelet: `one-modern`,
 * `two-older`, `three-modern`, …), its own pod and its kubelet.
 */
export function demoClusterName(i: number): { name: string; pod: string; kubelet: DemoKubelet } {
  const kubelet: DemoKubelet = i % 2 === 0 ? 'modern' : 'older';
  return { name: `${CLUSTER_NAMES[i] ?? `cluster-${i + 1}`}-${kubelet}`, pod: POD_NAMES[i] ?? `pod-${i + 1}`, kubelet };
}

/** What a dev cluster's line in the banner says about its kubelet and the way WebSockets go. */
function kubeletNote(cluster: DevCluster): string {
  return kubeletServesWebSockets(cluster.versions.kubelet)
    ? `kubelet ${gitVersion(cluster.versions.kubelet)} declares ExtendWebSocketsToKubelet: its apiserver passes WebSockets to it`
    : `kubelet ${gitVersion(cluster.versions.kubelet)} declares nothing: its apiserver translates WebSockets to SPDY`;
}

/** Start the demo. Throws ConfigError for bad flags (nothing is left running then). */
export async function runDemo(o: DemoOptions): Promise<RunningDemo> {
  if (o.clusters === undefined) {
    if (o.agentListen !== undefined) throw new ConfigError('--agent-listen needs --clusters');
  } else if (!Number.isInteger(o.clusters) || o.clusters < 1 || o.clusters > DEMO_MAX_CLUSTERS) {
    throw new ConfigError(`--clusters: want a whole number from 1 to ${DEMO_MAX_CLUSTERS}, got ${o.clusters}`);
  }
  // Loaded only for --oidc: it imports oidc-provider (an optionalDependency).
  const oidc = o.oidc ? await (await import('./demo-oidc.js')).startDemoOidc(join(dirname(o.kubeconfig), 'oidc')) : undefined;
  try {
    const demo = o.clusters === undefined ? await runSingleClusterDemo(o, oidc) : await runMultiClusterDemo(o, o.clusters, oidc);
    if (!oidc) return demo;
    const hint = `  KUBECONFIG=${o.kubeconfig} kubectl${o.clusters === undefined ? '' : ` --context ${demoClusterName(0).name}`} auth whoami   # signs in first: open the URL it prints\n`;
    return {
      ...demo,
      oidc,
      banner: demo.banner.replace('try:\n', `${oidc.banner}try:\n${hint}`),
      shutdown: async () => {
        await demo.shutdown();
        await oidc.close();
      },
    };
  } catch (e) {
    await oidc?.close();
    throw e;
  }
}

/** Parse `--clusters` text: a whole number from 1 to {@link DEMO_MAX_CLUSTERS}. Throws ConfigError. */
export function parseDemoClusters(text: string): number {
  if (!/^\d{1,3}$/.test(text) || Number(text) < 1 || Number(text) > DEMO_MAX_CLUSTERS) {
    throw new ConfigError(`--clusters: want a whole number from 1 to ${DEMO_MAX_CLUSTERS}, got ${JSON.stringify(text)}`);
  }
  return Number(text);
}

/** Today's demo: one dev cluster as `--upstream`, dev-metrics aggregated, one context. */
async function runSingleClusterDemo(o: DemoOptions, oidc?: DemoOidc): Promise<RunningDemo> {
  const { host, port } = parseHostPort(o.devClusterListen);
  const cluster = await startDevCluster({ host, port, services: [METRICS_SERVICE], ...oidc?.clusterSecurity() });
  // The aggregated metrics.k8s.io backend, so `kubectl top` works (docs/aggregation.md).
  let metrics;
  try {
    metrics = await startDemoMetrics(dirname(o.kubeconfig), cluster.url, oidc ? { clusterTokenFile: oidc.metricsTokenFile } : {});
  } catch (e) {
    await cluster.close();
    throw e;
  }
  let server: RunningServer;
  let graceMs: number;
  // Pod demo's sessions are recorded (dev/demo-recording.ts).
  const recording = demoRecordingFlags(dirname(o.kubeconfig));
  try {
    const config = await resolveConfig({
      listen: o.listen,
      upstream: cluster.url,
      featureGates: o.featureGates,
      shutdownGracePeriod: o.shutdownGracePeriod,
      apiserviceConfig: metrics.apiserviceConfigFile,
      proxyClientCertFile: metrics.proxyClientCertFile,
      proxyClientKeyFile: metrics.proxyClientKeyFile,
      ...oidc?.serveFlags,
      ...recording,
    });
    graceMs = config.shutdownGracePeriodMs;
    server = await startServer(config, { logger: o.logger ?? { level: 'info' } });
  } catch (e) {
    await metrics.metrics.close();
    await cluster.close();
    throw e;
  }
  writeKubeconfig(o.kubeconfig, { server: server.url, name: 'kube-stream-proxy-demo', ...(oidc ? { caPem: oidc.pki.ca.cert.toString(), exec: oidc.user.exec } : {}) });
  const proxy = server;
  const dm = metrics.metrics;
  return {
    proxy,
    kubeconfig: o.kubeconfig,
    clusters: [],
    banner:
      `dev cluster listening on ${cluster.url}; ${kubeletNote(cluster)} (it runs local commands; loopback only)\n` +
      `dev-metrics (metrics.k8s.io, aggregated) listening on ${dm.url}\n` +
      `kube-stream-proxy listening on ${proxy.url}, upstream ${cluster.url}\n` +
      `kubeconfig written to ${o.kubeconfig}\n` +
      `session recordings of pod demo in ${recording.sessionRecordingDir}\n` +
      `try:\n  KUBECONFIG=${o.kubeconfig} kubectl exec -it demo -- sh\n` +
      `  node bin/kube-stream-proxy.js sessions list --dir ${recording.sessionRecordingDir}\n` +
      `  KUBECONFIG=${o.kubeconfig} kubectl get --raw /metrics | grep websocket_streaming   # which way the proxy sent each WebSocket session\n` +
      `  KUBECONFIG=${o.kubeconfig} kubectl get --raw /api/v1/nodes/dev-node/proxy/metrics | grep websocket_streaming   # the sessions the dev kubelet served over WebSockets itself\n`,
    shutdown: async () => {
      await proxy.shutdown(graceMs);
      await dm.close();
      await cluster.close();
    },
  };
}

/** N dev clusters, an agent each, the proxy with `--agent-listen` and no upstream, N contexts. */
async function runMultiClusterDemo(o: DemoOptions, n: number, oidc?: DemoOidc): Promise<RunningDemo> {
  const { host, port } = parseHostPort(o.devClusterListen);
  if (port !== 0 && port + n - 1 > 65535) throw new ConfigError(`--dev-cluster-listen: ports ${port}…${port + n - 1} do not all exist`);
  const dir = join(dirname(o.kubeconfig), 'agents');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const names = Array.from({ length: n }, (_, i) => demoClusterName(i));
  const tokens = names.map(() => randomBytes(24).toString('base64url'));
  const tokenFile = join(dir, 'agent-tokens.csv');
  writeFileSync(tokenFile, names.map((c, i) => `${tokens[i]},${c.name}\n`).join(''), { mode: 0o600 });

  const devClusters: DevCluster[] = [];
  const agents: TunnelAgent[] = [];
  let proxy: RunningServer | undefined;
  const closeAll = async (graceMs: number): Promise<void> => {
    // Agents stop reconnecting first (their GOAWAY lets streams in flight finish) while the proxy
    // drains and then closes every tunnel; the clusters go last, with whatever still runs in them.
    const stopped = new Set<string>();
    const agentsStopped = Promise.all(agents.map((a, i) => a.stop().then(() => stopped.add(names[i]!.name))));
    await proxy?.shutdown(graceMs);
    // Bounded all the same: an agent's graceful close waits for its streams (it once waited forever
    // for streams whose apiserver socket had closed, fixed in src/tunnel/pipe.ts; the demo test
    // asserts this warning is not printed).
    await withTimeout(agentsStopped, DEMO_AGENT_STOP_WAIT_MS, 'agents still closing').catch(() => {
      const left = names.slice(0, agents.length).filter((c) => !stopped.has(c.name));
      proxy?.app.log.warn({ clusters: left.map((c) => c.name), waitedMs: DEMO_AGENT_STOP_WAIT_MS }, 'agents did not finish closing after the proxy closed their tunnels; leaving them');
    });
    for (const c of devClusters) await c.close();
  };
  let graceMs = 0;
  try {
    for (const [i, c] of names.entries()) {
      const kubelet = c.kubelet === 'older' ? { kubeletVersion: DEMO_OLDER_KUBELET_VERSION } : {};
      devClusters.push(await startDevCluster({ host, port: port === 0 ? 0 : port + i, pods: [c.pod], ...kubelet, ...oidc?.clusterSecurity() }));
    }
    const config = await resolveConfig({
      listen: o.listen,
      agentListen: o.agentListen ?? '127.0.0.1:0',
      agentTokenFile: tokenFile,
      featureGates: o.featureGates,
      shutdownGracePeriod: o.shutdownGracePeriod,
      // No upstream of its own: the agents call their clusters with their own tokens.
      ...(oidc ? { ...oidc.serveFlags, upstreamTokenFile: undefined } : {}),
    });
    graceMs = config.shutdownGracePeriodMs;
    proxy = await startServer(config, { logger: o.logger ?? { level: 'info' } });
    const registry = proxy.agents!;
    const log = proxy.app.log;
    for (const [i, c] of names.entries()) {
      const agentTokenFile = join(dir, `${c.name}.token`);
      writeFileSync(agentTokenFile, `${tokens[i]}\n`, { mode: 0o600 });
      // Registered before the agent can connect: the registry answers at once when it is there.
      const connected: Promise<unknown> = registry.pick(c.name) ? Promise.resolve() : registry.nextTunnel(c.name);
      agents.push(
        new TunnelAgent({
          proxyUrl: new URL(proxy.agentUrl!),
          clusterName: c.name,
          tokenFile: agentTokenFile,
          upstream: oidc ? upstreamFromFiles({ url: devClusters[i]!.url, tokenFile: oidc.agentTokenFile, presentProxyIdentity: true }) : upstreamFromFiles({ url: devClusters[i]!.url }),
          ...(oidc ? { accessAs: 'impersonate' as const, proxyCa: oidc.pki.ca.cert } : {}),
          log: log.child({ agent: c.name }),
        }),
      );
      await withTimeout(connected, DEMO_AGENT_CONNECT_TIMEOUT_MS, `the agent of cluster "${c.name}" did not connect to ${proxy.agentUrl} within ${DEMO_AGENT_CONNECT_TIMEOUT_MS} ms`);
    }
  } catch (e) {
    await closeAll(0);
    throw e;
  }
  const server = proxy;
  writeKubeconfig(
    o.kubeconfig,
    names.map((c) => ({ server: `${server.url}/clusters/${c.name}`, name: c.name, ...(oidc ? { caPem: oidc.pki.ca.cert.toString(), exec: oidc.user.exec } : {}) })),
  );
  const clusters = names.map((c, i) => ({ ...c, devCluster: devClusters[i]!, agent: agents[i]! }));
  const first = clusters[0]!;
  const last = clusters[clusters.length - 1]!;
  return {
    proxy: server,
    kubeconfig: o.kubeconfig,
    clusters,
    banner:
      clusters
        .map((c) => `dev cluster "${c.name}" listening on ${c.devCluster.url}, pods demo and ${c.pod}, agent connected; ${kubeletNote(c.devCluster)} (it runs local commands; loopback only)\n`)
        .join('') +
      `kube-stream-proxy listening on ${server.url}, agents on ${server.agentUrl}, clusters ${names.map((c) => c.name).join(', ')}\n` +
      `kubeconfig written to ${o.kubeconfig}\n` +
      `contexts: ${names.map((c) => `${c.name} (server ${server.url}/clusters/${c.name})`).join(', ')}; current: ${first.name}\n` +
      `try:\n` +
      `  KUBECONFIG=${o.kubeconfig} kubectl --context ${first.name} exec -it ${first.pod} -- sh\n` +
      `  KUBECONFIG=${o.kubeconfig} kubectl --context ${last.name} get pods\n` +
      `  KUBECONFIG=${o.kubeconfig} kubectl get --raw /metrics | grep websocket_streaming   # which way the proxy sent each WebSocket session\n` +
      // `get --raw` ignores the server's path, so the cluster's prefix is written out.
      clusters
        .slice(0, 2)
        .map((c) => `  KUBECONFIG=${o.kubeconfig} kubectl get --raw /clusters/${c.name}/api/v1/nodes/dev-node/proxy/metrics | grep websocket_streaming   # the sessions ${c.name}'s kubelet served over WebSockets itself\n`)
        .join(''),
    shutdown: () => closeAll(graceMs),
  };
}

/** `p`, or a rejection with `message` once `ms` have passed. */
async function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
