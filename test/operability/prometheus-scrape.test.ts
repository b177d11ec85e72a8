/**
 * A real Prometheus server (Debian's `prometheus` package) scrapes the in-process proxy every second;
 * after a kubectl exec (1.33: WebSocket v5, passed through by the default to the dev cluster, which
 * takes it itself as kube-apiserver 1.36 does), a query through Prometheus's HTTP API returns the
 * proxy's `apiserver_websocket_streaming_requests_total{subresource="exec",proxy_type="proxied_to_upstream"}`
 * value — which way the proxy sent the session. Polled with a deadline.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { eventually, startOperabilityFixture, type OperabilityFixture } from './operability-fixture.js';

const skipReason = kubectlE2eSkipReason();

/** A free loopback port (bound, then released: Prometheus cannot listen on port 0). */
async function freePort(): Promise<number> {
  const s = createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe.skipIf(skipReason !== undefined)('a real Prometheus scrapes the proxy', () => {
  let fx: OperabilityFixture;
  let prometheus: ChildProcess | undefined;
  let promUrl: string;
  let promLog = '';

  beforeAll(async () => {
    const bin = spawnSync('sh', ['-c', 'command -v prometheus'], { encoding: 'utf8' }).stdout.trim();
    if (bin === '') {
      throw new Error('prometheus not found: install Debian\'s "prometheus" package (apt-get update && apt-get install -y prometheus); the pretest step of npm test (scripts/provision-test-tools.sh) installs it when missing');
    }
    fx = await startOperabilityFixture();
    const target = new URL(fx.proxy.url).host;
    const dir = join(fx.work, 'prometheus');
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'prometheus.yml'),
      `global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: kube-stream-proxy\n    static_configs:\n      - targets: ['${target}']\n`,
    );
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      bin,
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stdout!.on('data', (c: Buffer) => (promLog += c.toString()));
    prometheus.stderr!.on('data', (c: Buffer) => (promLog += c.toString()));
    await eventually('Prometheus ready', async () => ((await fetch(`${promUrl}/-/ready`)).status === 200 ? true : undefined), 30_000).catch((e: Error) => {
      throw new Error(`${e.message}\n${promLog.slice(-3000)}`);
    });
  });

  afterAll(async () => {
    if (prometheus && prometheus.exitCode === null) {
      prometheus.kill('SIGTERM');
      await once(prometheus, 'exit');
    }
    await fx?.close();
  });

  it('returns the WebSocket streaming counter after a kubectl exec', async () => {
    const name = 'apiserver_websocket_streaming_requests_total';
    const labels = { subresource: 'exec', proxy_type: 'proxied_to_upstream' };
    const r = await runKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'echo', 'scraped'], { kubeconfig: fx.kubeconfig, timeoutMs: 60_000 });
    expect(r.code, summary(r)).toBe(0);
    const own = await eventually('the proxy counting the exec', async () => {
      const v = await fx.value(name, labels);
      return v >= 1 ? v : undefined;
    });
    const seen = await eventually(
      'Prometheus to return the counter',
      async () => {
        const body = (await (await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(name)}`)).json()) as {
          status: string;
          data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
        };
        const sample = body.data.result.find((s) => s.metric.subresource === labels.subresource && s.metric.proxy_type === labels.proxy_type);
        return sample && Number(sample.value[1]) === own ? sample : undefined;
      },
      30_000,
    );
    expect(seen.metric).toMatchObject({ __name__: name, ...labels, job: 'kube-stream-proxy' });
    expect(Number(seen.value[1])).toBe(1);
  });
});
