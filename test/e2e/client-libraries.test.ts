/**
 * Issue 32's acceptance for clients other than kubectl, through the proxy as it runs by default
 * (`--upstream-streaming auto`) in front of a 1.36 dev cluster, each compared with the same client
 * straight to a dev cluster:
 * - Python `kubernetes` 22.6 (Debian's python3-kubernetes, `/usr/bin/python3`, test/e2e/python/client.py):
 *   exec and port-forward over WebSocket v4 — a legacy WebSocket, passed through unchanged
 *   (`proxied_to_upstream`), never translated;
 * - @kubernetes/client-node 1.4 `Exec`, which offers v5 first: passed through to the cluster, which
 *   hands it to its declaring kubelet.
 * Same stdout, stderr, exit code and sha256 as direct; the proxy's counters name the path.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { Exec, KubeConfig, type V1Status } from '@kubernetes/client-node';
import type { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { sha256 } from '../helpers/hash.js';
import { startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { counterValue } from '../helpers/metrics.js';
import { deterministicBytes } from '../helpers/random-data.js';

const PYTHON = '/usr/bin/python3';
const CLIENT_PY = resolve(import.meta.dirname, 'python/client.py');
const PF_BYTES = 1_000_000;
const SESSIONS = 'kube_stream_proxy_streaming_requests_total';
const WS_STREAMING = 'apiserver_websocket_streaming_requests_total';

let work: string;
let cluster: DevCluster;
let direct: DevCluster;
let proxy: RunningServer;
let bytes: BytesServer;

beforeAll(async () => {
  const check = spawnSync(PYTHON, ['-c', 'import kubernetes'], { encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`${PYTHON} cannot import kubernetes (Debian package python3-kubernetes; npm test's pretest installs it): ${check.stderr}`);
  work = mkdtempSync(join(tmpdir(), 'ksp-client-libraries-'));
  cluster = await startDevCluster({ dataDir: join(work, 'behind') });
  direct = await startDevCluster({ dataDir: join(work, 'direct') });
  proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: cluster.url }), { logger: false });
  bytes = await startBytesServer();
});
afterAll(async () => {
  await proxy?.close();
  await bytes?.close();
  await cluster?.close();
  await direct?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

const metrics = async (): Promise<string> => (await fetch(`${proxy.url}/metrics`)).text();

/** Run the Python client against `url` (no shell; its JSON line parsed). */
async function python(url: string, seed: number): Promise<Record<string, any>> {
  const child = spawn(PYTHON, [CLIENT_PY, url, String(bytes.port), String(PF_BYTES), String(seed)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const [code] = (await once(child, 'close')) as [number | null];
  clearTimeout(timer);
  expect(code, `python client.py ${url}: exit ${code}\n${err}`).toBe(0);
  return JSON.parse(out.trim()) as Record<string, any>;
}

function kubeConfigFor(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
    currentContext: 'c',
  });
  return kc;
}

/** client-node `Exec` of `cat` with `input` on stdin, then stderr and exit 3. */
async function clientNodeExec(server: string, input: Buffer): Promise<{ protocol: string; stdout: string; stderr: string; status: V1Status | undefined }> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const sink = (into: Buffer[]): Writable => new Writable({ write: (c: Buffer, _e, cb) => (into.push(Buffer.from(c)), cb()) });
  const stdin = new PassThrough();
  let status: V1Status | undefined;
  const ws = (await new Exec(kubeConfigFor(server)).exec('default', 'demo', 'demo', ['sh', '-c', 'cat; echo err >&2; exit 3'], sink(out), sink(err), stdin, false, (s) => (status = s))) as unknown as WebSocket;
  const closed = once(ws, 'close');
  stdin.end(input);
  await closed;
  return { protocol: ws.protocol, stdout: sha256(Buffer.concat(out)), stderr: Buffer.concat(err).toString(), status };
}

describe('Python kubernetes 22.6 (WebSocket v4) and client-node 1.4 (v5) through the default proxy', () => {
  it('Python: exec and port-forward as direct, passed through as legacy WebSockets', async () => {
    const before = await metrics();
    const viaProxy = await python(proxy.url, 7);
    const straight = await python(direct.url, 7);
    expect(viaProxy).toEqual(straight);
    expect(viaProxy.exec).toEqual({ stdout: `${viaProxy.exec.stdinSha256}  -\n`, stderr: 'err\n', code: 3, stdinSha256: viaProxy.exec.stdinSha256 });
    expect(viaProxy.portForward).toEqual({ status: 'HTTP/1.1 200 OK', ...bytes.expected(PF_BYTES, 7) });
    const after = await metrics();
    const moved = (name: string, labels: Record<string, string>): number => counterValue(after, name, labels) - counterValue(before, name, labels);
    expect(moved(WS_STREAMING, { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(1);
    expect(moved(WS_STREAMING, { subresource: 'portforward', proxy_type: 'proxied_to_upstream' })).toBe(1);
    expect(moved(SESSIONS, { subresource: 'exec', protocol: 'websocket', path: 'passthrough' })).toBe(1);
    expect(moved('apiserver_stream_translator_requests_total', {})).toBe(0);
    expect(moved('kube_stream_proxy_upstream_streaming_fallbacks_total', {})).toBe(0);
  });

  it('client-node: Exec with 1 MB of stdin as direct, v5 passed through to the declaring kubelet', async () => {
    const input = deterministicBytes(1_000_000, 61);
    const before = await metrics();
    const kubeletBefore = counterValue(cluster.metrics.kubelet.exposition(), 'kubelet_websocket_streaming_requests_total', { subresource: 'exec' });
    const viaProxy = await clientNodeExec(proxy.url, input);
    const straight = await clientNodeExec(direct.url, input);
    expect(viaProxy).toEqual(straight);
    expect(viaProxy.protocol).toBe('v5.channel.k8s.io');
    expect(viaProxy.stdout).toBe(sha256(input));
    expect(viaProxy.stderr).toBe('err\n');
    expect(viaProxy.status?.details?.causes).toEqual([{ reason: 'ExitCode', message: '3' }]);
    const after = await metrics();
    expect(counterValue(after, WS_STREAMING, { subresource: 'exec', proxy_type: 'proxied_to_upstream' }) - counterValue(before, WS_STREAMING, { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(1);
    expect(counterValue(cluster.metrics.kubelet.exposition(), 'kubelet_websocket_streaming_requests_total', { subresource: 'exec' }) - kubeletBefore).toBe(1);
  });
});
