/**
 * Clusters behind agents on loopback: dev clusters, the proxy in-process with `--agent-listen` and
 * no `--upstream`, and agents as real child processes of the built CLI (`bin/kube-stream-proxy.js
 * agent`), so a test can kill one. Needs `npx tsc -p tsconfig.json` (dist/) first.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { resolveConfig } from '../../src/config.js';
import { startDevCluster, type DevCluster, type DevClusterOptions } from '../../src/devcluster/dev-cluster.js';
import { writeKubeconfig } from '../../src/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { createCa, createServerCert, type CertAndKey } from '../helpers/certs.js';
import { counterValue } from '../helpers/metrics.js';

/** GET `path` from `base` (http or https with `ca`); status and body text. */
export function get(base: string, path: string, ca?: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolveGet, reject) => {
    const url = new URL(path, base);
    const req = (url.protocol === 'https:' ? httpsGet : httpGet)(url, ca ? { ca } : {}, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolveGet({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
}

/** The built CLI. */
export const BIN = resolve(import.meta.dirname, '../../bin/kube-stream-proxy.js');

/** One agent child process. */
export interface AgentProcess {
  child: ChildProcess;
  /** Everything it printed (stdout + stderr). */
  output(): string;
  /** Resolve with the first match of `re` in its output; reject when it exits first or on timeout. */
  waitForOutput(re: RegExp, timeoutMs: number): Promise<RegExpExecArray>;
  exit: Promise<number | null>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Run the built CLI (`bin/kube-stream-proxy.js ARGS`) as a child process whose output is kept
 * (stdout + stderr) and can be waited on.
 */
export function spawnCli(args: string[]): AgentProcess {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (c: Buffer): void => {
    out += c.toString('utf8');
    listeners.forEach((l) => l());
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  const agent: AgentProcess = {
    child,
    output: () => out,
    exit,
    waitForOutput: (re, timeoutMs) =>
      new Promise<RegExpExecArray>((resolveMatch, reject) => {
        const timer = setTimeout(() => done(new Error(`${args[0]} output did not match ${re} within ${timeoutMs} ms:\n${out}`)), timeoutMs);
        const check = (): void => {
          const m = re.exec(out);
          if (m) done(undefined, m);
        };
        function done(err?: Error, m?: RegExpExecArray): void {
          clearTimeout(timer);
          listeners.delete(check);
          if (err) reject(err);
          else resolveMatch(m!);
        }
        listeners.add(check);
        void exit.then((code) => done(new Error(`${args[0]} exited (${code}) before matching ${re}:\n${out}`)));
        check();
      }),
    kill: async (signal = 'SIGKILL') => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        await exit;
      }
    },
  };
  return agent;
}

/** The running topology. */
export interface TunnelFixture {
  work: string;
  proxy: RunningServer;
  clusters: Record<string, DevCluster>;
  /** Agent token per cluster name (as written to the proxy's token file). */
  tokens: Record<string, string>;
  /** kubeconfig per cluster name: `server: <proxy>/clusters/NAME`. */
  kubeconfigs: Record<string, string>;
  /** The CA of the proxy's serving certificate (TLS fixtures). */
  ca?: Buffer;
  /** The proxy's /metrics text. */
  metrics(): Promise<string>;
  /** A metric's value (sum over matching samples). */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  /** The proxy's `--agent-token-file` (token,cluster lines). */
  agentTokenFile: string;
  /**
   * Start an agent for `cluster` with `token` (default: the right one), dialing `proxyUrls`
   * (default: the fixture's proxy), with extra `args`; resolves once it is spawned.
   */
  startAgent(cluster: string, o?: { token?: string; upstream?: string; proxyUrls?: string[]; args?: string[] }): AgentProcess;
  close(): Promise<void>;
}

/**
 * Start dev clusters `{ name: pods }` (with extra dev-cluster options per name, given the work
 * folder), the proxy, and write the token file and kubeconfigs.
 */
export async function startTunnelFixture(
  clusterPods: Record<string, string[]>,
  clusterOptions: Record<string, (work: string) => Partial<DevClusterOptions>> = {},
  o: { tls?: boolean } = {},
): Promise<TunnelFixture> {
  const work = mkdtempSync(join(tmpdir(), 'ksp-tunnel-'));
  // With TLS, the proxy's listener and its agent listener share one serving certificate; kubectl
  // only sends credentials over TLS (clientcmd drops them for an http server).
  let ca: CertAndKey | undefined;
  let serving: CertAndKey | undefined;
  if (o.tls) {
    ca = await createCa(work);
    serving = await createServerCert(work, ca);
  }
  const clusters: Record<string, DevCluster> = {};
  const tokens: Record<string, string> = {};
  for (const [name, pods] of Object.entries(clusterPods)) {
    clusters[name] = await startDevCluster({ pods, dataDir: join(work, `pods-${name}`), ...clusterOptions[name]?.(work) });
    tokens[name] = `agent-token-${name}-${Math.random().toString(36).slice(2)}`;
  }
  const tokenFile = join(work, 'agent-tokens.csv');
  writeFileSync(tokenFile, Object.entries(tokens).map(([c, t]) => `${t},${c}\n`).join(''));
  const config = await resolveConfig({
    listen: '127.0.0.1:0',
    agentListen: '127.0.0.1:0',
    agentTokenFile: tokenFile,
    ...(serving ? { tlsCertFile: serving.certFile, tlsPrivateKeyFile: serving.keyFile } : {}),
  });
  const proxy = await startServer(config);
  const kubeconfigs: Record<string, string> = {};
  for (const name of [...Object.keys(clusterPods), 'missing']) {
    kubeconfigs[name] = join(work, `kubeconfig-${name}`);
    writeKubeconfig(kubeconfigs[name]!, { server: `${proxy.url}/clusters/${name}`, name, ...(ca ? { caPem: ca.cert.toString('utf8') } : {}) });
  }
  const agents = new Set<AgentProcess>();
  const metrics = async (): Promise<string> => (await get(proxy.url, '/metrics', ca?.cert)).body;
  let n = 0;
  const startAgent = (cluster: string, o: { token?: string; upstream?: string; proxyUrls?: string[]; args?: string[] } = {}): AgentProcess => {
    const tokenPath = join(work, `agent-${cluster}-${n++}.token`);
    writeFileSync(tokenPath, `${o.token ?? tokens[cluster]}\n`);
    const agent = spawnCli([
      'agent',
      ...(o.proxyUrls ?? [proxy.agentUrl!]).flatMap((u) => ['--proxy-url', u]),
      ...(ca ? ['--proxy-ca-file', ca.certFile] : []),
      '--cluster-name',
      cluster,
      '--token-file',
      tokenPath,
      '--upstream',
      o.upstream ?? clusters[cluster]!.url,
      ...(o.args ?? []),
    ]);
    agents.add(agent);
    agent.exit.then(() => agents.delete(agent), () => {});
    return agent;
  };
  return {
    work,
    proxy,
    clusters,
    tokens,
    agentTokenFile: tokenFile,
    kubeconfigs,
    ...(ca ? { ca: ca.cert } : {}),
    metrics,
    metric: async (name, labels = {}) => counterValue(await metrics(), name, labels),
    startAgent,
    close: async () => {
      await Promise.all([...agents].map((a) => a.kill()));
      await proxy.close();
      for (const c of Object.values(clusters)) await c.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
}
