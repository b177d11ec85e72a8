/**
 * Recording in `--authn passthrough` (issue 31, findings 6 and 12), through the real proxy against a
 * dev cluster with static tokens and a policy (the upstream authenticates and authorizes):
 *
 * - Refused sessions persist nothing: kubectl 1.27 (SPDY passthrough) and 1.33 (WebSocket v5, passed
 *   through, refused, then translated here: a 403 is a fallback answer) exec and port-forward (SPDY,
 *   the tunnel) as a user the dev cluster forbids (403), and a bad token straight at the exec endpoint
 *   (SPDY, WebSocket v5, the port-forward tunnel: 401, relayed without a fallback).
 *   The recordings directory stays empty, the audit lines carry no recording id, and
 *   `kube_stream_proxy_session_recording_refused_attempts_total{code}` counts each attempt; under
 *   `enforce` the answer is the upstream's refusal, not 503.
 * - Recordings name the caller: a session of `alice` names her (user and groups as the dev cluster's
 *   SelfSubjectReview answers with her own token) in the cast header, the index entry and the audit
 *   line, on every path (SPDY and v5 passed through; v5 translated by a proxy with
 *   `--upstream-streaming spdy`, since the dev cluster plays a 1.36 apiserver that takes v5 itself);
 *   the review is asked once per credential within its cache's lifetime.
 * - The same through an agent (`/clusters/NAME`, passthrough): the review goes through the tunnel to
 *   that cluster; a forbidden session there stores nothing.
 * - The sink's health is checked before the upgrade: `enforce` with a full recordings volume (a
 *   1 MiB tmpfs, mounted here as root; skipped with the reason where mounting is refused) is refused
 *   with 503 before any upgrade (the dev cluster sees no exec) and nothing is created.
 * - A sink that is healthy but refuses the creation at the upstream's 101 (a recorder that answers
 *   `/healthz` and 401 to the ingest): enforce, kubectl 1.27 (SPDY passthrough) and 1.33 through the
 *   default (v5 passed through) get the 503 instead of their 101, and 1.33 translated (a proxy with
 *   `--upstream-streaming spdy`: the translator's own answer) the Status on channel 3 — all end at
 *   once with "session recording unavailable", never an unrecorded session; fail open, the session
 *   runs, counted.
 *
 * The agents run from the compiled CLI (`npm run build`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect as tlsConnect } from 'node:tls';
import { createServer, type Server } from 'node:http';
import { get as httpsGet } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { CAST_HEADER_KEY } from '../../src/recording/asciicast.js';
import { createTestPki, type TestPki } from '../helpers/certs.js';
import { downloadDigest, startBytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { counterValue } from '../helpers/metrics.js';
import { waitFor } from '../helpers/wait.js';
import { startTunnelFixture, type TunnelFixture } from '../tunnel/tunnel-fixture.js';
import { policyYaml, startRecordingProxy, storedRecording, writeText, type RecordingProxy } from './recording-proxy-fixture.js';

const skip = kubectlE2eSkipReason();
const REFUSED = 'kube_stream_proxy_session_recording_refused_attempts_total';

/** The raw answer to one upgrade request written on a fresh TLS connection, up to its close (or 5 s). */
function rawUpgrade(url: string, ca: Buffer, head: readonly string[]): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: u.hostname, port: Number(u.port), ca, servername: 'localhost' });
    let got = '';
    s.setEncoding('latin1');
    s.on('data', (c: string) => (got += c));
    s.on('error', reject);
    s.on('close', () => resolve(got));
    s.setTimeout(5000, () => s.destroy());
    s.write([...head, `Host: ${u.host}`, '', ''].join('\r\n'));
  });
}

