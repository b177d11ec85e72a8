/**
 * Shared set-up for the translator tests: one in-process dev cluster (kubelet-like: SPDY v4 and
 * WebSocket v4, no v5), the proxy in front of it, kubeconfigs for both, and a reader for the proxy's
 * `apiserver_stream_translator_requests_total` counter (the proof that the WebSocket path was used).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../../src/config.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import type { FeatureGateName } from '../../src/feature-gate.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';

/** A dev cluster with the proxy in front. */
export interface TranslatorFixture {
  work: string;
  cluster: DevCluster;
  proxy: RunningServer;
  /** kubeconfig pointing at the proxy. */
  kubeconfig: string;
  /** Current value of `apiserver_stream_translator_requests_total{code}` (0 when absent). */
  translated(code?: number): Promise<number>;
  /** Every `code` label value of the counter with its value. */
  translatedByCode(): Promise<Record<string, number>>;
  close(): Promise<void>;
}

/** Options of {@link startTranslatorFixture}. */
export interface TranslatorFixtureOptions {
  featureGates?: Partial<Record<FeatureGateName, boolean>>;
  maxConnectionBytesPerSec?: number;
}

/** Start cluster and proxy in a fresh temp folder. */
export async function startTranslatorFixture(o: TranslatorFixtureOptions = {}): Promise<TranslatorFixture> {
  const work = mkdtempSync(join(tmpdir(), 'ksp-translator-'));
  const cluster = await startDevCluster({ dataDir: join(work, 'pods') });
  const gates = Object.entries(o.featureGates ?? {}).map(([k, v]) => `${k}=${v}`).join(',');
  const config = await resolveConfig({
    listen: '127.0.0.1:0',
    upstream: cluster.url,
    // The translator is what these tests exercise: the dev cluster takes v5 itself, so the proxy must
    // not ask it in WebSocket first (`--upstream-streaming spdy`, issue 32).
    upstreamStreaming: 'spdy',
    ...(gates ? { featureGates: gates } : {}),
    ...(o.maxConnectionBytesPerSec !== undefined ? { maxConnectionBytesPerSec: String(o.maxConnectionBytesPerSec) } : {}),
  });
  const proxy = await startServer(config);
  const kubeconfig = join(work, 'kubeconfig');
  writeKubeconfig(kubeconfig, { server: proxy.url, name: 'proxy' });
  const translatedByCode = async (): Promise<Record<string, number>> => {
    const text = await (await fetch(`${proxy.url}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^apiserver_stream_translator_requests_total\{code="(\d+)"\} (\d+)$/gm)) out[m[1]!] = Number(m[2]);
    return out;
  };
  return {
    work,
    cluster,
    proxy,
    kubeconfig,
    translatedByCode,
    translated: async (code = 200) => (await translatedByCode())[String(code)] ?? 0,
    close: async () => {
      await proxy.close();
      await cluster.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
}
