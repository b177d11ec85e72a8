/**
 * Liveness and recovery (issue 14 item 5), in-process on loopback: 100 real TunnelAgents (one
 * cluster each) connected to a real AgentListener; the proxy "restarts" (every tunnel destroyed, the
 * listener closed, a new one on the same port after a second of downtime). The agents come back
 * jittered — not all within the same 100 ms — and all within 10 s. A draining listener refuses new
 * tunnels with a 503 Status while the tunnels it has stay up.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { createMetrics } from '../../src/metrics.js';
import { Upstream } from '../../src/routing/upstream.js';
import { TunnelAgent, type AgentLogger } from '../../src/tunnel/agent.js';
import { AgentListener } from '../../src/tunnel/agent-listener.js';
import { AgentRegistry } from '../../src/tunnel/agent-registry.js';
import { AgentTokenFile } from '../../src/tunnel/agent-tokens.js';
import { counterValue } from '../helpers/metrics.js';

const AGENTS = 100;
const quiet: AgentLogger = { info: () => {}, warn: () => {} };

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

function work(clusters: string[]): { dir: string; tokens: string } {
  const dir = mkdtempSync(join(tmpdir(), 'ksp-reconnect-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const tokens = join(dir, 'tokens.csv');
  writeFileSync(tokens, clusters.map((c) => `token-${c},${c}\n`).join(''));
  for (const c of clusters) writeFileSync(join(dir, `token-${c}`), `token-${c}\n`);
  return { dir, tokens };
}

async function startListener(port: number, tokens: string, registry: AgentRegistry, metrics?: ReturnType<typeof createMetrics>): Promise<{ listener: AgentListener; port: number }> {
  const listener = new AgentListener({
    listen: { host: '127.0.0.1', port },
    tokens: new AgentTokenFile(tokens),
    registry,
    ...(metrics ? { metrics } : {}),
    log: quiet,
  });
  const address = await listener.listen();
  return { listener, port: Number(address.split(':').pop()) };
}

describe('agent reconnects', () => {
  it(`${AGENTS} agents after a proxy restart: jittered (not all within 100 ms), all back within 10 s`, async () => {
    const clusters = Array.from({ length: AGENTS }, (_, i) => `c${i}`);
    const { dir, tokens } = work(clusters);
    let registry = new AgentRegistry();
    let { listener, port } = await startListener(0, tokens, registry);
    cleanups.push(async () => {
      await registry.closeAll(100);
      await listener.close();
    });
    const first = Promise.all(clusters.map((c) => registry.nextTunnel(c)));
    // Each agent's own view: its tunnels established (the proxy registers a tunnel a little before
    // the agent has read the 101).
    // `delayMs`: the backoff delay announced before the successful reconnect — the jitter itself,
    // free of how long 100 handshakes in one process take (that alone spreads arrivals too).
    const established = clusters.map(() => ({ count: 0, second: undefined as (() => void) | undefined, lastDelay: 0, delayMs: 0 }));
    const secondTunnel = established.map((e) => new Promise<void>((resolve) => (e.second = resolve)));
    const agents = clusters.map(
      (c, i) =>
        new TunnelAgent({
          proxyUrl: new URL(`http://127.0.0.1:${port}`),
          clusterName: c,
          tokenFile: join(dir, `token-${c}`),
          upstream: new Upstream(new URL('http://127.0.0.1:1'), undefined),
          log: {
            warn: () => {},
            info: (obj, msg) => {
              const e = established[i]!;
              if (msg === 'reconnecting') e.lastDelay = (obj as { delayMs: number }).delayMs;
              if (msg === 'tunnel established' && ++e.count === 2) {
                e.delayMs = e.lastDelay;
                e.second!();
              }
            },
          },
        }),
    );
    cleanups.push(() => Promise.all(agents.map((a) => a.stop())).then(() => undefined));
    await first;

    // The proxy dies: every tunnel is cut, nothing listens for a while (the restart).
    const killedAt = performance.now();
    const old = registry;
    for (const c of clusters) old.pick(c)!.session.destroy();
    await listener.close();
    await sleep(1_000); // the proxy's downtime — part of the scenario, not a wait for an event
    registry = new AgentRegistry();
    const reconnectedAt: number[] = [];
    const back = Promise.all(clusters.map((c) => registry.nextTunnel(c).then(() => reconnectedAt.push(performance.now()))));
    ({ listener } = await startListener(port, tokens, registry));
    await back;
    await Promise.all(secondTunnel);

    const delays = established.map((e) => e.delayMs);
    const jitter = Math.max(...delays) - Math.min(...delays);
    expect(jitter, `backoff delays of the successful reconnects spread over ${jitter} ms`).toBeGreaterThan(100);
    const spread = Math.max(...reconnectedAt) - Math.min(...reconnectedAt);
    const lastAfterKill = Math.max(...reconnectedAt) - killedAt;
    expect(reconnectedAt).toHaveLength(AGENTS);
    expect(spread, `reconnects spread over ${spread.toFixed(0)} ms`).toBeGreaterThan(100);
    expect(lastAfterKill, `last agent back ${lastAfterKill.toFixed(0)} ms after the kill`).toBeLessThan(10_000);
    expect(agents.filter((a) => !(a.connected && a.connections === 2)).map((a) => ({ connected: a.connected, connections: a.connections }))).toEqual([]);
  }, 30_000);

  it('a draining listener refuses new tunnels with a 503 Status; the tunnels it has stay up', async () => {
    const { dir, tokens } = work(['one', 'two']);
    const registry = new AgentRegistry();
    const metricsRegistry = new Registry();
    const metrics = createMetrics(metricsRegistry, { processMetrics: false });
    const { listener, port } = await startListener(0, tokens, registry, metrics);
    cleanups.push(async () => {
      await registry.closeAll(100);
      await listener.close();
    });
    const agent = (cluster: string, log: AgentLogger): TunnelAgent => {
      const a = new TunnelAgent({
        proxyUrl: new URL(`http://127.0.0.1:${port}`),
        clusterName: cluster,
        tokenFile: join(dir, `token-${cluster}`),
        upstream: new Upstream(new URL('http://127.0.0.1:1'), undefined),
        log,
      });
      cleanups.push(() => a.stop());
      return a;
    };
    const up = registry.nextTunnel('one');
    agent('one', quiet);
    const tunnel = await up;
    listener.startDraining();
    const refused = new Promise<object>((resolve) => agent('two', { info: () => {}, warn: (obj, msg) => msg === 'proxy refused the agent' && resolve(obj) }));
    expect(await refused).toMatchObject({ status: 503, message: 'the proxy is shutting down: connect to another replica' });
    expect(counterValue(await metricsRegistry.metrics(), 'kube_stream_proxy_tunnel_agent_refusals_total', { reason: 'shutting_down' })).toBeGreaterThanOrEqual(1);
    expect(registry.pick('one')?.session).toBe(tunnel.session);
    expect(tunnel.session.closed).toBe(false);
  });
});
