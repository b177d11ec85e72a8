/**
 * Server-side printing: the Table shape against recorded kube-apiserver answers (fixtures/), the
 * printers' cells as printers.go computes them, content negotiation and includeObject.
 */
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import {
  ENDPOINT_SLICE_PRINTER,
  EVENT_PRINTER,
  NAMESPACE_PRINTER,
  NODE_PRINTER,
  POD_PRINTER,
  SERVICE_PRINTER,
} from '../../../dev/cluster/printers.js';
import { humanDuration, wantsTable } from '../../../src/meta-table.js';

const fixture = (name: string): any => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
/** The Accept header kubectl sends for `kubectl get` (human-readable output). */
const KUBECTL_TABLE_ACCEPT = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';
const names = (table: any): string[] => table.columnDefinitions.map((c: any) => c.name);

let cluster: DevCluster;
beforeAll(async () => {
  cluster = await startDevCluster({
    services: [{ namespace: 'kube-system', name: 'metrics-server', ports: [{ name: 'https', port: 443, targetPort: 4443 }], endpoints: [{ address: '127.0.0.1' }] }],
  });
});
afterAll(async () => {
  await cluster.close();
});

async function get(path: string, accept = KUBECTL_TABLE_ACCEPT): Promise<{ code: number; json: any }> {
  const res = await fetch(cluster.url + path, { headers: { Accept: accept } });
  return { code: res.status, json: await res.json() };
}

describe('content negotiation', () => {
  it.each([
    [KUBECTL_TABLE_ACCEPT, true],
    ['application/json;as=Table;v=v1;g=meta.k8s.io', true],
    ['application/json; as=Table; g=meta.k8s.io; v=v1', true],
    ['application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json', false],
    ['application/json', false],
    ['application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json', false],
    ['application/vnd.kubernetes.protobuf,application/json;as=Table;v=v1;g=meta.k8s.io', true],
    ['*/*', false],
    [undefined, false],
  ])('%s → Table: %s', (accept, table) => {
    expect(wantsTable(accept)).toBe(table);
  });
});

describe('humanDuration (apimachinery duration.HumanDuration)', () => {
  it.each([
    [-5_000, '<invalid>'],
    [-1_000, '0s'],
    [0, '0s'],
    [119_000, '119s'],
    [120_000, '2m'],
    [200_000, '3m20s'],
    [12 * 60_000, '12m'],
    [179 * 60_000, '179m'],
    [3 * 3600_000, '3h'],
    [5 * 3600_000 + 3 * 60_000, '5h3m'],
    [36 * 3600_000, '36h'],
    [(3 * 24 + 4) * 3600_000, '3d4h'],
    [40 * 24 * 3600_000, '40d'],
    [(2 * 365 + 30) * 24 * 3600_000, '2y30d'],
    [9 * 365 * 24 * 3600_000, '9y'],
  ])('%d ms → %s', (ms, text) => {
    expect(humanDuration(ms)).toBe(text);
  });
});

