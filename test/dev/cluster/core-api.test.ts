import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';

let cluster: DevCluster;
beforeAll(async () => {
  cluster = await startDevCluster({ pods: ['extra'] });
});
afterAll(async () => {
  await cluster.close();
});

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(cluster.url + path, {
    method,
    headers: { ...headers, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { code: res.status, type: res.headers.get('content-type'), json: (await res.json()) as any };
}

/** Open a watch and collect its events line by line. */
function openWatch(path: string) {
  const events: any[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  let buf = '';
  const req = request(cluster.url + path);
  req.on('response', (res) => {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        events.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
      }
      for (const w of waiters.filter((w) => events.length >= w.n)) w.resolve();
    });
  });
  req.on('error', () => undefined);
  req.end();
  return {
    events,
    until: (n: number) =>
      events.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve })),
    close: () => req.destroy(),
  };
}

describe('discovery', () => {
  it('answers /version', async () => {
    const r = await call('GET', '/version');
    expect(r.code).toBe(200);
    expect(r.type).toBe('application/json');
    expect(r.json).toMatchObject({ major: '1', minor: '36', gitVersion: 'v1.36.0' });
  });
  it('answers /api and /apis in the legacy form even when aggregated discovery is asked for', async () => {
    const accept = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json';
    const api = await call('GET', '/api', undefined, { Accept: accept });
    expect(api.type).toBe('application/json');
    expect(api.json).toMatchObject({ kind: 'APIVersions', versions: ['v1'] });
    const apis = await call('GET', '/apis', undefined, { Accept: accept });
    expect(apis.json.kind).toBe('APIGroupList');
    // without token authentication too: authentication.k8s.io has SelfSubjectReview (TokenReview needs the token file)
    expect(apis.json.groups.map((g: any) => g.name)).toEqual(['authentication.k8s.io', 'authorization.k8s.io', 'discovery.k8s.io']);
  });
  it('lists the core resources and the streaming subresources', async () => {
    const r = await call('GET', '/api/v1');
    expect(r.json.kind).toBe('APIResourceList');
    const byName = Object.fromEntries(r.json.resources.map((x: any) => [x.name, x]));
    expect(Object.keys(byName).sort()).toEqual(['events', 'namespaces', 'nodes', 'pods', 'pods/attach', 'pods/exec', 'pods/log', 'pods/portforward', 'services']);
    expect(byName.pods.verbs).toEqual(expect.arrayContaining(['get', 'list', 'watch', 'create', 'delete']));
    expect(byName['pods/exec'].verbs).toEqual(expect.arrayContaining(['create', 'get']));
  });
  it('answers unknown paths with a 404 Status', async () => {
    const r = await call('GET', '/apis/apps/v1');
    expect(r.code).toBe(404);
    expect(r.json).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 });
  });
});

