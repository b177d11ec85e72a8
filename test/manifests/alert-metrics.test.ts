/**
 * The alert rules name only what the proxy really exports. One real run, in process on loopback: the
 * dev cluster as upstream with dev-metrics aggregated (metrics.k8s.io, `--apiservice-config`), a
 * second dev cluster behind a real TunnelAgent (`--agent-listen`), and kubectl 1.33 doing a translated
 * exec, a WebSocket port-forward and an exec through the agent. Both clusters sit behind a gateway
 * that refuses WebSocket upgrades with 403, as OpenShift does: the proxy falls back to SPDY and
 * translates (the dev cluster itself takes WebSockets, and its sessions would then not be translated
 * here at all). Then the outages the alerts are about:
 * dev-metrics stops (the APIService becomes unavailable), the upstream stops (dial errors of the
 * readiness check), and a graceful shutdown cuts a running session (outcome "shutdown").
 *
 * The exposition is `/metrics` scraped over HTTP before the shutdown, plus the same registry's text
 * after it (the shutdown's counts land when the listener is already closed). Every metric name, label
 * name and `=` label value in every alert expression (read with Prometheus's PromQL grammar,
 * test/manifests/promql-references.ts) must be in it. Labels that Prometheus adds at scrape time
 * (`job`, `instance`) and its `up` series are not in an exposition and are allowed as such.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadYaml } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { resolveConfig } from '../../src/config.js';
import { METRICS_SERVICE, startDemoMetrics, type DemoMetrics } from '../../dev/demo-metrics.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { upstreamFromFiles } from '../../src/routing/upstream.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { TunnelAgent } from '../../src/tunnel/agent.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary, type RunningKubectl } from '../helpers/kubectl.js';
import { counterValue } from '../helpers/metrics.js';
import { waitFor } from '../helpers/wait.js';
import { startStreamingGateway, type StreamingGateway } from '../helpers/streaming-gateway.js';
import { readExposition, type Exposition } from './exposition-labels.js';
import { promqlReferences } from './promql-references.js';

const ROOT = resolve(import.meta.dirname, '../..');
const RULES_FILE = join(ROOT, 'manifests/alerts/kube-stream-proxy.rules.yaml');

/** Labels Prometheus attaches to every scraped series (not in the exposition). */
const TARGET_LABELS = new Set(['job', 'instance']);
/** Series Prometheus makes itself per target, with the target labels only. */
const SYNTHETIC_SERIES = new Set(['up']);