describe('pods', () => {
  it('columnDefinitions are exactly the recorded kube-apiserver ones', async () => {
    const r = await get('/api/v1/namespaces/default/pods?limit=500');
    expect(r.code).toBe(200);
    const golden = fixture('table-pods-empty.json');
    expect(r.json.columnDefinitions).toEqual(golden.columnDefinitions);
    expect(Object.keys(r.json).sort()).toEqual(Object.keys(golden).sort());
    expect(r.json).toMatchObject({ kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: expect.stringMatching(/^\d+$/) } });
  });

  it('a row per pod: NAME READY STATUS RESTARTS AGE | IP NODE NOMINATED NODE READINESS GATES, with PartialObjectMetadata', async () => {
    const r = await get('/api/v1/namespaces/default/pods');
    expect(r.json.rows).toHaveLength(1);
    const [row] = r.json.rows;
    expect(row.cells).toEqual(['demo', '1/1', 'Running', '0', expect.stringMatching(/^\d+s$/), '127.0.0.1', 'dev-node', '<none>', '<none>']);
    expect(Object.keys(row).sort()).toEqual(['cells', 'object']);
    expect(row.object).toEqual({
      kind: 'PartialObjectMetadata',
      apiVersion: 'meta.k8s.io/v1',
      metadata: expect.objectContaining({ name: 'demo', namespace: 'default', uid: expect.any(String), resourceVersion: expect.any(String) }),
    });
  });

  it('a single get is a one-row Table too (kubectl get pod demo)', async () => {
    const r = await get('/api/v1/namespaces/default/pods/demo');
    expect(r.json.kind).toBe('Table');
    expect(r.json.rows.map((x: any) => x.cells[0])).toEqual(['demo']);
  });

  it('includeObject=Object carries the Pod, None nothing, anything else is a 400 Status', async () => {
    const full = await get('/api/v1/namespaces/default/pods?includeObject=Object');
    expect(full.json.rows[0].object).toMatchObject({ kind: 'Pod', apiVersion: 'v1', metadata: { name: 'demo' }, status: { phase: 'Running' } });
    const none = await get('/api/v1/namespaces/default/pods?includeObject=None');
    expect(Object.keys(none.json.rows[0])).toEqual(['cells']);
    const bad = await get('/api/v1/namespaces/default/pods?includeObject=Everything');
    expect(bad.code).toBe(400);
    expect(bad.json).toMatchObject({ kind: 'Status', reason: 'BadRequest', message: 'unrecognized includeObject value: "Everything"' });
  });

  it('watch (kubectl get pods -w): one-row Tables, column definitions in the first event only', async () => {
    const events: any[] = [];
    let wake: (() => void) | undefined;
    let buf = '';
    const req = request(`${cluster.url}/api/v1/namespaces/default/pods?watch=true`, { headers: { Accept: KUBECTL_TABLE_ACCEPT } });
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
    const until = (n: number): Promise<void> =>
      events.length >= n ? Promise.resolve() : new Promise((r) => (wake = () => events.length >= n && r()));
    await until(1);
    cluster.pods.create({ name: 'watched' });
    await until(2);
    req.destroy();
    cluster.pods.delete('default', 'watched');
    expect(events.map((e) => `${e.type} ${e.object.kind} ${e.object.rows[0].cells[0]}`)).toEqual(['ADDED Table demo', 'ADDED Table watched']);
    expect(events[0].object.columnDefinitions.map((c: any) => c.name)).toEqual(['Name', 'Ready', 'Status', 'Restarts', 'Age', 'IP', 'Node', 'Nominated Node', 'Readiness Gates']);
    expect(events[1].object.columnDefinitions).toBeNull();
    expect(events[1].object.rows[0].object).toMatchObject({ kind: 'PartialObjectMetadata', metadata: { name: 'watched' } });
  });

  it('plain JSON without the Table media type', async () => {
    const r = await get('/api/v1/namespaces/default/pods', 'application/json');
    expect(r.json.kind).toBe('PodList');
  });

  it('printers.go cells: restarts with the last restart, waiting reason, NotReady', () => {
    const now = Date.parse('2026-01-01T12:00:00Z');
    const pod = {
      metadata: { name: 'web', creationTimestamp: '2026-01-01T10:00:00Z' },
      spec: { containers: [{ name: 'a' }, { name: 'b' }], nodeName: 'n1' },
      status: {
        phase: 'Running',
        podIP: '10.0.0.7',
        conditions: [{ type: 'Ready', status: 'False' }],
        containerStatuses: [
          { name: 'a', ready: true, restartCount: 2, state: { running: {} }, lastState: { terminated: { finishedAt: '2026-01-01T11:55:00Z' } } },
          { name: 'b', ready: false, restartCount: 1, state: { running: {} } },
        ],
      },
    };
    expect(POD_PRINTER.cells(pod, now)).toEqual(['web', '1/2', 'NotReady', '3 (5m ago)', '120m', '10.0.0.7', 'n1', '<none>', '<none>']);
    const waiting = { ...pod, status: { ...pod.status, containerStatuses: [{ name: 'a', restartCount: 4, state: { waiting: { reason: 'CrashLoopBackOff' } } }] } };
    expect(POD_PRINTER.cells(waiting, now).slice(1, 4)).toEqual(['0/2', 'CrashLoopBackOff', '4']);
  });
});