describe('namespaces and pods', () => {
  it('lists namespaces and gets one', async () => {
    const list = await call('GET', '/api/v1/namespaces');
    expect(list.json.items.map((n: any) => n.metadata.name)).toContain('default');
    const one = await call('GET', '/api/v1/namespaces/default');
    expect(one.json).toMatchObject({ kind: 'Namespace', metadata: { name: 'default' }, status: { phase: 'Active' } });
    expect((await call('GET', '/api/v1/namespaces/nope')).code).toBe(404);
  });

  it('has the demo pod, running and ready', async () => {
    // Without a Table in Accept, the object itself (the Table answer is in printers.test.ts).
    const r = await call('GET', '/api/v1/namespaces/default/pods/demo', undefined, { Accept: 'application/json' });
    expect(r.code).toBe(200);
    expect(r.type).toBe('application/json');
    const pod = r.json;
    expect(pod).toMatchObject({
      kind: 'Pod',
      apiVersion: 'v1',
      metadata: { name: 'demo', namespace: 'default' },
      spec: { containers: [{ name: 'demo', stdin: true, tty: false }] },
      status: { phase: 'Running', podIP: '127.0.0.1' },
    });
    expect(pod.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(pod.metadata.resourceVersion).toMatch(/^\d+$/);
    expect(pod.metadata.creationTimestamp).toMatch(/Z$/);
    expect(pod.status.conditions).toContainEqual(expect.objectContaining({ type: 'Ready', status: 'True' }));
    expect(pod.status.containerStatuses[0]).toMatchObject({
      name: 'demo',
      ready: true,
      started: true,
      restartCount: 0,
      state: { running: {} },
    });
  });

  it('lists pods cluster-wide and per namespace, with field selectors', async () => {
    const all = await call('GET', '/api/v1/pods');
    expect(all.json.kind).toBe('PodList');
    expect(all.json.items.map((p: any) => p.metadata.name)).toEqual(expect.arrayContaining(['demo', 'extra']));
    const ns = await call('GET', '/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Ddemo&limit=500');
    expect(ns.json.items.map((p: any) => p.metadata.name)).toEqual(['demo']);
    expect((await call('GET', '/api/v1/namespaces/kube-system/pods')).json.items).toEqual([]);
  });

  it('answers a missing pod with the apiserver NotFound Status', async () => {
    const r = await call('GET', '/api/v1/namespaces/default/pods/x');
    expect(r.code).toBe(404);
    expect(r.json).toMatchObject({ kind: 'Status', message: 'pods "x" not found', reason: 'NotFound', code: 404 });
  });

  it('wants an upgrade on the streaming subresources', async () => {
    const r = await call('POST', '/api/v1/namespaces/default/pods/demo/exec?command=ls&stdout=1');
    expect(r.code).toBe(400);
    expect(r.json.message).toBe('Upgrade request required');
    expect((await call('GET', '/api/v1/namespaces/default/pods/x/exec')).code).toBe(404);
  });

  it('creates and deletes pods, refusing duplicates and bad bodies', async () => {
    const body = { metadata: { name: 'made' }, spec: { containers: [{ name: 'main', image: 'busybox', stdin: true }] } };
    const made = await call('POST', '/api/v1/namespaces/default/pods', body);
    expect(made.code).toBe(201);
    expect(made.json).toMatchObject({ kind: 'Pod', metadata: { name: 'made' }, status: { phase: 'Running' } });
    expect(cluster.pods.get('default', 'made')?.mains.get('main')?.pid).toBeGreaterThan(0);
    expect((await call('POST', '/api/v1/namespaces/default/pods', body)).code).toBe(409);
    expect((await call('POST', '/api/v1/namespaces/default/pods', { metadata: { name: 'x' }, spec: {} })).code).toBe(422);
    expect((await call('POST', '/api/v1/namespaces/default/pods', { metadata: { name: 'Bad_Name' }, spec: body.spec })).code).toBe(422);
    expect((await call('POST', '/api/v1/namespaces/nope/pods', body)).code).toBe(404);
    const del = await call('DELETE', '/api/v1/namespaces/default/pods/made');
    expect(del.code).toBe(200);
    expect((await call('GET', '/api/v1/namespaces/default/pods/made')).code).toBe(404);
    expect((await call('DELETE', '/api/v1/namespaces/default/pods/made')).code).toBe(404);
  });
});

describe('watch', () => {
  it('starts with ADDED for existing pods, then streams create and delete', async () => {
    const w = openWatch('/api/v1/namespaces/default/pods?watch=true');
    try {
      await w.until(2);
      expect(w.events.slice(0, 2).map((e) => [e.type, e.object.metadata.name])).toEqual([
        ['ADDED', 'demo'],
        ['ADDED', 'extra'],
      ]);
      expect(w.events[0].object.kind).toBe('Pod');
      // stdin: true keeps /bin/sh running, so no status change (MODIFIED) comes between.
      const body = { metadata: { name: 'watched' }, spec: { containers: [{ name: 'c', image: 'i', stdin: true }] } };
      expect((await call('POST', '/api/v1/namespaces/default/pods', body)).code).toBe(201);
      await w.until(3);
      expect([w.events[2].type, w.events[2].object.metadata.name]).toEqual(['ADDED', 'watched']);
      expect((await call('DELETE', '/api/v1/namespaces/default/pods/watched')).code).toBe(200);
      await w.until(4);
      expect([w.events[3].type, w.events[3].object.metadata.name]).toEqual(['DELETED', 'watched']);
    } finally {
      w.close();
    }
  });

  it('resumes after a list resourceVersion without replaying older pods', async () => {
    const list = await call('GET', '/api/v1/namespaces/default/pods');
    const w = openWatch(`/api/v1/namespaces/default/pods?watch=1&resourceVersion=${list.json.metadata.resourceVersion}`);
    try {
      const body = { metadata: { name: 'later' }, spec: { containers: [{ name: 'c', stdin: true }] } };
      expect((await call('POST', '/api/v1/namespaces/default/pods', body)).code).toBe(201);
      await w.until(1);
      expect(w.events.map((e) => [e.type, e.object.metadata.name])).toEqual([['ADDED', 'later']]);
    } finally {
      w.close();
      await call('DELETE', '/api/v1/namespaces/default/pods/later');
    }
  });
});

describe('close', () => {
  it('resolves with an open watch, an open attach and a running exec, and kills the processes', async () => {
    const c = await startDevCluster({});
    const watch = request(c.url + '/api/v1/pods?watch=true');
    const watching = new Promise<void>((resolve) => watch.on('response', (res) => res.once('data', () => resolve())));
    watch.on('error', () => undefined);
    watch.end();
    await watching;
    const { WebSocket } = await import('ws');
    const open = (path: string) =>
      new Promise<InstanceType<typeof WebSocket>>((resolve, reject) => {
        const ws = new WebSocket(c.url.replace('http', 'ws') + path, 'v4.channel.k8s.io');
        ws.on('error', () => undefined);
        ws.once('open', () => resolve(ws));
        ws.once('unexpected-response', () => reject(new Error('refused')));
      });
    const attach = await open('/api/v1/namespaces/default/pods/demo/attach?stdout=1');
    const exec = await open('/api/v1/namespaces/default/pods/demo/exec?stdout=1&command=sleep&command=600');
    const mainPid = c.pods.get('default', 'demo')!.mains.get('demo')!.pid!;
    await c.close();
    expect(attach.readyState === attach.CLOSED || attach.readyState === attach.CLOSING).toBe(true);
    expect(exec.readyState === exec.CLOSED || exec.readyState === exec.CLOSING).toBe(true);
    expect(() => process.kill(mainPid, 0)).toThrow();
    const { existsSync } = await import('node:fs');
    expect(existsSync(c.dataDir)).toBe(false);
  });
});
