import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';

// The built binary (run `npx tsc -p tsconfig.json` first, as `npm test` does).
const BIN = fileURLToPath(new URL('../../../bin/kube-stream-proxy.js', import.meta.url));

let cluster: DevCluster;
beforeAll(async () => {
  cluster = await startDevCluster({});
});
afterAll(async () => {
  await cluster?.close();
});

describe('kube-stream-proxy dev-metrics', () => {
  it('is listed in the main help and has its own', () => {
    expect(spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' }).stdout).toMatch(/^ {2}dev-metrics {3}Run a metrics\.k8s\.io/m);
    const help = spawnSync(process.execPath, [BIN, 'dev-metrics', '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage:\n {2}kube-stream-proxy dev-metrics --cluster URL \[flags\]$/m);
  });

  it('exits 2 with the reason on bad flags', () => {
    const r = spawnSync(process.execPath, [BIN, 'dev-metrics', '--listen', '127.0.0.1:0'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^kube-stream-proxy dev-metrics: --cluster is required\n/);
  });

  it('serves metrics of the cluster and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, [BIN, 'dev-metrics', '--listen', '127.0.0.1:0', '--cluster', cluster.url, '--scrape-interval', '200ms'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      child.stdout.setEncoding('utf8');
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (c: string) => {
          out += c;
          const m = /^dev-metrics listening on (http:\/\/127\.0\.0\.1:\d+), scraping /m.exec(out);
          if (m) resolve(m[1]!);
        });
        child.once('exit', (code) => reject(new Error(`exited ${code} before listening: ${out}`)));
      });
      const deadline = Date.now() + 20_000;
      let pods: { items: { metadata: { name: string } }[] } | undefined;
      while (Date.now() < deadline) {
        const r = await fetch(`${url}/apis/metrics.k8s.io/v1beta1/pods`);
        pods = (await r.json()) as typeof pods;
        if (pods!.items.length > 0) break;
        await new Promise((r) => setTimeout(r, 100)); // poll until the second scrape round; bounded by the deadline
      }
      expect(pods!.items.map((i) => i.metadata.name)).toEqual(['demo']);
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
  });
});
