/**
 * The recorder's viewer reviews name the recording's cluster (issue 31, finding 11): with agents,
 * namespace `default` exists in every cluster, so a SubjectAccessReview that names only the
 * namespace lets a viewer of one cluster's `default` see every cluster's. The recorder (the built
 * CLI, a real process, `--kubeconfig`) reviews viewers with a cluster that has RBAC's matching rules
 * (the dev cluster's token file and policy); a relay in front of it keeps each review's body, so the
 * test asserts on the attributes the recorder sent, and on what each viewer gets.
 *
 * Needs `npm run build`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Registry } from 'prom-client';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../../dev/kubeconfig.js';
import { DirectorySink } from '../../../src/recording/directory-sink.js';
import { RECORDING_API_GROUP, RECORDING_RESOURCE } from '../../../src/recording/recorder-auth.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { newRecordingId } from '../../../src/recording/sink.js';

const CLI = join(resolve(import.meta.dirname, '../../..'), 'bin/kube-stream-proxy.js');

interface ResourceAttributes {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** An HTTP relay to `target` that keeps the body of every SubjectAccessReview it forwards. */
async function startReviewTap(target: string): Promise<{ url: string; reviews: Array<{ user: string; attributes: ResourceAttributes }>; close(): Promise<void> }> {
  const reviews: Array<{ user: string; attributes: ResourceAttributes }> = [];
  const upstream = new URL(target);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url?.startsWith('/apis/authorization.k8s.io/v1/subjectaccessreviews')) {
        const spec = (JSON.parse(body.toString()) as { spec: { user: string; resourceAttributes: ResourceAttributes } }).spec;
        reviews.push({ user: spec.user, attributes: spec.resourceAttributes });
      }
      const up = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } }, (a) => {
        res.writeHead(a.statusCode ?? 502, a.headers);
        a.pipe(res);
      });
      up.on('error', () => res.destroy());
      up.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    reviews,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function startRecorderProcess(args: string[]): Promise<{ url: string; child: ChildProcess; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [CLI, 'recorder', '--listen', '127.0.0.1:0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+),/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => reject(new Error(`recorder exited ${code}: ${out}`)));
  });
  return { url, child, stop: async () => (child.kill('SIGTERM'), exited) };
}

