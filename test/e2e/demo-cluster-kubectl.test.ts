/**
 * Issue 16, part 3: what a kubectl 1.33 user types first prints what a real cluster prints (shape
 * and columns; the values are the demo's), directly against the dev cluster and through the proxy.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { startDevCluster, type DevClusterOptions } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer } from '../../src/server.js';
import { createTestPki } from '../helpers/certs.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';

const SEED: DevClusterOptions = {
  services: [{ namespace: 'kube-system', name: 'metrics-server', ports: [{ name: 'https', port: 443, targetPort: 4443 }], endpoints: [{ address: '127.0.0.1' }] }],
};

interface Target {
  name: string;
  start(): Promise<{ url: string; close(): Promise<void> }>;
}

const TARGETS: Target[] = [
  {
    name: 'kubectl 1.33 → dev cluster',
    start: async () => {
      const cluster = await startDevCluster(SEED);
      return { url: cluster.url, close: () => cluster.close() };
    },
  },
  {
    name: 'kubectl 1.33 → proxy → dev cluster',
    start: async () => {
      const cluster = await startDevCluster(SEED);
      const proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: cluster.url }));
      return {
        url: proxy.url,
        close: async () => {
          await proxy.close();
          await cluster.close();
        },
      };
    },
  },
];

/** The header line's column names (kubectl separates columns by at least 3 spaces). */
const header = (out: string): string[] => out.split('\n')[0]!.trim().split(/\s{3,}/);
const rows = (out: string): string[][] =>
  out
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s{3,}/));

