/**
 * Clusters behind agents on loopback: dev clusters, the proxy with `--agent-listen` and no
 * `--upstream` (in-process, or with `{ proxyProcess: true }` a child process of the built CLI that a
 * test can SIGKILL and start again on the same ports), and agents as real child processes of the
 * built CLI (`bin/kube-stream-proxy.js agent`), so a test can kill one. Needs
 * `npx tsc -p tsconfig.json` (dist/) first.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import { startDevCluster, type DevCluster, type DevClusterOptions } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
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
export function spawnCli(args: string[], env?: NodeJS.ProcessEnv): AgentProcess {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], ...(env ? { env } : {}) });
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

/** How {@link TunnelFixture.startAgent} starts an agent. */
export interface AgentStartOptions {
  /** The agent token (default: the cluster's). */
  token?: string;
  /** `--upstream` (default: the cluster's URL; null: no `--upstream` flag). */
  upstream?: string | null;
  /** The agent process's environment (default: the test's). */
  env?: NodeJS.ProcessEnv;
  /** The proxies' agent listeners (`--proxy-url`, repeatable; default: the fixture's proxy). */
  proxyUrls?: string[];
  /** More flags (`--access-as impersonate --upstream-token-file …`). */
  args?: string[];
}

/** The proxy as a child process (`serve --listen … --agent-listen …`), which a test may kill and restart. */
export interface ProxyProcess {
  /** The client listener's base URL (the same after a restart). */
  url: string;
  /** The agent listener's base URL (the same after a restart). */
  agentUrl: string;
  /** Everything the current process printed (stdout + stderr). */
  output(): string;
  /** Send `signal` (default SIGKILL) and resolve once the process exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /**
   * SIGKILL the proxy and start it again with the same flags on the same two ports (the new
   * process has its modules loaded before the old one is killed); resolves once it listens, with
   * how long no proxy was listening (SIGKILL sent → listening line).
   */
  restart(): Promise<{ downMs: number }>;
  /** Kill it (SIGKILL: nothing to drain in a test). */
  close(): Promise<void>;
}

/** The running topology; `P` is how the proxy runs (in-process by default). */
export interface TunnelFixture<P extends { url: string; agentUrl?: string; close(): Promise<void> } = RunningServer> {
  work: string;
  proxy: P;
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
  /** Start an agent for `cluster` (token, upstream, proxies and extra flags per {@link AgentStartOptions}); resolves once it is spawned. */
  startAgent(cluster: string, o?: AgentStartOptions): AgentProcess;
  close(): Promise<void>;
}

/** The compiled CLI module that `bin/kube-stream-proxy.js` runs. */
const CLI_MODULE = pathToFileURL(resolve(import.meta.dirname, '../../dist/src/cli.js')).href;

/**
 * What a proxy child process runs: `bin/kube-stream-proxy.js`'s `main(argv)`, once a line arrives
 * on stdin. It loads the CLI's modules first and prints `loaded`, so a restart can have the next
 * process loaded before the old one is killed: the proxy is down for as long as killing one and
 * listening with the other take, not for Node's start-up under load.
 */
const PRELOADED_CLI = `import { main } from ${JSON.stringify(CLI_MODULE)};
process.stdout.write('loaded\\n');
process.stdin.once('data', () => {
  process.stdin.pause();
  main(process.argv.slice(1)).then(
    (code) => { if (typeof code === 'number') process.exitCode = code; },
    (err) => { process.stderr.write('kube-stream-proxy: ' + (err instanceof Error ? err.message : String(err)) + '\\n'); process.exitCode = 1; },
  );
});`;

/** A proxy child process with its modules loaded; `listen()` starts `serve` and resolves with its URLs. */
interface LoadedProxy {
  child: ChildProcess;
  output: () => string;
  exit: Promise<unknown>;
  listen(): Promise<{ url: string; agentUrl: string }>;
}

/**
 * Start a child process that will run `kube-stream-proxy serve --listen LISTEN --agent-listen
 * AGENT_LISTEN ARGS`; resolves once its modules are loaded.
 */