type Rule = { alert?: string; record?: string; expr: string };
const rules = (loadYaml(readFileSync(RULES_FILE, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

const skipReason = kubectlE2eSkipReason();

describe.skipIf(skipReason !== undefined)('alert rules against the metrics of a real run', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ksp-alert-metrics-'));
  const kubeconfig = join(dir, 'kubeconfig');
  const registry = new Registry();
  let upstream: DevCluster | undefined;
  let agentCluster: DevCluster | undefined;
  let gateway: StreamingGateway | undefined;
  let directGateway: StreamingGateway | undefined;
  let demoMetrics: DemoMetrics | undefined;
  let proxy: RunningServer | undefined;
  let agent: TunnelAgent | undefined;
  let bytes: BytesServer | undefined;
  let longSession: RunningKubectl | undefined;
  let exposition: Exposition;

  beforeAll(async () => {
    const bin = findKubectl('1.33');
    const kubectl = (args: string[]) => runKubectl(bin, args, { kubeconfig, timeoutMs: 60_000 });
    const metrics = async (): Promise<string> => (await fetch(`${proxy!.url}/metrics`)).text();
    const value = async (name: string, labels: Record<string, string> = {}): Promise<number> => counterValue(await metrics(), name, labels);

    upstream = await startDevCluster({ host: '127.0.0.1', port: 0, services: [METRICS_SERVICE] });
    demoMetrics = await startDemoMetrics(dir, upstream.url);
    directGateway = await startStreamingGateway(upstream.url, { websocket: 403 });
    agentCluster = await startDevCluster({ host: '127.0.0.1', port: 0, pods: ['alpha'] });
    gateway = await startStreamingGateway(agentCluster.url, { websocket: 403 });
    const tokenFile = join(dir, 'agent-tokens.csv');
    writeFileSync(tokenFile, 'token-of-one,one\n', { mode: 0o600 });
    writeFileSync(join(dir, 'one.token'), 'token-of-one\n', { mode: 0o600 });
    const config = await resolveConfig({
      listen: '127.0.0.1:0',
      upstream: directGateway.url,
      apiserviceConfig: demoMetrics.apiserviceConfigFile,
      proxyClientCertFile: demoMetrics.proxyClientCertFile,
      proxyClientKeyFile: demoMetrics.proxyClientKeyFile,
      agentListen: '127.0.0.1:0',
      agentTokenFile: tokenFile,
      shutdownGracePeriod: '1s',
    });
    proxy = await startServer(config, { registry, aggregatorIntervals: { recheckMs: 500, retryMs: 200 } });
    const connected = proxy.agents!.nextTunnel('one');
    agent = new TunnelAgent({
      proxyUrl: new URL(proxy.agentUrl!),
      clusterName: 'one',
      tokenFile: join(dir, 'one.token'),
      upstream: upstreamFromFiles({ url: gateway.url }),
      log: { info: () => {}, warn: () => {} },
    });
    await connected;
    writeKubeconfig(kubeconfig, [
      { server: proxy.url, name: 'direct' },
      { server: `${proxy.url}/clusters/one`, name: 'one' },
    ]);

    // A translated exec (kubectl 1.33 speaks WebSocket v5), and one through the agent.
    const direct = await kubectl(['--context', 'direct', 'exec', 'demo', '--', 'echo', 'direct']);
    expect(direct.code, summary(direct)).toBe(0);
    const viaAgent = await kubectl(['--context', 'one', 'exec', 'alpha', '--', 'echo', 'via-agent']);
    expect(viaAgent.code, summary(viaAgent)).toBe(0);
    expect(viaAgent.stdout.toString()).toBe('via-agent\n');
    expect(gateway.upgrades().map((u) => `${u.upgrade} ${u.refusedWith ?? 101}`)).toEqual(['websocket 403', 'spdy 101']);
    // A WebSocket port-forward (the tunnel).
    bytes = await startBytesServer();
    const pf = startKubectl(bin, ['--context', 'direct', 'port-forward', 'pod/demo', `:${bytes.port}`], { kubeconfig, env: {}, cwd: dir });
    try {
      const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytes.port}\\b`), 30_000);
      const d = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/1000?seed=1`);
      expect(d.byteLength).toBe(1000);
    } finally {
      await pf.stop('SIGINT', 10_000);
    }
    await waitFor('the tunnel counted', async () => ((await value('apiserver_stream_tunnel_requests_total', { code: '101' })) >= 1 ? true : undefined));
    // The aggregated API, available, then its backend gone.
    await waitFor('APIService available', async () => ((await metrics()).includes('aggregator_unavailable_apiservice{name="v1beta1.metrics.k8s.io"} 0') ? true : undefined));
    const aggregated = await kubectl(['--context', 'direct', 'get', '--raw', '/apis/metrics.k8s.io/v1beta1']);
    expect(aggregated.code, summary(aggregated)).toBe(0);

    // A session that is still running when the proxy shuts down (through the agent: its cluster stays up).
    longSession = startKubectl(bin, ['--context', 'one', 'exec', 'alpha', '--', 'sleep', '120'], { kubeconfig, env: {}, cwd: dir });
    await waitFor('the long session established', async () => ((await value('kube_stream_proxy_active_sessions')) >= 1 ? true : undefined), 30_000);

    await demoMetrics.metrics.close();
    await waitFor('APIService unavailable', async () => ((await value('aggregator_unavailable_apiservice_total')) >= 1 ? true : undefined), 30_000);
    await upstream.close();
    upstream = undefined;
    await directGateway.close();
    directGateway = undefined;
    await waitFor('readiness dial error', async () => {
      await fetch(`${proxy!.url}/readyz`);
      return (await value('kube_stream_proxy_upstream_dial_errors_total', { caller: 'readiness' })) >= 1 ? true : undefined;
    });
    const scraped = await metrics();

    const report = await proxy.shutdown(1_000);
    expect(report).toEqual({ sessionsAtStart: 1, sessionsStopped: 1 });
    // kubectl prints the shutdown Status and exits non-zero.
    await longSession.waitForOutput(/proxy shutting down/, 15_000);
    const ended = await longSession.stop('SIGKILL', 15_000);
    expect(ended.code, longSession.output().stderr).not.toBe(0);
    exposition = readExposition(scraped, await registry.metrics());
  }, 120_000);

  afterAll(async () => {
    await longSession?.stop('SIGKILL', 5_000);
    await agent?.stop();
    await proxy?.close().catch(() => {});
    await demoMetrics?.metrics.close().catch(() => {});
    await upstream?.close();
    await gateway?.close();
    await directGateway?.close();
    await agentCluster?.close();
    await bytes?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the run made the series the alerts are about', () => {
    const seen = (name: string, label: string, value: string): boolean => exposition.samples.get(name)?.get(label)?.has(value) === true;
    expect(seen('kube_stream_proxy_streaming_requests_total', 'outcome', 'shutdown'), 'a session cut by the shutdown').toBe(true);
    expect(seen('apiserver_stream_translator_requests_total', 'code', '503'), 'its translator code').toBe(true);
    expect(seen('apiserver_stream_tunnel_requests_total', 'code', '101')).toBe(true);
    expect(seen('kube_stream_proxy_tunnel_agents', 'cluster', 'one')).toBe(true);
    expect(seen('kube_stream_proxy_upstream_streaming_fallbacks_total', 'from', 'websocket'), 'the fallback behind the agent').toBe(true);
    expect(seen('aggregator_unavailable_apiservice', 'name', 'v1beta1.metrics.k8s.io')).toBe(true);
    expect(seen('kube_stream_proxy_upstream_dial_errors_total', 'caller', 'readiness')).toBe(true);
    // The reader found something to check in every rule.
    for (const r of rules) expect(promqlReferences(r.expr).selectors.length, r.alert).toBeGreaterThan(0);
  });

  it('every alert names only metrics the run exported', () => {
    const missing = rules.flatMap((r) =>
      promqlReferences(r.expr)
        .selectors.filter((s) => !SYNTHETIC_SERIES.has(s.metric) && !exposition.samples.has(s.metric))
        .map((s) => `${r.alert}: ${s.metric}${exposition.families.has(s.metric) ? ' (a family with no sample)' : ''}`),
    );
    expect(missing).toEqual([]);
  });

  it('every label an alert matches on or groups by is on those metrics (or is a target label)', () => {
    const labelsOf = (metric: string): Set<string> => new Set(SYNTHETIC_SERIES.has(metric) ? [] : exposition.samples.get(metric)?.keys() ?? []);
    const problems: string[] = [];
    for (const r of rules) {
      const refs = promqlReferences(r.expr);
      for (const s of refs.selectors) {
        for (const m of s.matchers) {
          if (!TARGET_LABELS.has(m.label) && !labelsOf(s.metric).has(m.label)) problems.push(`${r.alert}: ${s.text}: no label ${m.label}`);
        }
      }
      for (const g of refs.groupings) {
        for (const label of g.labels.filter((l) => !TARGET_LABELS.has(l))) {
          for (const metric of g.metrics) if (!labelsOf(metric).has(label)) problems.push(`${r.alert}: ${g.clause} (${label}): ${metric} has no label ${label}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('every exact label value an alert matches was exported by the run', () => {
    const problems = rules.flatMap((r) =>
      promqlReferences(r.expr).selectors.flatMap((s) =>
        s.matchers
          .filter((m) => m.op === '=' && !TARGET_LABELS.has(m.label))
          .filter((m) => exposition.samples.get(s.metric)?.get(m.label)?.has(m.value) !== true)
          .map((m) => `${r.alert}: ${s.metric}{${m.label}="${m.value}"} never exported`),
      ),
    );
    expect(problems).toEqual([]);
  });
});
