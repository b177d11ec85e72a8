import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../../dev/kubeconfig.js';

/** `readlink -f "$(command -v kubectl)"`'s folder + `/kubectl.1.28`, or undefined. */
function findKubectl(version = '1.28'): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const candidate = join(dir || '.', 'kubectl');
    if (!existsSync(candidate)) continue;
    const versioned = join(dirname(realpathSync(candidate)), `kubectl.${version}`);
    return existsSync(versioned) ? versioned : undefined;
  }
  return undefined;
}

const kubectl = findKubectl();
const skip = process.env.SKIP_KUBECTL_E2E === '1';

describe.skipIf(skip)('kubectl against the dev cluster', () => {
  let cluster: DevCluster;
  let dir: string;
  let kubeconfig: string;

  beforeAll(async () => {
    cluster = await startDevCluster({});
    dir = mkdtempSync(join(tmpdir(), 'dev-cluster-kubectl-'));
    kubeconfig = join(dir, 'kubeconfig');
    writeKubeconfig(kubeconfig, { server: cluster.url, name: 'dev' });
  });
  afterAll(async () => {
    await cluster?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const run = (...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      if (!kubectl) throw new Error('kubectl.1.28 not found next to `kubectl` on PATH (set SKIP_KUBECTL_E2E=1 to skip)');
      execFile(kubectl, ['--kubeconfig', kubeconfig, ...args], { timeout: 30_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
      });
    });

  it('finds a versioned kubectl', () => {
    expect(kubectl, 'kubectl.1.28 not found next to `kubectl` on PATH (set SKIP_KUBECTL_E2E=1 to skip)').toBeDefined();
  });

  it('kubectl get pods', async () => {
    const r = await run('get', 'pods');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toMatch(/^NAME\s+/);
    expect(r.stdout).toMatch(/^demo\s/m);
  });

  it('kubectl get pod demo -o json', async () => {
    const r = await run('get', 'pod', 'demo', '-o', 'json');
    expect(r.code).toBe(0);
    const pod = JSON.parse(r.stdout);
    expect(pod).toMatchObject({
      kind: 'Pod',
      metadata: { name: 'demo', namespace: 'default' },
      status: { phase: 'Running' },
    });
  });

  it('kubectl get pod missing', async () => {
    const r = await run('get', 'pod', 'missing');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('pods "missing" not found');
  });

  it('kubectl get pods -w sees a pod created while watching', async () => {
    if (!kubectl) throw new Error('kubectl.1.28 not found');
    const child = spawn(kubectl, ['--kubeconfig', kubeconfig, 'get', 'pods', '-w', '--no-headers']);
    let out = '';
    const waitFor = (re: RegExp) =>
      new Promise<void>((resolve, reject) => {
        const check = (): void => {
          if (re.test(out)) {
            child.stdout.off('data', onData);
            resolve();
          }
        };
        const onData = (c: Buffer): void => {
          out += c.toString();
          check();
        };
        child.stdout.on('data', onData);
        child.once('exit', (code) => reject(new Error(`kubectl exited ${code}: ${out}`)));
        check();
      });
    try {
      await waitFor(/^demo\s/m);
      const res = await fetch(`${cluster.url}/api/v1/namespaces/default/pods`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ metadata: { name: 'watched-by-kubectl' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } }),
      });
      expect(res.status).toBe(201);
      await waitFor(/^watched-by-kubectl\s/m);
      expect(out.match(/^demo\s/gm)).toHaveLength(1); // no replay of the listed pods
    } finally {
      child.kill();
    }
  });
});