/** A WebSocket upgrade's head lines offering `protocol`, with a bearer token. */
function websocketHead(method: string, target: string, protocol: string, token: string): string[] {
  return [`${method} ${target} HTTP/1.1`, `Authorization: Bearer ${token}`, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', `Sec-WebSocket-Protocol: ${protocol}`];
}

describe.skipIf(skip !== undefined)('recording in passthrough: refused sessions persist nothing; recordings name the caller', () => {
  let work: string;
  let pki: TestPki;
  let cluster: DevCluster;
  let open: RecordingProxy;
  /** `--upstream-streaming spdy`: kubectl 1.33's v5 translated here. */
  let openTranslating: RecordingProxy;
  let strict: RecordingProxy;
  let openDir: string;
  let openTranslatingDir: string;
  let strictDir: string;
  const kubeconfigs: Record<string, string> = {};

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-passthrough-'));
    // HTTPS: kubectl sends a bearer token over TLS only.
    pki = await createTestPki(work);
    const tls = { tlsCertFile: pki.server.certFile, tlsPrivateKeyFile: pki.server.keyFile };
    writeFileSync(join(work, 'tokens.csv'), ['t-alice,alice,uid-alice,"devs"', 't-viewer,viewer,uid-viewer'].join('\n'));
    // alice may do anything; viewer may read pods, nothing more (its exec and port-forward get 403).
    writeFileSync(
      join(work, 'authz.json'),
      JSON.stringify({ rules: [{ users: ['alice'], verbs: ['*'], resources: ['*'] }, { users: ['viewer'], verbs: ['get', 'list'], resources: ['pods'] }] }),
    );
    cluster = await startDevCluster({ dataDir: join(work, 'pods'), tokenAuthFile: join(work, 'tokens.csv'), authorizationPolicyFile: join(work, 'authz.json') });
    openDir = join(work, 'recordings');
    strictDir = join(work, 'recordings-enforce');
    openTranslatingDir = join(work, 'recordings-translated');
    open = await startRecordingProxy({ ...tls, upstream: cluster.url, sessionRecordingConfig: writeText(join(work, 'open.yaml'), policyYaml({ match: '{pods: [demo]}' })), sessionRecordingDir: openDir });
    openTranslating = await startRecordingProxy({
      ...tls,
      upstream: cluster.url,
      upstreamStreaming: 'spdy',
      sessionRecordingConfig: writeText(join(work, 'open-translated.yaml'), policyYaml({ match: '{pods: [demo]}' })),
      sessionRecordingDir: openTranslatingDir,
    });
    strict = await startRecordingProxy({ ...tls, upstream: cluster.url, sessionRecordingConfig: writeText(join(work, 'strict.yaml'), policyYaml({ match: '{pods: [demo]}', enforce: true })), sessionRecordingDir: strictDir });
    for (const [name, token] of [['alice', 't-alice'], ['viewer', 't-viewer']] as const) {
      for (const [proxyName, p] of [['open', open], ['open-translated', openTranslating], ['strict', strict]] as const) {
        kubeconfigs[`${name}-${proxyName}`] = join(work, `kubeconfig-${name}-${proxyName}`);
        writeKubeconfig(kubeconfigs[`${name}-${proxyName}`]!, { server: p.url, name, token, caPem: pki.ca.cert.toString() });
      }
    }
  });
  afterAll(async () => {
    await open?.close();
    await openTranslating?.close();
    await strict?.close();
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const metrics = (p: RecordingProxy): Promise<string> =>
    new Promise((resolve, reject) => {
      httpsGet(`${p.url}/metrics`, { ca: pki.ca.cert }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve(body));
      }).on('error', reject);
    });
  const stored = (dir: string): string[] => (existsSync(dir) ? readdirSync(dir) : []);

  it.each<{ version: KubectlVersion }>([{ version: '1.27' }, { version: '1.33' }])('kubectl $version exec and port-forward forbidden by the upstream (403): nothing stored, counted', async ({ version }) => {
    const before = counterValue(await metrics(open), REFUSED, { code: '403' });
    const auditsBefore = open.audits().length;
    const r = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'echo', 'should-not-run'], { kubeconfig: kubeconfigs['viewer-open']!, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(1);
    expect(r.stderr).toMatch(/forbidden/i);
    // kubectl opens the port-forward connection before it listens: refused at once.
    const pf = await runKubectl(findKubectl(version), ['port-forward', 'pod/demo', ':80'], { kubeconfig: kubeconfigs['viewer-open']!, timeoutMs: 30_000 });
    expect(pf.code, summary(pf)).toBe(1);
    expect(pf.stderr).toMatch(/forbidden/i);
    const after = await metrics(open);
    expect(counterValue(after, REFUSED, { code: '403' }) - before).toBeGreaterThanOrEqual(2);
    expect(stored(openDir)).toEqual([]);
    const audits = open.audits().slice(auditsBefore);
    expect(audits.length).toBeGreaterThanOrEqual(2);
    for (const a of audits) expect(a).toMatchObject({ statusCode: 403, outcome: 'upstream_refused' });
    expect(audits.every((a) => a.recordingId === undefined)).toBe(true);
  }, 90_000);

  it('a bad token straight at exec (SPDY, WebSocket v5) and the port-forward tunnel: the 401 relayed, nothing stored, counted', async () => {
    const before = counterValue(await metrics(open), REFUSED, { code: '401' });
    const exec = '/api/v1/namespaces/default/pods/demo/exec?command=sh&stdout=true';
    const spdy = await rawUpgrade(open.url, pki.ca.cert, [`POST ${exec} HTTP/1.1`, 'Authorization: Bearer not-a-token', 'Connection: Upgrade', 'Upgrade: SPDY/3.1', 'X-Stream-Protocol-Version: v4.channel.k8s.io']);
    expect(spdy).toMatch(/^HTTP\/1\.1 401 /);
    // WebSocket v5: passed through (the default, to a dev cluster that takes v5); the upstream's 401
    // answers the handshake, with no fallback (credentials refused in one protocol are in the other).
    expect(await rawUpgrade(open.url, pki.ca.cert, websocketHead('GET', exec, 'v5.channel.k8s.io', 'not-a-token'))).toMatch(/^HTTP\/1\.1 401 /);
    // The port-forward tunnel.
    expect(await rawUpgrade(open.url, pki.ca.cert, websocketHead('GET', '/api/v1/namespaces/default/pods/demo/portforward?ports=80', 'SPDY/3.1+portforward.k8s.io', 'not-a-token'))).toMatch(/^HTTP\/1\.1 401 /);
    const after = await metrics(open);
    expect(counterValue(after, REFUSED, { code: '401' }) - before).toBe(3);
    expect(stored(openDir)).toEqual([]);
  });

  it('enforce: a forbidden session gets the upstream 403 (not 503) and leaves nothing', async () => {
    const r = await runKubectl(findKubectl('1.27'), ['exec', 'demo', '--', 'echo', 'should-not-run'], { kubeconfig: kubeconfigs['viewer-strict']!, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(1);
    expect(r.stderr).toMatch(/forbidden/i);
    expect(r.stderr).not.toContain('session recording unavailable');
    expect(stored(strictDir)).toEqual([]);
    expect(counterValue(await metrics(strict), REFUSED, { code: '403' })).toBeGreaterThanOrEqual(1);
  });

  it.each<{ version: KubectlVersion; path: string; clientProtocol: string; translating: boolean }>([
    { version: '1.27', path: 'passthrough', clientProtocol: 'spdy', translating: false },
    { version: '1.33', path: 'passthrough', clientProtocol: 'websocket', translating: false },
    { version: '1.33', path: 'translated', clientProtocol: 'websocket', translating: true },
  ])('kubectl $version ($clientProtocol, $path): the cast header, the index and the audit line name the user the dev cluster reports', async ({ version, path, clientProtocol, translating }) => {
    const [proxy, dir, kubeconfig] = translating ? [openTranslating, openTranslatingDir, kubeconfigs['alice-open-translated']!] : [open, openDir, kubeconfigs['alice-open']!];
    const reviews = (): number => cluster.requests.filter((q) => q.url.includes('/selfsubjectreviews') && q.user === 'alice').length;
    const auditsBefore = proxy.audits().length;
    const r = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'sh', '-c', 'echo hello-$((40+2))'], { kubeconfig, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(0);
    const audit = await proxy.audit(auditsBefore + 1);
    expect(audit).toMatchObject({ path, clientProtocol, user: 'alice', recordingId: expect.any(String), exitCode: 0 });
    expect(audit.fallback).toBeUndefined();
    const rec = await storedRecording(dir, audit.recordingId);
    expect(rec.header[CAST_HEADER_KEY]).toMatchObject({ sessionId: audit.recordingId, user: 'alice', groups: ['devs', 'system:authenticated'] });
    expect(rec.header[CAST_HEADER_KEY].userUnknown).toBeUndefined();
    expect(rec.summary).toMatchObject({ id: audit.recordingId, user: 'alice', groups: ['devs', 'system:authenticated'], result: 'complete' });
    // The dev cluster was asked with alice's own token (the review ran as her); a second session
    // with the same credential within the cache's lifetime asks no more.
    const asked = reviews();
    expect(asked).toBeGreaterThanOrEqual(1);
    const again = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'true'], { kubeconfig, timeoutMs: 30_000 });
    expect(again.code, summary(again)).toBe(0);
    expect((await proxy.audit(auditsBefore + 2)).user).toBe('alice');
    expect(reviews()).toBe(asked);
  });

  it('port-forward (kubectl 1.33, the tunnel): the record names the user', async () => {
    const fixture = await startBytesServer();
    try {
      const auditsBefore = open.audits().length;
      const k = startKubectl(findKubectl('1.33'), ['port-forward', 'pod/demo', `:${fixture.port}`], { kubeconfig: kubeconfigs['alice-open']!, cwd: work });
      try {
        const m = await k.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${fixture.port}`), 30_000);
        expect((await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/1000?seed=1`)).byteLength).toBe(1000);
      } finally {
        await k.stop();
      }
      const audit = await open.audit(auditsBefore + 1);
      expect(audit).toMatchObject({ subresource: 'portforward', user: 'alice', recordingId: expect.any(String) });
      const rec = await storedRecording(openDir, audit.recordingId);
      expect(rec.summary).toMatchObject({ subresource: 'portforward', user: 'alice', groups: ['devs', 'system:authenticated'] });
    } finally {
      await fixture.close();
    }
  });
});

