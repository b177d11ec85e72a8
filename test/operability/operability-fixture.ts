/**
 * Shared set-up for the operability tests: an in-process dev cluster, the proxy in front of it with
 * its pino output captured line by line, a kubeconfig, and polling helpers (a deadline, never a
 * fixed sleep).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { resolveConfig, type UpstreamStreaming } from '../../src/config.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { counterValue } from '../helpers/metrics.js';

/** One parsed pino line. */
export type LogLine = Record<string, unknown> & { msg?: string; reqId?: string; audit?: boolean };

/** A dev cluster, the proxy and its captured logs. */
export interface OperabilityFixture {
  work: string;
  cluster: DevCluster;
  proxy: RunningServer;
  kubeconfig: string;
  /** Every log line so far. */
  logs: LogLine[];
  /** The audit lines so far. */
  audits(): LogLine[];
  /** The proxy's `/metrics` text. */
  metrics(): Promise<string>;
  /** Sum of `name`'s samples matching `labels`. */
  value(name: string, labels?: Record<string, string>): Promise<number>;
  close(): Promise<void>;
}

/** Poll `probe` until it returns a value other than undefined, or fail after `timeoutMs` with `what`. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Start cluster and proxy; `shutdownGracePeriod` as the flag (Go duration), `upstreamStreaming` as
 * `--upstream-streaming` (`spdy`: WebSocket clients translated or tunnelled here, the way to test the
 * translator in front of a dev cluster that would take WebSockets itself).
 */
export async function startOperabilityFixture(o: { shutdownGracePeriod?: string; upstreamStreaming?: UpstreamStreaming } = {}): Promise<OperabilityFixture> {
  const work = mkdtempSync(join(tmpdir(), 'ksp-operability-'));
  const cluster = await startDevCluster({ dataDir: join(work, 'pods') });
  const logs: LogLine[] = [];
  let partial = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      partial += chunk.toString('utf8');
      let nl: number;
      while ((nl = partial.indexOf('\n')) >= 0) {
        const line = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        if (line.trim() !== '') logs.push(JSON.parse(line) as LogLine);
      }
      cb();
    },
  });
  const config = await resolveConfig({
    listen: '127.0.0.1:0',
    upstream: cluster.url,
    ...(o.shutdownGracePeriod !== undefined ? { shutdownGracePeriod: o.shutdownGracePeriod } : {}),
    ...(o.upstreamStreaming !== undefined ? { upstreamStreaming: o.upstreamStreaming } : {}),
  });
  const proxy = await startServer(config, { logger: { level: 'info', stream } });
  const kubeconfig = join(work, 'kubeconfig');
  writeKubeconfig(kubeconfig, { server: proxy.url, name: 'proxy' });
  const metrics = async (): Promise<string> => {
    const res = await fetch(`${proxy.url}/metrics`);
    if (res.status !== 200) throw new Error(`/metrics: HTTP ${res.status}`);
    return res.text();
  };
  return {
    work,
    cluster,
    proxy,
    kubeconfig,
    logs,
    audits: () => logs.filter((l) => l.audit === true),
    metrics,
    value: async (name, labels = {}) => counterValue(await metrics(), name, labels),
    close: async () => {
      if (!proxy.draining) await proxy.close();
      await cluster.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
}
