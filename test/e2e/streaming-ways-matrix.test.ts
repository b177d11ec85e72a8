/**
 * Issue 32's acceptance matrix, one row per kubectl 1.27 … 1.33 and way to a pod (an old apiserver
 * behind an agent, and attach, cp and exec -t through agents: test/tunnel/agent-matrix.test.ts):
 *
 * | way | upstream |
 * |---|---|
 * | `kubelet-declaring` | `--upstream-mode kubelet`, a 1.36 kubelet whose node declares `ExtendWebSocketsToKubelet` |
 * | `kubelet-older` | `--upstream-mode kubelet`, a 1.35 kubelet (declares nothing) |
 * | `takes-websockets` | apiserver mode, a 1.36 apiserver that takes v5 and the tunnel |
 * | `refuses-websockets` | apiserver mode, an apiserver answering v5 and the tunnel 403 (OpenShift) |
 * | `refuses-spdy` | apiserver mode, an apiserver answering SPDY 403 (a WebSocket-only gateway) |
 * | `agent` | a 1.36 cluster behind an agent (`/clusters/one`), the WebSockets asked there first |
 *
 * Every kubectl, through every way, over TLS with a token: `exec -i` echoing 1 MB of stdin back with
 * `cat` while writing to stderr and exiting 3, and `port-forward` downloading 1 MB. Each must give
 * exactly what the same kubectl gets straight from a dev cluster (stdout bytes, stderr, exit code,
 * sha256), and the proxy's `kube_stream_proxy_streaming_requests_total` must have moved by exactly one
 * session per command, in the client's protocol (kubectl ≥ 1.30 falls back to SPDY silently: a
 * fallback would show as a second session) and on the path the decision table names
 * (docs/translator.md). A declaring kubelet counts the WebSockets it served itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { counterValue } from '../helpers/metrics.js';
import { deterministicBytes } from '../helpers/random-data.js';
import { waitFor } from '../helpers/wait.js';
import { startSecurityFixture, type SecurityFixture } from '../security/security-fixture.js';
import { startTunnelFixture } from '../tunnel/tunnel-fixture.js';

const skipReason = kubectlE2eSkipReason();
const VERSIONS: KubectlVersion[] = ['1.27', '1.28', '1.29', '1.30', '1.31', '1.32', '1.33'];
const STDIN = deterministicBytes(1_000_000, 32);
const PF_BYTES = 1_000_000;
const SESSIONS = 'kube_stream_proxy_streaming_requests_total';

type Way = 'kubelet-declaring' | 'kubelet-older' | 'takes-websockets' | 'refuses-websockets' | 'refuses-spdy' | 'agent';
type Path = 'passthrough' | 'translated' | 'tunnel' | 'reverse_translated' | 'reverse_tunnel';

/** The path of each way, by the client's protocol (docs/translator.md, "Which path a streaming request takes"). */
const PATHS: Record<Way, { websocket: Path; spdyExec: Path; tunnel: Path; spdyPortForward: Path }> = {
  'kubelet-declaring': { websocket: 'passthrough', spdyExec: 'passthrough', tunnel: 'passthrough', spdyPortForward: 'passthrough' },
  'kubelet-older': { websocket: 'translated', spdyExec: 'passthrough', tunnel: 'tunnel', spdyPortForward: 'passthrough' },
  'takes-websockets': { websocket: 'passthrough', spdyExec: 'passthrough', tunnel: 'passthrough', spdyPortForward: 'passthrough' },
  'refuses-websockets': { websocket: 'translated', spdyExec: 'passthrough', tunnel: 'tunnel', spdyPortForward: 'passthrough' },
  'refuses-spdy': { websocket: 'passthrough', spdyExec: 'reverse_translated', tunnel: 'passthrough', spdyPortForward: 'reverse_tunnel' },
  agent: { websocket: 'passthrough', spdyExec: 'passthrough', tunnel: 'passthrough', spdyPortForward: 'passthrough' },
};

/** What a row needs of its fixture: where kubectl points, the proxy's counters, the cluster's kubelet. */
interface Row {
  kubeconfig: string;
  metrics(): Promise<string>;
  kubeletMetrics(): string;
  /** Failed sessions' audit lines, for assertion messages. */
  failed(): string;
  close(): Promise<void>;
}