describe.skipIf(skip !== undefined)('recording in passthrough through an agent: the cluster behind the tunnel names the caller', () => {
  let fx: TunnelFixture;
  let dir: string;
  const kubeconfig = (name: string, token: string): string => {
    const path = join(fx.work, `kubeconfig-secured-${name}`);
    writeKubeconfig(path, { server: `${fx.proxy.url}/clusters/secured`, name, token, caPem: fx.ca!.toString('utf8') });
    return path;
  };

  beforeAll(async () => {
    fx = await startTunnelFixture(
      { secured: ['demo'] },
      {
        secured: (work) => {
          writeFileSync(join(work, 'users.csv'), ['t-alice,alice,uid-alice,"devs"', 't-viewer,viewer,uid-viewer'].join('\n'));
          writeFileSync(
            join(work, 'authz.json'),
            JSON.stringify({ rules: [{ users: ['alice'], verbs: ['*'], resources: ['*'] }, { users: ['viewer'], verbs: ['get', 'list'], resources: ['pods'] }] }),
          );
          return { tokenAuthFile: join(work, 'users.csv'), authorizationPolicyFile: join(work, 'authz.json') };
        },
      },
      {
        tls: true,
        serveFlags: (work) => ({
          sessionRecordingConfig: writeText(join(work, 'policy.yaml'), policyYaml({ match: '{clusters: [secured]}' })),
          sessionRecordingDir: (dir = join(work, 'recordings')),
        }),
      },
    );
    await fx.startAgent('secured').waitForOutput(/tunnel established/, 20_000);
  }, 60_000);
  afterAll(async () => fx?.close());

  it.each<{ version: KubectlVersion }>([{ version: '1.27' }, { version: '1.33' }])('kubectl $version: forbidden stores nothing; alice is named, with the cluster', async ({ version }) => {
    const files = (): string[] => (existsSync(dir) ? readdirSync(dir).sort() : []);
    const casts = (): string[] => files().filter((n) => n.endsWith('.json'));
    const storedBefore = casts();
    const filesBefore = files();
    const before = await fx.metric(REFUSED, { code: '403' });
    const denied = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'true'], { kubeconfig: kubeconfig('viewer', 't-viewer'), timeoutMs: 30_000 });
    expect(denied.code, summary(denied)).toBe(1);
    expect(denied.stderr).toMatch(/forbidden/i);
    expect(files()).toEqual(filesBefore);
    expect((await fx.metric(REFUSED, { code: '403' })) - before).toBeGreaterThanOrEqual(1);
    const ok = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'echo', 'through-the-tunnel'], { kubeconfig: kubeconfig('alice', 't-alice'), timeoutMs: 30_000 });
    expect(ok.code, summary(ok)).toBe(0);
    const id = await waitFor('the recording', async () => {
      const added = casts().filter((n) => !storedBefore.includes(n));
      return added.length === 1 ? added[0]!.slice(0, -'.json'.length) : undefined;
    });
    const rec = await storedRecording(dir, id);
    expect(rec.header[CAST_HEADER_KEY]).toMatchObject({ user: 'alice', groups: ['devs', 'system:authenticated'], cluster: 'secured' });
    expect(rec.summary).toMatchObject({ user: 'alice', cluster: 'secured', exitCode: 0 });
  });
});