describe.skipIf(kubectlE2eSkipReason() !== undefined).each(TARGETS)('$name', (target) => {
  let work: string;
  let kubeconfig: string;
  let env: { url: string; close(): Promise<void> };
  let bin: string;
  const kubectl = async (...args: string[]) => {
    const r = await runKubectl(bin, args, { kubeconfig, timeoutMs: 30_000 });
    return { ...r, out: r.stdout.toString(), summary: summary(r) };
  };

  beforeAll(async () => {
    bin = findKubectl('1.33');
    work = mkdtempSync(join(tmpdir(), 'ksp-e2e-demo-'));
    env = await target.start();
    kubeconfig = join(work, 'kubeconfig');
    writeKubeconfig(kubeconfig, { server: env.url, name: 'demo' });
  });
  afterAll(async () => {
    await env?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('get pods: NAME READY STATUS RESTARTS AGE; -o wide adds IP NODE NOMINATED NODE READINESS GATES', async () => {
    const r = await kubectl('get', 'pods');
    expect(r.code, r.summary).toBe(0);
    expect(r.stderr).toBe('');
    expect(header(r.out)).toEqual(['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE']);
    expect(rows(r.out)).toEqual([['demo', '1/1', 'Running', '0', expect.stringMatching(/^\d+[smh]/)]]);
    const wide = await kubectl('get', 'pods', '-o', 'wide');
    expect(header(wide.out)).toEqual(['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE', 'IP', 'NODE', 'NOMINATED NODE', 'READINESS GATES']);
    expect(rows(wide.out)[0]!.slice(5)).toEqual(['127.0.0.1', 'dev-node', '<none>', '<none>']);
  });

  it('get nodes: dev-node Ready', async () => {
    const r = await kubectl('get', 'nodes');
    expect(r.code, r.summary).toBe(0);
    expect(header(r.out)).toEqual(['NAME', 'STATUS', 'ROLES', 'AGE', 'VERSION']);
    expect(rows(r.out)).toEqual([['dev-node', 'Ready', '<none>', expect.any(String), 'v1.36.0']]);
    const wide = await kubectl('get', 'nodes', '-o', 'wide');
    expect(header(wide.out)).toEqual(['NAME', 'STATUS', 'ROLES', 'AGE', 'VERSION', 'INTERNAL-IP', 'EXTERNAL-IP', 'OS-IMAGE', 'KERNEL-VERSION', 'CONTAINER-RUNTIME']);
  });

  it('get namespaces: NAME STATUS AGE', async () => {
    const r = await kubectl('get', 'namespaces');
    expect(header(r.out)).toEqual(['NAME', 'STATUS', 'AGE']);
    expect(rows(r.out).map((x) => x.slice(0, 2))).toEqual([
      ['default', 'Active'],
      ['kube-public', 'Active'],
      ['kube-system', 'Active'],
    ]);
  });

  it('auth can-i create pods/exec → yes', async () => {
    const r = await kubectl('auth', 'can-i', 'create', 'pods/exec');
    expect(r.code, r.summary).toBe(0);
    expect(r.out).toBe('yes\n');
  });

  it('get svc -A and get endpointslices -A list the seeded metrics-server', async () => {
    const svc = await kubectl('get', 'svc', '-A');
    expect(svc.code, svc.summary).toBe(0);
    expect(header(svc.out)).toEqual(['NAMESPACE', 'NAME', 'TYPE', 'CLUSTER-IP', 'EXTERNAL-IP', 'PORT(S)', 'AGE']);
    expect(rows(svc.out)).toEqual([
      ['default', 'kubernetes', 'ClusterIP', '10.96.0.1', '<none>', '443/TCP', expect.any(String)],
      ['kube-system', 'metrics-server', 'ClusterIP', expect.stringMatching(/^10\.96\./), '<none>', '443/TCP', expect.any(String)],
    ]);
    const plain = await kubectl('get', 'svc');
    expect(rows(plain.out).map((x) => x[0])).toEqual(['kubernetes']);
    const slices = await kubectl('get', 'endpointslices', '-n', 'kube-system');
    expect(slices.code, slices.summary).toBe(0);
    expect(header(slices.out)).toEqual(['NAME', 'ADDRESSTYPE', 'PORTS', 'ENDPOINTS', 'AGE']);
    expect(rows(slices.out)).toEqual([[expect.stringMatching(/^metrics-server-/), 'IPv4', '4443', '127.0.0.1', expect.any(String)]]);
  });

  it('get events lists the pod start and a failed exec', async () => {
    const exec = await kubectl('exec', 'demo', '--', 'no-such-command-e2e');
    expect(exec.code).not.toBe(0);
    const r = await kubectl('get', 'events');
    expect(r.code, r.summary).toBe(0);
    expect(header(r.out)).toEqual(['LAST SEEN', 'TYPE', 'REASON', 'OBJECT', 'MESSAGE']);
    const byReason = new Map(rows(r.out).map((x) => [x[2], x]));
    expect(byReason.get('Started')?.slice(1)).toEqual(['Normal', 'Started', 'pod/demo', 'Started container demo']);
    expect(byReason.get('Scheduled')?.slice(3)).toEqual(['pod/demo', 'Successfully assigned default/demo to dev-node']);
    expect(byReason.get('Failed')?.slice(1, 4)).toEqual(['Warning', 'Failed', 'pod/demo']);
    expect(byReason.get('Failed')?.[4]).toContain('no-such-command-e2e');
  });

  it('api-resources lists nodes, services, events and endpointslices', async () => {
    const r = await kubectl('api-resources', '-o', 'name');
    expect(r.code, r.summary).toBe(0);
    expect(r.out.split('\n')).toEqual(expect.arrayContaining(['nodes', 'services', 'events', 'endpointslices.discovery.k8s.io', 'selfsubjectaccessreviews.authorization.k8s.io']));
  });
});

describe.skipIf(kubectlE2eSkipReason() !== undefined)('kubectl 1.33 auth can-i under a policy file', () => {
  let work: string;
  let close: () => Promise<void>;
  let url: string;
  let caPem: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-e2e-can-i-'));
    // kubectl sends a bearer token only over TLS
    const pki = await createTestPki(work);
    caPem = pki.ca.cert.toString();
    writeFileSync(join(work, 'tokens.csv'), 't-dev,dev,uid-dev,"devs"\nt-viewer,viewer,uid-viewer\n');
    writeFileSync(
      join(work, 'policy.json'),
      JSON.stringify({
        rules: [
          { groups: ['devs'], verbs: ['get', 'list', 'create'], resources: ['pods', 'pods/exec'] },
          { users: ['viewer'], verbs: ['get', 'list'], resources: ['pods'] },
        ],
      }),
    );
    const cluster = await startDevCluster({
      tls: { cert: pki.server.cert, key: pki.server.key },
      tokenAuthFile: join(work, 'tokens.csv'),
      authorizationPolicyFile: join(work, 'policy.json'),
    });
    url = cluster.url;
    close = () => cluster.close();
  });
  afterAll(async () => {
    await close?.();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it.each([
    ['t-dev', 'yes', 0],
    ['t-viewer', 'no', 1],
  ])('%s: can-i create pods/exec → %s', async (token, answer, code) => {
    const kubeconfig = join(work, `kubeconfig-${token}`);
    writeKubeconfig(kubeconfig, { server: url, name: 'can-i', token, caPem });
    const r = await runKubectl(findKubectl('1.33'), ['auth', 'can-i', 'create', 'pods/exec'], { kubeconfig, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(code);
    expect(r.stdout.toString()).toBe(`${answer}\n`);
  });
});