function securityRow(f: SecurityFixture): Row {
  return {
    kubeconfig: f.kubeconfig('alice'),
    metrics: async () => (await f.proxy.app.inject({ method: 'GET', url: '/metrics' })).body,
    kubeletMetrics: () => f.cluster.metrics.kubelet.exposition(),
    failed: () => f.failedSessions(),
    close: () => f.close(),
  };
}

/** A 1.36 cluster (no authentication) behind an agent: kubectl to `/clusters/one` of a plain-HTTP proxy. */
async function agentRow(): Promise<Row> {
  const fx = await startTunnelFixture({ one: ['demo'] });
  await fx.startAgent('one').waitForOutput(/tunnel established/, 30_000);
  return { kubeconfig: fx.kubeconfigs.one!, metrics: () => fx.metrics(), kubeletMetrics: () => fx.clusters.one!.metrics.kubelet.exposition(), failed: () => '', close: () => fx.close() };
}

/**
 * alice may `create` and `get` the streaming subresources, as the built-in `edit` role allows: a
 * WebSocket is a GET, authorized as `get` and, since 1.35 (`AuthorizePodWebsocketUpgradeCreatePermission`),
 * `create` too. (A `create`-only user's WebSockets are refused by the authorizer and go over SPDY:
 * test/e2e/upstream-streaming-kubectl.test.ts and test/security/streaming-fallback.test.ts.)
 */
const GET_STREAMS = [{ users: ['alice'], verbs: ['get'], resources: ['pods/exec', 'pods/attach', 'pods/portforward'] }];

const WAYS: Array<{ way: Way; start: () => Promise<Row> }> = [
  { way: 'kubelet-declaring', start: async () => securityRow(await startSecurityFixture({ authn: 'impersonate', upstreamMode: 'kubelet', extraPolicyRules: GET_STREAMS, clusterVersions: { kubeletVersion: '1.36' } })) },
  { way: 'kubelet-older', start: async () => securityRow(await startSecurityFixture({ authn: 'impersonate', upstreamMode: 'kubelet', extraPolicyRules: GET_STREAMS, clusterVersions: { kubeletVersion: '1.35' } })) },
  { way: 'takes-websockets', start: async () => securityRow(await startSecurityFixture({ authn: 'passthrough', extraPolicyRules: GET_STREAMS })) },
  { way: 'refuses-websockets', start: async () => securityRow(await startSecurityFixture({ authn: 'passthrough', extraPolicyRules: GET_STREAMS, clusterVersions: { refuseWebSocketStreaming: true } })) },
  { way: 'refuses-spdy', start: async () => securityRow(await startSecurityFixture({ authn: 'passthrough', extraPolicyRules: GET_STREAMS, clusterVersions: { refuseSpdyStreaming: true } })) },
  { way: 'agent', start: agentRow },
];

/** What kubectl 1.N speaks: v5 exec from 1.30, the port-forward tunnel from 1.31 (SPDY before). */
function speaks(version: KubectlVersion): { exec: 'websocket' | 'spdy'; portforward: 'tunnel' | 'spdy' } {
  const minor = Number(version.split('.')[1]);
  return { exec: minor >= 30 ? 'websocket' : 'spdy', portforward: minor >= 31 ? 'tunnel' : 'spdy' };
}

/** The proxy's ended sessions as `subresource/protocol/path` → count (outcomes summed). */
function sessionsOf(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${SESSIONS}{`)) continue;
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    const key = `${labels.subresource}/${labels.protocol}/${labels.path}`;
    if (value > 0) out[key] = (out[key] ?? 0) + value;
  }
  return out;
}

function movedBy(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v !== (before[k] ?? 0)) out[k] = v - (before[k] ?? 0);
  return out;
}

/** One command's observable result, reduced to what must be identical to a direct connection. */
interface Observed {
  code: number | null;
  stdoutSha256: string;
  stdoutBytes: number;
  stderr: string;
}

async function execCat(bin: string, kubeconfig: string): Promise<Observed> {
  const r = await runKubectl(bin, ['exec', '-i', 'demo', '--', 'sh', '-c', 'cat; echo err >&2; exit 3'], { kubeconfig, stdin: STDIN, timeoutMs: 60_000, hashStdout: true });
  expect(r.code, summary(r)).toBe(3);
  return { code: r.code, stdoutSha256: r.stdoutDigest.sha256, stdoutBytes: r.stdoutDigest.byteLength, stderr: r.stderr };
}

async function portForward(bin: string, kubeconfig: string, bytes: BytesServer, seed: number): Promise<{ sha256: string; byteLength: number }> {
  const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${bytes.port}`], { kubeconfig });
  try {
    const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytes.port}\\b`), 30_000);
    const d = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/${PF_BYTES}?seed=${seed}`);
    return { sha256: d.sha256, byteLength: d.byteLength };
  } finally {
    await pf.stop('SIGINT', 10_000);
  }
}