describe('nodes', () => {
  it('columnDefinitions are exactly the recorded ones; dev-node is Ready', async () => {
    const r = await get('/api/v1/nodes?limit=500');
    const golden = fixture('table-nodes.json');
    expect(r.json.columnDefinitions).toEqual(golden.columnDefinitions);
    expect(r.json.rows).toHaveLength(1);
    const cells = r.json.rows[0].cells;
    expect(cells.slice(0, 3)).toEqual(['dev-node', 'Ready', '<none>']);
    expect(cells[4]).toBe('v1.36.0');
    expect(cells.slice(5, 7)).toEqual(['127.0.0.1', '<none>']);
    expect(cells).toHaveLength(golden.rows[0].cells.length);
    expect(Object.keys(r.json.rows[0].object)).toEqual(Object.keys(golden.rows[0].object));
  });

  it('the recorded node, printed from its object, gives the recorded cells', () => {
    const golden = fixture('table-nodes.json');
    const node = {
      metadata: golden.rows[0].object.metadata,
      spec: {},
      status: {
        conditions: [{ type: 'Ready', status: 'True' }],
        addresses: [
          { type: 'InternalIP', address: '192.168.139.2' },
          { type: 'Hostname', address: 'orbstack' },
        ],
        nodeInfo: { kubeletVersion: 'v1.33.5+orb1', osImage: 'OrbStack', kernelVersion: '6.17.8-orbstack-00308-g8f9c941121b1', containerRuntimeVersion: 'docker://28.5.2' },
      },
    };
    expect(NODE_PRINTER.cells(node, Date.parse('2026-03-24T20:58:13Z'))).toEqual(golden.rows[0].cells);
  });
});

describe('namespaces, services, endpointslices, events', () => {
  it('namespaces: NAME STATUS AGE', async () => {
    const r = await get('/api/v1/namespaces');
    expect(names(r.json)).toEqual(['Name', 'Status', 'Age']);
    expect(r.json.rows.map((x: any) => x.cells.slice(0, 2))).toEqual([
      ['default', 'Active'],
      ['kube-public', 'Active'],
      ['kube-system', 'Active'],
    ]);
    expect(NAMESPACE_PRINTER.columns.map((c) => c.priority)).toEqual([0, 0, 0]);
  });

  it('services: NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE (+ SELECTOR wide)', async () => {
    const r = await get('/api/v1/namespaces/kube-system/services');
    expect(names(r.json)).toEqual(['Name', 'Type', 'Cluster-IP', 'External-IP', 'Port(s)', 'Age', 'Selector']);
    expect(SERVICE_PRINTER.columns.map((c) => c.priority)).toEqual([0, 0, 0, 0, 0, 0, 1]);
    expect(r.json.rows[0].cells).toEqual(['metrics-server', 'ClusterIP', expect.stringMatching(/^10\.96\.\d+\.\d+$/), '<none>', '443/TCP', expect.any(String), '<none>']);
    const np = { metadata: { name: 'np' }, spec: { type: 'NodePort', clusterIP: '10.96.0.9', ports: [{ port: 80, nodePort: 30080, protocol: 'TCP' }, { port: 53, protocol: 'UDP' }], selector: { app: 'x' } } };
    expect(SERVICE_PRINTER.cells(np).slice(0, 5)).toEqual(['np', 'NodePort', '10.96.0.9', '<none>', '80:30080/TCP,53/UDP']);
    expect(SERVICE_PRINTER.cells(np)[6]).toBe('app=x');
  });

  it('endpointslices: NAME ADDRESSTYPE PORTS ENDPOINTS AGE', async () => {
    const r = await get('/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices');
    expect(names(r.json)).toEqual(['Name', 'AddressType', 'Ports', 'Endpoints', 'Age']);
    expect(r.json.rows[0].cells.slice(0, 4)).toEqual([expect.stringMatching(/^metrics-server-[0-9a-f]{5}$/), 'IPv4', '4443', '127.0.0.1']);
    const many = { metadata: { name: 's' }, addressType: 'IPv4', ports: [], endpoints: [1, 2, 3, 4, 5].map((i) => ({ addresses: [`10.0.0.${i}`] })) };
    expect(ENDPOINT_SLICE_PRINTER.cells(many).slice(2, 4)).toEqual(['<unset>', '10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...']);
  });

  it('events: LAST SEEN TYPE REASON OBJECT MESSAGE (+ SUBOBJECT SOURCE FIRST SEEN COUNT NAME wide)', async () => {
    const r = await get('/api/v1/namespaces/default/events');
    expect(names(r.json)).toEqual(['Last Seen', 'Type', 'Reason', 'Object', 'Subobject', 'Source', 'Message', 'First Seen', 'Count', 'Name']);
    expect(EVENT_PRINTER.columns.map((c) => c.priority)).toEqual([0, 0, 0, 0, 1, 1, 0, 1, 1, 1]);
    const started = r.json.rows.find((x: any) => x.cells[2] === 'Started');
    expect(started.cells).toEqual([
      expect.any(String),
      'Normal',
      'Started',
      'pod/demo',
      'spec.containers{demo}',
      'kubelet, dev-node',
      'Started container demo',
      expect.any(String),
      1,
      expect.stringMatching(/^demo\.[0-9a-f]+$/),
    ]);
  });
});
