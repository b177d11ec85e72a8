/**
 * The demo's "small real cluster" answers over HTTP and @kubernetes/client-node: the node without a
 * kubelet listener, Services and EndpointSlices (seeded and created), Events for pod start and
 * failed execs, self reviews (JSON and kubectl's protobuf, with and without a policy) and logs -f.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { CoreV1Api, DiscoveryV1Api, KubeConfig, makeInformer, type V1EndpointSlice } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { decodeSelfReview } from '../../../dev/cluster/protobuf-review.js';
import { runAttach, runExec } from '../../../dev/cluster/runtime.js';

/** What kubectl 1.33 sent for `auth can-i create pods/exec` (captured on the wire). */
const KUBECTL_SSAR_PROTOBUF = Buffer.from(
  '6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a65637441636365737352657669657712430a100a0012001a0022002a0032003800420012250a230a0764656661756c7412066372656174651a0022002a04706f64733204657865633a001a08080012001a0020001a002200',
  'hex',
);
/** What kubectl 1.33 sent for `auth can-i --list`. */
const KUBECTL_SSRR_PROTOBUF = Buffer.from(
  '6b3873000a310a17617574686f72697a6174696f6e2e6b38732e696f2f7631121653656c665375626a65637452756c657352657669657712230a100a0012001a0022002a0032003800420012090a0764656661756c741a04180022001a002200',
  'hex',
);

const METRICS_SERVER = {
  namespace: 'kube-system',
  name: 'metrics-server',
  labels: { 'k8s-app': 'metrics-server' },
  ports: [{ name: 'https', port: 443, targetPort: 10250 }],
  endpoints: [{ address: '127.0.0.1' }],
};

let cluster: DevCluster;
beforeAll(async () => {
  cluster = await startDevCluster({ services: [METRICS_SERVER] });
});
afterAll(async () => {
  await cluster.close();
});

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(cluster.url + path, {
    method,
    headers: { ...headers, ...(body !== undefined && !Buffer.isBuffer(body) ? { 'Content-Type': 'application/json' } : {}) },
    body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });
  return { code: res.status, json: (await res.json()) as any };
}

function kubeConfig(url: string, token?: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'dev', server: url, skipTLSVerify: true }],
    users: [{ name: 'dev', ...(token ? { token } : {}) }],
    contexts: [{ name: 'dev', cluster: 'dev', user: 'dev' }],
    currentContext: 'dev',
  });
  return kc;
}