describe.skipIf(skipReason !== undefined)('issue 32 acceptance: kubectl 1.27–1.33 × every way to a pod, identical to a direct connection', () => {
  let work: string;
  let direct: DevCluster;
  let directKubeconfig: string;
  let bytes: BytesServer;
  /** What each kubectl got straight from a dev cluster. */
  const baseline = new Map<KubectlVersion, Observed>();

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-ways-matrix-'));
    direct = await startDevCluster({ dataDir: join(work, 'direct') });
    directKubeconfig = join(work, 'kubeconfig-direct');
    writeKubeconfig(directKubeconfig, { server: direct.url, name: 'direct' });
    bytes = await startBytesServer();
  });
  afterAll(async () => {
    await bytes?.close();
    await direct?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('direct: every kubectl execs and port-forwards (the baseline)', async () => {
    for (const version of VERSIONS) {
      const bin = findKubectl(version);
      const got = await execCat(bin, directKubeconfig);
      expect({ sha256: got.stdoutSha256, bytes: got.stdoutBytes }).toEqual({ sha256: expectedSha(), bytes: STDIN.length });
      baseline.set(version, got);
      expect(await portForward(bin, directKubeconfig, bytes, 1)).toEqual(bytes.expected(PF_BYTES, 1));
    }
  });

  describe.each(WAYS)('$way', ({ way, start }) => {
    let f: Row;
    beforeAll(async () => {
      f = await start();
    });
    afterAll(async () => {
      await f?.close();
    });

    it.each(VERSIONS)('kubectl %s: exec -i and port-forward as direct, one session each on the expected path', async (version) => {
      const bin = findKubectl(version);
      const kubeconfig = f.kubeconfig;
      const before = sessionsOf(await f.metrics());
      const kubeletBefore = counterValue(f.kubeletMetrics(), 'kubelet_websocket_streaming_requests_total');

      const got = await execCat(bin, kubeconfig);
      const direct = baseline.get(version);
      expect(direct, 'the direct run went first').toBeDefined();
      expect(got, f.failed()).toEqual(direct);
      const seed = Number(version.split('.')[1]);
      expect(await portForward(bin, kubeconfig, bytes, seed), f.failed()).toEqual(bytes.expected(PF_BYTES, seed));

      const { exec, portforward } = speaks(version);
      const paths = PATHS[way];
      const want = {
        [`exec/${exec}/${exec === 'websocket' ? paths.websocket : paths.spdyExec}`]: 1,
        [`portforward/${portforward}/${portforward === 'tunnel' ? paths.tunnel : paths.spdyPortForward}`]: 1,
      };
      // Sessions are counted when they end (a port-forward's when kubectl has gone): wait for both.
      let last: Record<string, number> = {};
      await waitFor(
        'both sessions counted',
        async () => {
          last = movedBy(before, sessionsOf(await f.metrics()));
          return Object.values(last).reduce((a, b) => a + b, 0) >= 2 ? true : undefined;
        },
        15_000,
        20,
      ).catch(() => undefined);
      expect(last, f.failed()).toEqual(want);
      // The 1.36 kubelet served every session that reached it as a WebSocket itself: the client's own
      // where they pass through; all of them behind a gateway refusing SPDY (reverse-translated to v5
      // and the tunnel); none where the proxy or the apiserver translated to SPDY.
      const websockets = (exec === 'websocket' ? 1 : 0) + (portforward === 'tunnel' ? 1 : 0);
      const atKubelet = counterValue(f.kubeletMetrics(), 'kubelet_websocket_streaming_requests_total') - kubeletBefore;
      const kubeletServes: Record<Way, number> = { 'kubelet-declaring': websockets, 'kubelet-older': 0, 'takes-websockets': websockets, 'refuses-websockets': 0, 'refuses-spdy': 2, agent: websockets };
      expect(atKubelet).toBe(kubeletServes[way]);
    });
  });
});

/** sha256 of {@link STDIN} (what `cat` gives back). */
function expectedSha(): string {
  return createHash('sha256').update(STDIN).digest('hex');
}