/** Mount a `size` tmpfs on `dir`; the reason it cannot be, or undefined once mounted. */
function mountTmpfs(dir: string, size: string): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
    return undefined;
  } catch (e) {
    return `mount -t tmpfs refused (needs root or CAP_SYS_ADMIN): ${(e as { stderr?: Buffer }).stderr?.toString().trim() ?? (e as Error).message}`;
  }
}

// Mounted while the tests are collected, so the suite can say why it is skipped.
const fullWork = skip === undefined ? mkdtempSync(join(tmpdir(), 'ksp-rec-health-')) : '';
const fullVolume = fullWork ? join(fullWork, 'volume') : '';
if (fullVolume) mkdirSync(fullVolume);
const mountRefused = fullVolume ? mountTmpfs(fullVolume, '1m') : skip;

describe.skipIf(mountRefused !== undefined)('the sink is checked before the upgrade: enforce with a full recordings volume', () => {
  let cluster: DevCluster;
  let strict: RecordingProxy;
  let dir: string;
  let kubeconfig: string;

  beforeAll(async () => {
    cluster = await startDevCluster({ dataDir: join(fullWork, 'pods') });
    dir = join(fullVolume, 'recordings');
    strict = await startRecordingProxy({ upstream: cluster.url, sessionRecordingConfig: writeText(join(fullWork, 'strict.yaml'), policyYaml({ enforce: true })), sessionRecordingDir: dir });
    kubeconfig = join(fullWork, 'kubeconfig');
    writeKubeconfig(kubeconfig, { server: strict.url, name: 'strict' });
  });
  afterAll(async () => {
    await strict?.close();
    await cluster?.close();
    execFileSync('umount', ['-l', fullVolume]);
    rmSync(fullWork, { recursive: true, force: true });
  });

  it.each<{ version: KubectlVersion }>([{ version: '1.27' }, { version: '1.33' }])('kubectl $version: 503 before any upgrade, no exec upstream, nothing created', async ({ version }) => {
    // Fill the volume to its last byte.
    try {
      writeFileSync(join(fullVolume, `filler-${version}`), Buffer.alloc(4 * 1024 * 1024, 'x'));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
    }
    const execsBefore = cluster.requests.filter((q) => q.url.includes('/exec?')).length;
    const r = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'echo', 'should-not-run'], { kubeconfig, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(1);
    expect(r.stdout.toString()).not.toContain('should-not-run');
    expect(r.stderr).toContain('session recording unavailable');
    expect(cluster.requests.filter((q) => q.url.includes('/exec?')).length).toBe(execsBefore);
    expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
    const m = await (await fetch(`${strict.url}/metrics`)).text();
    expect(counterValue(m, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'start' })).toBeGreaterThanOrEqual(1);
    expect(counterValue(m, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'mid_session' })).toBe(0);
    rmSync(join(fullVolume, `filler-${version}`));
  });
});

