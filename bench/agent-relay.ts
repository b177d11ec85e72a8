/**
 * A cluster behind an agent, for the benchmarks: the proxy process (`serve --agent-listen`, no
 * `--upstream`) and an agent process (`agent --upstream <dev cluster>`) that dials it, each its own
 * `node` process as in real life. kubectl talks to `<proxy>/clusters/bench`; every byte crosses
 * the proxy, the HTTP/2 tunnel and the agent. The agent's pid is kept so a benchmark can take the
 * CPU of both processes. With `tls` (the `--cpu --tls` rows: the proxy's `--tls-*` pair among its
 * arguments) the proxy's listeners, the agent's included, serve TLS and the agent trusts the CA.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { startCli, type ServerOptions, type ServerProcess } from './servers.js';

/** The cluster name the bench's agent serves. */
export const BENCH_CLUSTER = 'bench';

/** The proxy and the agent; `url` is the cluster's address on the proxy (`…/clusters/bench`). */
export interface AgentRelayProcess extends ServerProcess {
  /** The proxy process (its `url` is the proxy's root). */
  proxy: ServerProcess;
  /** The agent process. */
  agent: ServerProcess;
}

/** GET `url` (https: verified with `ca`); resolves with the status code (0 when the connection failed). */
function statusOf(url: string, ca?: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const req = (url.startsWith('https:') ? httpsRequest(url, ca ? { ca } : {}) : request(url)).once('response', (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', () => resolve(0));
    req.end();
  });
}

/**
 * Start the proxy (with `proxyArgs`, e.g. feature gates) and an agent for {@link BENCH_CLUSTER}
 * in front of `upstream`; resolves once a request reaches the cluster through the tunnel. `tls`:
 * the CA (PEM and its file) of the certificate the proxy serves with (its `--tls-*` in `proxyArgs`).
 */
export async function startAgentRelay(
  upstream: string,
  workDir: string,
  proxyArgs: string[] = [],
  options: ServerOptions = {},
  timeoutMs = 30_000,
  tls?: { ca: Buffer; caFile: string },
): Promise<AgentRelayProcess> {
  mkdirSync(workDir, { recursive: true });
  const token = `bench-agent-${Math.random().toString(36).slice(2)}`;
  const tokenCsv = join(workDir, 'agent-tokens.csv');
  const tokenFile = join(workDir, 'agent.token');
  writeFileSync(tokenCsv, `${token},${BENCH_CLUSTER}\n`);
  writeFileSync(tokenFile, `${token}\n`);
  const proxy = await startCli(
    ['serve', '--listen', '127.0.0.1:0', '--agent-listen', '127.0.0.1:0', '--agent-token-file', tokenCsv, ...proxyArgs],
    /^kube-stream-proxy listening on /,
    timeoutMs,
    options,
  );
  let agent: ServerProcess | undefined;
  try {
    const agentUrl = /agents on (https?:\/\/\S+)/.exec(proxy.readyLine ?? '')?.[1];
    if (!agentUrl) throw new Error(`the proxy did not print its agent listener: ${proxy.readyLine}`);
    agent = await startCli(
      ['agent', '--proxy-url', agentUrl, '--cluster-name', BENCH_CLUSTER, '--token-file', tokenFile, '--upstream', upstream, ...(tls ? ['--proxy-ca-file', tls.caFile] : [])],
      /^kube-stream-proxy agent for cluster /,
      timeoutMs,
      options,
    );
    const url = `${proxy.url}/clusters/${BENCH_CLUSTER}`;
    // 503 until the agent's tunnel is registered; then the dev cluster answers /version.
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = await statusOf(`${url}/version`, tls?.ca);
      if (status === 200) break;
      if (Date.now() > deadline) throw new Error(`no tunnel to the dev cluster within ${timeoutMs} ms (last status ${status})`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const a = agent;
    return {
      url,
      pid: proxy.pid,
      proxy,
      agent: a,
      close: async () => {
        await a.close();
        await proxy.close();
      },
    };
  } catch (e) {
    await agent?.close();
    await proxy.close();
    throw e;
  }
}