describe('recorder viewers: the SubjectAccessReview names the cluster of the recording', () => {
  let work: string;
  let dir: string;
  let cluster: DevCluster;
  let tap: Awaited<ReturnType<typeof startReviewTap>>;
  let recorder: Awaited<ReturnType<typeof startRecorderProcess>>;
  const ids: Record<'own' | 'a' | 'b' | 'aOther', string> = {} as never;

  const list = async (token: string): Promise<{ status: number; ids: string[] }> => {
    const r = await fetch(`${recorder.url}/api/v1/sessions`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await r.json()) as { items?: Array<{ id: string }> };
    return { status: r.status, ids: (body.items ?? []).map((e) => e.id).sort() };
  };
  const getCast = async (token: string, id: string): Promise<number> => (await fetch(`${recorder.url}/api/v1/sessions/${id}/cast`, { headers: { authorization: `Bearer ${token}` } })).status;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-recorder-auth-'));
    dir = join(work, 'recordings');
    writeFileSync(join(work, 'users.csv'), ['recorder-token,recorder,r1,""', 'ann-token,ann,u1,""', 'bob-token,bob,u2,""', 'cat-token,cat,u3,""'].join('\n') + '\n');
    const sessions = (r: string) => ({ verbs: ['get', 'list'], apiGroups: [RECORDING_API_GROUP], resources: [r] });
    writeFileSync(
      join(work, 'policy.json'),
      JSON.stringify({
        rules: [
          { users: ['recorder'], verbs: ['create'], resources: ['tokenreviews', 'subjectaccessreviews'] },
          // ann: cluster a's default only (a RoleBinding in default of a Role on sessions/a).
          { users: ['ann'], namespaces: ['default'], ...sessions(`${RECORDING_RESOURCE}/a`) },
          // bob: default of the proxy's own upstream (no cluster).
          { users: ['bob'], namespaces: ['default'], ...sessions(RECORDING_RESOURCE) },
          // cat: every namespace of cluster b (a ClusterRoleBinding).
          { users: ['cat'], ...sessions(`${RECORDING_RESOURCE}/b`) },
        ],
      }),
    );
    cluster = await startDevCluster({ tokenAuthFile: join(work, 'users.csv'), authorizationPolicyFile: join(work, 'policy.json'), dataDir: join(work, 'pods') });
    tap = await startReviewTap(cluster.url);
    // client-node refuses plain http unless told to skip TLS verification (loopback only).
    writeKubeconfig(join(work, 'kubeconfig'), { server: tap.url, token: 'recorder-token', insecureSkipTlsVerify: true });
    writeFileSync(join(work, 'ingest.csv'), 'replica-token,proxy-0,\n');
    const sink = new DirectorySink(dir);
    const record = async (cluster: string | undefined, namespace: string): Promise<string> => {
      const id = newRecordingId();
      const rec = new SessionRecording({
        identity: { sessionId: id, user: 'alice', ...(cluster ? { cluster } : {}), namespace, pod: 'demo', subresource: 'exec', command: ['sh'], tty: false, record: 'output' },
        enforce: false,
        upload: await sink.open(id),
        sink: 'directory',
        metrics: createRecordingMetrics(new Registry()),
        log: { warn: () => undefined },
        maxOutputBytes: 0,
      });
      rec.output('stdout', Buffer.from(`in ${cluster ?? '(own)'}/${namespace}\n`));
      rec.exit({ exitCode: 0 });
      await rec.finish();
      return id;
    };
    ids.own = await record(undefined, 'default');
    ids.a = await record('a', 'default');
    ids.b = await record('b', 'default');
    ids.aOther = await record('a', 'other');
    recorder = await startRecorderProcess(['--dir', dir, '--ingest-token-file', join(work, 'ingest.csv'), '--kubeconfig', join(work, 'kubeconfig')]);
  }, 60_000);
  afterAll(async () => {
    await recorder?.stop();
    await tap?.close();
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('a viewer allowed in cluster a\'s default sees and plays only cluster a\'s default', async () => {
    tap.reviews.length = 0;
    expect(await list('ann-token')).toEqual({ status: 200, ids: [ids.a] });
    expect(await getCast('ann-token', ids.a)).toBe(200);
    expect(await getCast('ann-token', ids.b)).toBe(403);
    expect(await getCast('ann-token', ids.own)).toBe(403);
    expect(await getCast('ann-token', ids.aOther)).toBe(403);
    const mine = tap.reviews.filter((r) => r.user === 'ann').map((r) => r.attributes);
    const base = { group: RECORDING_API_GROUP, resource: RECORDING_RESOURCE };
    // The list: cluster scope of each cluster, then each (cluster, namespace) — the cluster as the subresource.
    expect(mine).toContainEqual({ ...base, verb: 'list', subresource: 'a', namespace: 'default' });
    expect(mine).toContainEqual({ ...base, verb: 'list', subresource: 'b', namespace: 'default' });
    expect(mine).toContainEqual({ ...base, verb: 'list', namespace: 'default' });
    expect(mine).toContainEqual({ ...base, verb: 'get', subresource: 'a', namespace: 'default', name: ids.a });
    expect(mine).toContainEqual({ ...base, verb: 'get', subresource: 'b', namespace: 'default', name: ids.b });
    expect(mine).toContainEqual({ ...base, verb: 'get', namespace: 'default', name: ids.own });
    // Every review about a recording of an agent cluster names that cluster.
    for (const a of mine) expect(a.subresource === undefined || ['a', 'b'].includes(a.subresource)).toBe(true);
  });

  it('a viewer allowed in default of the proxy\'s own upstream does not see default of the agents\' clusters', async () => {
    expect(await list('bob-token')).toEqual({ status: 200, ids: [ids.own] });
    expect(await getCast('bob-token', ids.own)).toBe(200);
    expect(await getCast('bob-token', ids.a)).toBe(403);
    expect(await getCast('bob-token', ids.b)).toBe(403);
  });

  it('a viewer allowed at cluster scope in cluster b sees every namespace of b, nothing else', async () => {
    tap.reviews.length = 0;
    expect(await list('cat-token')).toEqual({ status: 200, ids: [ids.b] });
    expect(tap.reviews.filter((r) => r.user === 'cat').map((r) => r.attributes)).toContainEqual({ group: RECORDING_API_GROUP, resource: RECORDING_RESOURCE, verb: 'list', subresource: 'b' });
    expect(await getCast('cat-token', ids.b)).toBe(200);
    expect(await getCast('cat-token', ids.a)).toBe(403);
  });
});