describe.skipIf(skip !== undefined)('a sink that is healthy but cannot create the recording at the 101', () => {
  let work: string;
  let cluster: DevCluster;
  let recorder: Server;
  const ingests: string[] = [];
  /** `strict-translating`: enforce with `--upstream-streaming spdy` (kubectl 1.33's v5 translated here). */
  const proxies: Record<'strict' | 'strict-translating' | 'open', RecordingProxy> = {} as never;
  const kubeconfigs: Record<'strict' | 'strict-translating' | 'open', string> = {} as never;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-create-'));
    cluster = await startDevCluster({ dataDir: join(work, 'pods') });
    // A recorder that answers its health check but refuses every upload (a replica token it does not know).
    recorder = createServer((req, res) => {
      if (req.method === 'GET' && req.url === '/healthz') return res.end('ok');
      ingests.push(`${req.method} ${req.url}`);
      req.resume();
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unknown replica token"}');
    });
    await new Promise<void>((r) => recorder.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`;
    for (const name of ['strict', 'strict-translating', 'open'] as const) {
      const policy = writeText(join(work, `${name}.yaml`), policyYaml({ enforce: name !== 'open' }));
      const streaming = name === 'strict-translating' ? { upstreamStreaming: 'spdy' as const } : {};
      proxies[name] = await startRecordingProxy({ upstream: cluster.url, sessionRecordingConfig: policy, sessionRecorderUrl: url, ...streaming });
      kubeconfigs[name] = join(work, `kubeconfig-${name}`);
      writeKubeconfig(kubeconfigs[name], { server: proxies[name].url, name });
    }
  });
  afterAll(async () => {
    for (const p of Object.values(proxies)) await p?.close();
    await new Promise((r) => recorder?.close(r));
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it.each<{ version: KubectlVersion; path: string; clientProtocol: string; proxy: 'strict' | 'strict-translating' }>([
    { version: '1.27', path: 'passthrough', clientProtocol: 'spdy', proxy: 'strict' },
    { version: '1.33', path: 'passthrough', clientProtocol: 'websocket', proxy: 'strict' },
    { version: '1.33', path: 'translated', clientProtocol: 'websocket', proxy: 'strict-translating' },
  ])('enforce, kubectl $version ($clientProtocol, $path): ends at once with "session recording unavailable"', async ({ version, path, clientProtocol, proxy }) => {
    const auditsBefore = proxies[proxy].audits().length;
    const ingestsBefore = ingests.length;
    const started = Date.now();
    const r = await runKubectl(findKubectl(version), ['exec', 'demo', '--', 'sh', '-c', 'sleep 0.5; echo should-not-be-seen'], { kubeconfig: kubeconfigs[proxy], timeoutMs: 20_000 });
    expect(r.code, summary(r)).toBe(1);
    expect(r.stderr).toContain('session recording unavailable');
    expect(r.stdout.toString()).not.toContain('should-not-be-seen');
    expect(Date.now() - started).toBeLessThan(10_000);
    // The creation was asked for at the 101 (not before the upstream answered), and refused.
    expect(ingests.length).toBeGreaterThan(ingestsBefore);
    const audit = await proxies[proxy].audit(auditsBefore + 1);
    // A passthrough answers 503 instead of the upstream's 101; the translator has sent its 101 and ends with the Status.
    expect(audit).toMatchObject({ path, clientProtocol, ...(path === 'passthrough' ? { statusCode: 503, outcome: 'recording_unavailable' } : { statusCode: 101 }) });
    const m = await (await fetch(`${proxies[proxy].url}/metrics`)).text();
    expect(counterValue(m, 'kube_stream_proxy_session_recording_sink_errors_total', { sink: 'recorder', phase: 'open' })).toBeGreaterThanOrEqual(1);
  }, 40_000);

  it('fail open: the session runs unrecorded, counted', async () => {
    const r = await runKubectl(findKubectl('1.27'), ['exec', 'demo', '--', 'echo', 'ran'], { kubeconfig: kubeconfigs.open, timeoutMs: 20_000 });
    expect(r.code, summary(r)).toBe(0);
    expect(r.stdout.toString()).toBe('ran\n');
    const m = await waitFor('open_failed counted', async () => {
      const text = await (await fetch(`${proxies.open.url}/metrics`)).text();
      return counterValue(text, 'kube_stream_proxy_session_recordings_dropped_total', { reason: 'open_failed' }) >= 1 ? text : undefined;
    });
    expect(counterValue(m, 'kube_stream_proxy_session_recording_enforce_refusals_total')).toBe(0);
  });
});