function loadProxy(args: string[], listen: string, agentListen: string): Promise<LoadedProxy> {
  const argv = ['serve', '--listen', listen, '--agent-listen', agentListen, ...args];
  const child = spawn(process.execPath, ['--input-type=module', '-e', PRELOADED_CLI, ...argv], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  const exit = once(child, 'exit');
  const listeners = new Set<() => void>();
  const onData = (c: Buffer): void => {
    out += c.toString('utf8');
    listeners.forEach((l) => l());
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  /** Resolve with the first match of `re` in the output; reject on exit or after 30 s. */
  const waitFor = (re: RegExp, what: string): Promise<RegExpExecArray> =>
    new Promise((resolveMatch, reject) => {
      const check = (): void => {
        const m = re.exec(out);
        if (m) done(undefined, m);
      };
      const timer = setTimeout(() => done(new Error(`no ${what} within 30 s`)), 30_000);
      function done(err?: Error, m?: RegExpExecArray): void {
        clearTimeout(timer);
        listeners.delete(check);
        if (err) {
          child.kill('SIGKILL');
          reject(new Error(`kube-stream-proxy ${argv.join(' ')}: ${err.message}\n${out}`));
        } else resolveMatch(m!);
      }
      listeners.add(check);
      void exit.then(([code, signal]) => done(new Error(`exited (code=${String(code)} signal=${String(signal)}) before ${what}`)));
      check();
    });
  return waitFor(/^loaded\n/, 'module load').then(() => ({
    child,
    output: () => out,
    exit,
    listen: async () => {
      child.stdin!.end('go\n');
      const m = await waitFor(/kube-stream-proxy listening on ([^\s,]+), upstream .*, agents on (\S+)\n/, 'listening line');
      return { url: m[1]!, agentUrl: m[2]! };
    },
  }));
}

/** `--listen`/`--agent-listen` address of a listener URL (`http://127.0.0.1:1234` → `127.0.0.1:1234`). */
function listenAddress(url: string): string {
  return new URL(url).host;
}

/** Start the proxy as a child process on free ports; restarts reuse those ports. */
async function startProxyProcess(args: string[]): Promise<ProxyProcess> {
  let current = await loadProxy(args, '127.0.0.1:0', '127.0.0.1:0');
  const { url, agentUrl } = await current.listen();
  const kill = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
    const { child, exit } = current;
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exit;
  };
  return {
    url,
    agentUrl,
    output: () => current.output(),
    kill,
    restart: async () => {
      const next = await loadProxy(args, listenAddress(url), listenAddress(agentUrl));
      const killedAt = performance.now();
      await kill();
      current = next;
      await next.listen();
      return { downMs: performance.now() - killedAt };
    },
    close: () => kill(),
  };
}

/**
 * Start dev clusters `{ name: pods }` (with extra dev-cluster options per name, given the work
 * folder), the proxy (in-process, or a child process with `proxyProcess`), and write the token
 * file and kubeconfigs.
 */
export async function startTunnelFixture(
  clusterPods: Record<string, string[]>,
  clusterOptions?: Record<string, (work: string) => Partial<DevClusterOptions>>,
  o?: { tls?: boolean; proxyProcess?: false; authn?: 'passthrough' | 'impersonate'; serveFlags?: (work: string) => Partial<ServeFlags> },
): Promise<TunnelFixture>;
export async function startTunnelFixture(
  clusterPods: Record<string, string[]>,
  clusterOptions: Record<string, (work: string) => Partial<DevClusterOptions>>,
  o: { tls?: boolean; proxyProcess: true; authn?: 'passthrough' | 'impersonate' },
): Promise<TunnelFixture<ProxyProcess>>;
export async function startTunnelFixture(
  clusterPods: Record<string, string[]>,
  clusterOptions: Record<string, (work: string) => Partial<DevClusterOptions>> = {},
  o: { tls?: boolean; proxyProcess?: boolean; authn?: 'passthrough' | 'impersonate'; serveFlags?: (work: string) => Partial<ServeFlags> } = {},
): Promise<TunnelFixture<RunningServer | ProxyProcess>> {
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
  let proxy: RunningServer | ProxyProcess;
  if (o.proxyProcess) {
    proxy = await startProxyProcess(['--agent-token-file', tokenFile, ...(o.authn ? ['--authn', o.authn] : []), ...(serving ? ['--tls-cert-file', serving.certFile, '--tls-private-key-file', serving.keyFile] : [])]);
  } else {
    const config = await resolveConfig({
      listen: '127.0.0.1:0',
      agentListen: '127.0.0.1:0',
      agentTokenFile: tokenFile,
      ...(o.authn ? { authn: o.authn } : {}),
      ...(serving ? { tlsCertFile: serving.certFile, tlsPrivateKeyFile: serving.keyFile } : {}),
      // More serve flags for the in-process proxy (session recording, …), given the work folder.
      ...o.serveFlags?.(work),
    });
    proxy = await startServer(config);
  }
  const kubeconfigs: Record<string, string> = {};
  for (const name of [...Object.keys(clusterPods), 'missing']) {
    kubeconfigs[name] = join(work, `kubeconfig-${name}`);
    writeKubeconfig(kubeconfigs[name]!, { server: `${proxy.url}/clusters/${name}`, name, ...(ca ? { caPem: ca.cert.toString('utf8') } : {}) });
  }
  const agents = new Set<AgentProcess>();
  const metrics = async (): Promise<string> => (await get(proxy.url, '/metrics', ca?.cert)).body;
  let n = 0;
  const startAgent = (cluster: string, o: AgentStartOptions = {}): AgentProcess => {
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
      ...(o.upstream === null ? [] : ['--upstream', o.upstream ?? clusters[cluster]!.url]),
      ...(o.args ?? []),
    ], o.env);
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