describe('the node', () => {
  it('exists without a kubelet listener: Ready, with capacity and allocatable', async () => {
    const node = await kubeConfig(cluster.url).makeApiClient(CoreV1Api).readNode({ name: 'dev-node' });
    expect(node.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    for (const r of [node.status?.capacity, node.status?.allocatable]) {
      expect(Object.keys(r ?? {}).sort()).toEqual(['cpu', 'memory', 'pods']);
      expect(r?.cpu).toMatch(/^\d+$/);
      expect(r?.memory).toMatch(/^\d+Ki$/);
      expect(r?.pods).toBe('110');
    }
    expect(node.status?.nodeInfo).toMatchObject({ kubeletVersion: 'v1.36.0', kubeProxyVersion: 'v1.36.0', operatingSystem: 'linux' });
    expect(node.status?.nodeInfo?.kernelVersion).not.toBe('');
  });
});

describe('node watch', () => {
  it('ADDED dev-node, then the stream stays open (timeoutSeconds ends it)', async () => {
    const res = await fetch(`${cluster.url}/api/v1/nodes?watch=true&timeoutSeconds=1`);
    const lines = (await res.text()).trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual(['ADDED dev-node']);
    const resumed = await fetch(`${cluster.url}/api/v1/nodes?watch=true&timeoutSeconds=1&resourceVersion=1`);
    expect(await resumed.text()).toBe('');
  });
});

describe('services and endpointslices', () => {
  it('default/kubernetes points at the API server, as in every cluster', async () => {
    const svc = (await call('GET', '/api/v1/namespaces/default/services/kubernetes')).json;
    expect(svc).toMatchObject({ metadata: { labels: { component: 'apiserver', provider: 'kubernetes' } }, spec: { clusterIP: '10.96.0.1', ports: [{ name: 'https', port: 443, targetPort: cluster.port }] } });
    const slice = (await call('GET', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes')).json;
    expect(slice).toMatchObject({ addressType: 'IPv4', endpoints: [{ addresses: ['127.0.0.1'] }], ports: [{ name: 'https', port: cluster.port }] });
  });

  it('the seeded metrics-server Service and its EndpointSlice, as the aggregation layer reads them', async () => {
    const kc = kubeConfig(cluster.url);
    const svc = await kc.makeApiClient(CoreV1Api).readNamespacedService({ namespace: 'kube-system', name: 'metrics-server' });
    expect(svc.spec).toMatchObject({ type: 'ClusterIP', ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: 10250 }] });
    expect(svc.spec?.clusterIP).toMatch(/^10\.96\./);
    const slices = await kc
      .makeApiClient(DiscoveryV1Api)
      .listNamespacedEndpointSlice({ namespace: 'kube-system', labelSelector: 'kubernetes.io/service-name=metrics-server' });
    expect(slices.items).toHaveLength(1);
    const [slice] = slices.items;
    expect(slice!.addressType).toBe('IPv4');
    expect(slice!.metadata?.labels).toMatchObject({ 'kubernetes.io/service-name': 'metrics-server' });
    expect(slice!.endpoints).toEqual([{ addresses: ['127.0.0.1'], conditions: { ready: true, serving: true, terminating: false } }]);
    expect(slice!.ports).toEqual([{ name: 'https', port: 10250, protocol: 'TCP' }]);
    const other = await kc.makeApiClient(DiscoveryV1Api).listNamespacedEndpointSlice({ namespace: 'kube-system', labelSelector: 'kubernetes.io/service-name=other' });
    expect(other.items).toEqual([]);
  });

  it('a client-node informer (list, then watch) sees the slice and a new one', async () => {
    const kc = kubeConfig(cluster.url);
    const api = kc.makeApiClient(DiscoveryV1Api);
    const informer = makeInformer<V1EndpointSlice>(kc, '/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices', () =>
      api.listNamespacedEndpointSlice({ namespace: 'kube-system' }),
    );
    const seen: string[] = [];
    let wake!: () => void;
    const second = new Promise<void>((r) => (wake = r));
    informer.on('add', (s) => {
      seen.push(s.metadata!.name!);
      if (seen.length === 2) wake();
    });
    await informer.start();
    const body = { metadata: { name: 'late' }, addressType: 'IPv4', endpoints: [{ addresses: ['127.0.0.9'] }] };
    expect((await call('POST', '/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices', body)).code).toBe(201);
    await second;
    await informer.stop();
    expect(seen[0]).toMatch(/^metrics-server-/);
    expect(seen[1]).toBe('late');
    await call('DELETE', '/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/late');
  });

  it('create, get, list across namespaces, conflict, delete', async () => {
    const made = await call('POST', '/api/v1/namespaces/default/services', { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' }, spec: { ports: [{ port: 80 }], selector: { app: 'web' } } });
    expect(made.code).toBe(201);
    expect(made.json).toMatchObject({ kind: 'Service', metadata: { name: 'web', namespace: 'default' }, spec: { type: 'ClusterIP', ports: [{ port: 80, protocol: 'TCP', targetPort: 80 }] } });
    expect((await call('GET', '/api/v1/namespaces/default/services/web')).json.metadata.uid).toBe(made.json.metadata.uid);
    const all = await call('GET', '/api/v1/services');
    expect(all.json.kind).toBe('ServiceList');
    expect(all.json.items.map((s: any) => `${s.metadata.namespace}/${s.metadata.name}`)).toEqual(['default/kubernetes', 'default/web', 'kube-system/metrics-server']);
    const again = await call('POST', '/api/v1/namespaces/default/services', { metadata: { name: 'web' }, spec: { ports: [{ port: 80 }] } });
    expect(again.code).toBe(409);
    expect(again.json).toMatchObject({ kind: 'Status', reason: 'AlreadyExists', message: 'services "web" already exists' });
    const gone = await call('DELETE', '/api/v1/namespaces/default/services/web');
    expect(gone.json).toMatchObject({ kind: 'Service', metadata: { name: 'web' } });
    expect((await call('GET', '/api/v1/namespaces/default/services/web')).json).toMatchObject({ code: 404, message: 'services "web" not found' });
  });

  it('refuses bad bodies with the apiserver Status and unknown namespaces with 404', async () => {
    const noPort = await call('POST', '/api/v1/namespaces/default/services', { metadata: { name: 'x' }, spec: { ports: [{ port: 0 }] } });
    expect(noPort.code).toBe(422);
    expect(noPort.json.message).toBe('Service "x" is invalid: spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive');
    const slice = await call('POST', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', { metadata: { name: 's' }, endpoints: [] });
    expect(slice.code).toBe(422);
    expect(slice.json.message).toBe('EndpointSlice.discovery.k8s.io "s" is invalid: addressType: Required value');
    expect((await call('GET', '/api/v1/namespaces/nope/services')).json).toMatchObject({ code: 404, message: 'namespaces "nope" not found' });
  });

  it('an EndpointSlice created by a client is listed and deleted with a Success Status', async () => {
    const body = { metadata: { name: 'manual', labels: { 'kubernetes.io/service-name': 'manual' } }, addressType: 'IPv4', endpoints: [{ addresses: ['127.0.0.2'] }], ports: [{ name: 'p', port: 8080 }] };
    expect((await call('POST', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', body)).code).toBe(201);
    const list = await call('GET', '/apis/discovery.k8s.io/v1/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dmanual');
    expect(list.json).toMatchObject({ kind: 'EndpointSliceList', apiVersion: 'discovery.k8s.io/v1', items: [{ metadata: { name: 'manual' }, ports: [{ name: 'p', port: 8080, protocol: 'TCP' }] }] });
    const gone = await call('DELETE', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/manual');
    expect(gone.json).toMatchObject({ kind: 'Status', status: 'Success', details: { name: 'manual', group: 'discovery.k8s.io', kind: 'endpointslices' } });
  });

  it('watch: the current slices, then what changes (resumable from a list resourceVersion)', async () => {
    const list = await call('GET', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices');
    const events: any[] = [];
    let wake: (() => void) | undefined;
    let buf = '';
    const req = request(`${cluster.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?watch=true&resourceVersion=${list.json.metadata.resourceVersion}&labelSelector=app%3Dw`);
    req.on('response', (res) => {
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        buf += c;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          events.push(JSON.parse(buf.slice(0, nl)));
          buf = buf.slice(nl + 1);
        }
        wake?.();
      });
    });
    req.end();
    const until = (n: number): Promise<void> => (events.length >= n ? Promise.resolve() : new Promise((r) => (wake = () => events.length >= n && r())));
    const body = { metadata: { name: 'w', labels: { app: 'w' } }, addressType: 'IPv4', endpoints: [{ addresses: ['127.0.0.3'] }] };
    await call('POST', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', { ...body, metadata: { name: 'unlabelled' } });
    await call('POST', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', body);
    await call('DELETE', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/w');
    await until(2);
    req.destroy();
    expect(events.map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual(['ADDED w', 'DELETED w']);
    expect(events[0].object).toMatchObject({ kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1' });
    const old = await fetch(`${cluster.url}/api/v1/events?watch=true&resourceVersion=x`);
    expect(await old.text()).toContain('"type":"ERROR"');
  });

  it('discovery lists services and discovery.k8s.io/v1 endpointslices', async () => {
    const core = await call('GET', '/api/v1');
    expect(core.json.resources.find((r: any) => r.name === 'services')).toMatchObject({ kind: 'Service', namespaced: true, shortNames: ['svc'] });
    const group = await call('GET', '/apis/discovery.k8s.io');
    expect(group.json).toMatchObject({ kind: 'APIGroup', name: 'discovery.k8s.io', preferredVersion: { groupVersion: 'discovery.k8s.io/v1' } });
    const v1 = await call('GET', '/apis/discovery.k8s.io/v1');
    expect(v1.json).toMatchObject({ kind: 'APIResourceList', groupVersion: 'discovery.k8s.io/v1', resources: [{ name: 'endpointslices', kind: 'EndpointSlice', namespaced: true }] });
  });
});

describe('events', () => {
  it('pod start: Scheduled, Pulled, Created, Started, in order, about the pod', async () => {
    const list = await call('GET', '/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Ddemo');
    const pod = cluster.pods.get('default', 'demo')!;
    const firstFour = list.json.items.slice(0, 4);
    expect(firstFour.map((e: any) => e.reason)).toEqual(['Scheduled', 'Pulled', 'Created', 'Started']);
    expect(firstFour[0]).toMatchObject({
      type: 'Normal',
      message: 'Successfully assigned default/demo to dev-node',
      source: { component: 'default-scheduler' },
      involvedObject: { kind: 'Pod', namespace: 'default', name: 'demo', uid: pod.uid, apiVersion: 'v1' },
      count: 1,
    });
    expect(firstFour[3]).toMatchObject({ message: 'Started container demo', source: { component: 'kubelet', host: 'dev-node' }, involvedObject: { fieldPath: 'spec.containers{demo}' } });
    expect(Object.keys(firstFour[3]).sort()).toEqual(
      ['count', 'eventTime', 'firstTimestamp', 'involvedObject', 'lastTimestamp', 'message', 'metadata', 'reason', 'reportingComponent', 'reportingInstance', 'source', 'type'].sort(),
    );
  });

  it('an exec of a missing command is a Warning; the next restart counts on the same Started event', async () => {
    const pod = cluster.pods.get('default', 'demo')!;
    await expect(runExec({ pod, container: 'demo', command: ['no-such-command-16'] }, { tty: false }, new AbortController().signal)).rejects.toThrow(/not found/);
    const warnings = (await call('GET', '/api/v1/namespaces/default/events?fieldSelector=type%3DWarning')).json.items;
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      reason: 'Failed',
      message: 'Exec of ["no-such-command-16"] failed: exec: "no-such-command-16": executable file not found in $PATH',
      involvedObject: { name: 'demo', fieldPath: 'spec.containers{demo}' },
    });

    const main = pod.mains.get('demo')!;
    const restarted = new Promise((r) => main.once('restart', r));
    const stdin = new PassThrough();
    const done = runAttach({ pod, container: 'demo', command: [] }, { stdin, tty: false }, new AbortController().signal);
    stdin.end('exit 0\n');
    await done;
    await restarted;
    const started = (await call('GET', '/api/v1/namespaces/default/events?fieldSelector=reason%3DStarted,involvedObject.name%3Ddemo')).json.items;
    expect(started).toHaveLength(1);
    expect(started[0].count).toBe(2);

    // The pod tells of the restart as a kubelet does: lastState and "RESTARTS 1 (…s ago)".
    const obj = (await call('GET', '/api/v1/namespaces/default/pods/demo')).json;
    expect(obj.status.containerStatuses[0]).toMatchObject({
      restartCount: 1,
      ready: true,
      state: { running: {} },
      lastState: { terminated: { exitCode: 0, reason: 'Completed' } },
    });
    const printed = (await call('GET', '/api/v1/namespaces/default/pods/demo', undefined, { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' })).json;
    expect(printed.rows[0].cells[3]).toMatch(/^1 \(\d+s ago\)$/);
  });
});

describe('self reviews (no authentication: every request may do anything)', () => {
  it('SelfSubjectAccessReview in JSON', async () => {
    const r = await call('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: { namespace: 'default', verb: 'create', resource: 'pods', subresource: 'exec' } },
    });
    expect(r.code).toBe(201);
    expect(r.json).toEqual({
      kind: 'SelfSubjectAccessReview',
      apiVersion: 'authorization.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec: { resourceAttributes: { namespace: 'default', verb: 'create', resource: 'pods', subresource: 'exec' } },
      status: { allowed: true },
    });
  });

  it('kubectl 1.33 protobuf bodies decode to the JSON review', () => {
    expect(decodeSelfReview(KUBECTL_SSAR_PROTOBUF)).toEqual({
      kind: 'SelfSubjectAccessReview',
      apiVersion: 'authorization.k8s.io/v1',
      spec: { resourceAttributes: { namespace: 'default', verb: 'create', resource: 'pods', subresource: 'exec' } },
    });
    expect(decodeSelfReview(KUBECTL_SSRR_PROTOBUF)).toEqual({ kind: 'SelfSubjectRulesReview', apiVersion: 'authorization.k8s.io/v1', spec: { namespace: 'default' } });
    expect(() => decodeSelfReview(Buffer.from('{}'))).toThrow(/magic/);
    expect(() => decodeSelfReview(KUBECTL_SSAR_PROTOBUF.subarray(0, 30))).toThrow(/past the end|truncated/);
  });

  it('answers the protobuf request as JSON; a broken body is a 400 Status', async () => {
    const headers = { 'Content-Type': 'application/vnd.kubernetes.protobuf', Accept: 'application/vnd.kubernetes.protobuf,application/json' };
    const ok = await call('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', KUBECTL_SSAR_PROTOBUF, headers);
    expect(ok.code).toBe(201);
    expect(ok.json.status).toEqual({ allowed: true });
    const rules = await call('POST', '/apis/authorization.k8s.io/v1/selfsubjectrulesreviews', KUBECTL_SSRR_PROTOBUF, headers);
    expect(rules.json.status).toEqual({
      resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }],
      nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
      incomplete: false,
    });
    const bad = await call('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', Buffer.from('k8s\0\x0a\x7f'), headers);
    expect(bad.code).toBe(400);
    expect(bad.json.message).toMatch(/^the request body is not a valid protobuf self review: /);
  });
});

describe('self reviews under a policy file', () => {
  let dir: string;
  let secured: DevCluster;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ksp-ssar-'));
    writeFileSync(join(dir, 'tokens.csv'), 't-alice,alice,uid-alice,"devs"\nt-getter,getter,uid-getter\n');
    writeFileSync(
      join(dir, 'policy.json'),
      JSON.stringify({ rules: [{ groups: ['devs'], verbs: ['get', 'create'], resources: ['pods', 'pods/exec'], namespaces: ['default'] }, { users: ['getter'], verbs: ['get'], resources: ['pods'] }] }),
    );
    secured = await startDevCluster({ tokenAuthFile: join(dir, 'tokens.csv'), authorizationPolicyFile: join(dir, 'policy.json') });
  });
  afterAll(async () => {
    await secured?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const ssar = async (token: string, resourceAttributes: Record<string, string>) => {
    const res = await fetch(`${secured.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ spec: { resourceAttributes } }),
    });
    return { code: res.status, json: (await res.json()) as any };
  };

  it('allowed for the policy, denied otherwise; every user may ask (system:basic-user)', async () => {
    const yes = await ssar('t-alice', { namespace: 'default', verb: 'create', resource: 'pods', subresource: 'exec' });
    expect(yes.code).toBe(201);
    expect(yes.json.status).toEqual({ allowed: true, reason: 'allowed by dev-cluster policy rule 0' });
    const no = await ssar('t-getter', { namespace: 'default', verb: 'create', resource: 'pods', subresource: 'exec' });
    expect(no.code).toBe(201);
    expect(no.json.status).toEqual({ allowed: false });
    const elsewhere = await ssar('t-alice', { namespace: 'other', verb: 'create', resource: 'pods', subresource: 'exec' });
    expect(elsewhere.json.status.allowed).toBe(false);
  });

  it('SelfSubjectRulesReview lists the rules that apply in the namespace', async () => {
    const res = await fetch(`${secured.url}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews`, {
      method: 'POST',
      headers: { Authorization: 'Bearer t-alice', 'Content-Type': 'application/json' },
      body: JSON.stringify({ spec: { namespace: 'default' } }),
    });
    const json = (await res.json()) as any;
    expect(json.status.resourceRules).toEqual([
      { verbs: ['create'], apiGroups: ['authorization.k8s.io'], resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'] },
      { verbs: ['create'], apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'] },
      { verbs: ['get', 'create'], apiGroups: ['*'], resources: ['pods', 'pods/exec'] },
    ]);
    expect(json.status.nonResourceRules).toContainEqual(expect.objectContaining({ verbs: ['get'], nonResourceURLs: expect.arrayContaining(['/api', '/version']) }));
  });
});

describe('logs -f', () => {
  it('follows the main process output until it exits', async () => {
    const pod = cluster.pods.get('default', 'demo')!;
    const main = pod.mains.get('demo')!;
    if (!main.running) await new Promise((r) => main.once('restart', r));
    const chunks: string[] = [];
    let ended!: () => void;
    const end = new Promise<void>((r) => (ended = r));
    let gotHeaders!: () => void;
    const headers = new Promise<void>((r) => (gotHeaders = r));
    const req = request(`${cluster.url}/api/v1/namespaces/default/pods/demo/log?follow=true&tailLines=0`, (res) => {
      expect(res.statusCode).toBe(200);
      gotHeaders();
      res.setEncoding('utf8');
      res.on('data', (c: string) => chunks.push(c));
      res.on('end', () => ended());
    });
    req.end();
    await headers;
    const stdin = new PassThrough();
    const attached = runAttach({ pod, container: 'demo', command: [] }, { stdin, tty: false }, new AbortController().signal);
    stdin.end('echo followed-16; exit 0\n');
    await attached;
    await end;
    expect(chunks.join('')).toBe('followed-16\n');
  });

  it('tailLines and a bad value', async () => {
    const res = await fetch(`${cluster.url}/api/v1/namespaces/default/pods/demo/log?tailLines=1`);
    expect(await res.text()).toBe('followed-16\n');
    const bad = await call('GET', '/api/v1/namespaces/default/pods/demo/log?tailLines=x');
    expect(bad.code).toBe(400);
  });
});
