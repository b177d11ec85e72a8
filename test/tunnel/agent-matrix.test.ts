/**
 * The rest of issue 14's exec matrix through agent tunnels (Acceptance bullet 1): two dev clusters
 * (pods `alpha` and `beta`), one agent process each, one proxy without a primary upstream (the
 * default `--upstream-streaming auto`). kubectl 1.27 speaks SPDY (passthrough over the tunnel).
 * kubectl 1.33 speaks WebSocket, and the proxy asks each cluster in it first (issue 32), so the two
 * clusters cover both ways (test/tunnel/stream-ways.ts):
 * - `one` is a modern cluster (apiserver and kubelet 1.36): v5 and the port-forward tunnel are passed
 *   through to it (`proxied_to_upstream`), and its kubelet serves them itself;
 * - `two` is an old one (apiserver 1.29, which refuses v5 and the tunnel before the 101): the proxy
 *   falls back to its own translator and tunnel, the SPDY leg riding the agent's tunnel.
 * Every session's way is proven by the counters of the proxy and of the cluster, moved by exactly the
 * sessions run. Covered here, each client through both clusters: `exec -it` with a resize under a
 * real terminal (tmux), `attach -i` to the pod's main process, `cp` 20 MB both ways (sha256 of the
 * pod's copy and of the copy back), `port-forward` 10 MB plus 5 concurrent connections (sha256 each).
 * echo / exit code / stdin / 20 MB stdin / 100 MB stdout / watch are in agent-kubectl.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { sha256File } from '../helpers/hash.js';
import { startBytesServer, downloadDigest, type BytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, kubectlEnv, runKubectl, startKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { writeDeterministicFile } from '../helpers/random-data.js';
import { expectShellFollowsResize, hasLine, startTmux } from '../helpers/tty.js';
import { startTunnelFixture, type TunnelFixture } from './tunnel-fixture.js';
import { CLUSTER_KIND_OPTIONS, foldEarlyClientExits, moved, waysOf, websocketWays, type ClusterKind, type Ways } from './stream-ways.js';

const skipReason = kubectlE2eSkipReason();
const MB = 1_000_000;
const CP_BYTES = 20 * MB;
const PF_BYTES = 10 * MB;
const PF_CONCURRENT = 5;
const PF_CONCURRENT_BYTES = 2 * MB;

/** The pod that exists only in each cluster. */
const POD: Record<string, string> = { one: 'alpha', two: 'beta' };

/** Each cluster's kind: a modern one the proxy passes WebSockets to, an old one it translates for. */
const KIND: Record<string, ClusterKind> = { one: 'modern', two: 'old-apiserver' };

/** kubectl 1.27 speaks SPDY only; 1.33 WebSocket (v5 exec/attach, the port-forward tunnel). */
const CLIENTS: { version: KubectlVersion; websocket: boolean }[] = [
  { version: '1.27', websocket: false },
  { version: '1.33', websocket: true },
];

/** The counter that says how many WebSocket sessions of `subresource` went to a cluster of `kind`. */
function sessionsKey(kind: ClusterKind, subresource: 'exec' | 'attach' | 'portforward'): string {
  return `proxy/${subresource}/${kind === 'old-apiserver' ? (subresource === 'portforward' ? 'tunneled_at_apiserver' : 'translated_at_apiserver') : 'proxied_to_upstream'}`;
}

describe.skipIf(skipReason !== undefined)('kubectl matrix through /clusters/NAME and agent tunnels', () => {
  let fx: TunnelFixture;
  let bytes: BytesServer;
  let cpSha: string;

  beforeAll(async () => {
    fx = await startTunnelFixture({ one: ['alpha'], two: ['beta'] }, { one: () => CLUSTER_KIND_OPTIONS[KIND.one!], two: () => CLUSTER_KIND_OPTIONS[KIND.two!] });
    bytes = await startBytesServer();
    cpSha = (await writeDeterministicFile(join(fx.work, 'cp-source.bin'), 41, CP_BYTES)).sha256;
    const agents = ['one', 'two'].map((c) => fx.startAgent(c));
    await Promise.all(agents.map((a) => a.waitForOutput(/tunnel established/, 30_000)));
  }, 90_000);

  afterAll(async () => {
    await bytes?.close();
    await fx?.close();
  });

  const tunnelStreams = (cluster: string): Promise<number> => fx.metric('kube_stream_proxy_tunnel_streams_opened_total', { cluster });

  /**
   * Run `fn` and check the way it took: for 1.33, exactly `sessions` WebSocket sessions of
   * `subresource` went the way of `cluster`'s kind (passed through, or translated at the proxy) and
   * nothing else moved; for 1.27 (SPDY) no WebSocket counter moved. `cluster`'s tunnel carried new
   * streams either way. `cpDownload`: `fn` ran one `kubectl cp POD:FILE …`, which may leave before its
   * session's Status (foldEarlyClientExits).
   */
  const through = async (websocket: boolean, cluster: string, subresource: 'exec' | 'attach' | 'portforward', sessions: number | 'some', fn: () => Promise<void>, cpDownload = false): Promise<void> => {
    const [before, streamsBefore] = [await waysOf(fx), await tunnelStreams(cluster)];
    await fn();
    const now = async (): Promise<Ways> => moved(before, await waysOf(fx));
    if (!websocket) expect(await now()).toEqual({});
    else {
      // The way is counted when it is chosen; a translated session's code when it ends.
      const n = sessions === 'some' ? ((await now())[sessionsKey(KIND[cluster]!, subresource)] ?? 0) : sessions;
      expect(n).toBeGreaterThan(0);
      const settled = async (): Promise<Ways> => (cpDownload ? foldEarlyClientExits(await now(), 'proxy').ways : now());
      await expect.poll(settled, { timeout: 5_000 }).toEqual(websocketWays(KIND[cluster]!, cluster, subresource, n));
      expect(foldEarlyClientExits(await now(), 'proxy').clientGone, 'at most the download left before its Status').toBeLessThanOrEqual(cpDownload ? 1 : 0);
    }
    expect(await tunnelStreams(cluster)).toBeGreaterThan(streamsBefore);
  };

  describe.each(CLIENTS)('kubectl $version', ({ version, websocket }) => {
    const bin = (): string => findKubectl(version);
    const tag = version.replace('.', '');

    it.each(['one', 'two'])('exec -it under a terminal through /clusters/%s: stty size follows the window', (cluster) =>
      through(websocket, cluster, 'exec', 1, async () => {
        const kubeconfig = fx.kubeconfigs[cluster]!;
        const tty = await startTmux({
          argv: [bin(), '--kubeconfig', kubeconfig, 'exec', '-it', POD[cluster]!, '--', 'sh'],
          env: kubectlEnv(kubeconfig),
          width: 100,
          height: 30,
          cwd: fx.work,
        });
        try {
          await expectShellFollowsResize(tty);
          // The shell runs in this cluster's pod: its working directory is that pod's.
          await tty.sendLine('echo "POD=$(basename "$PWD")"');
          await tty.waitForScreen(hasLine(`POD=${POD[cluster]}`), 15_000);
          await tty.sendLine('exit 0');
          expect(await tty.waitForExit(15_000)).toBe(0);
        } finally {
          await tty.kill();
        }
      }),
    );

    it.each(['one', 'two'])('attach -i through /clusters/%s drives the pod\'s main shell', (cluster) =>
      through(websocket, cluster, 'attach', 1, async () => {
        const main = fx.clusters[cluster]!.pods.get('default', POD[cluster]!)!.mains.get(POD[cluster]!)!;
        const restartsBefore = main.restartCount;
        const marker = `attached-${tag}-${cluster}`;
        const r = await runKubectl(bin(), ['attach', '-i', POD[cluster]!], {
          kubeconfig: fx.kubeconfigs[cluster]!,
          stdin: Buffer.from(`echo ${marker}-$((6*7))\nexit 0\n`),
          timeoutMs: 60_000,
        });
        expect(r.code, summary(r)).toBe(0);
        expect(r.stdout.toString()).toContain(`${marker}-42\n`);
        // `exit 0` ended the main process itself (not an exec'd one): the container restarts it.
        await expect.poll(() => main.restartCount, { timeout: 10_000 }).toBeGreaterThan(restartsBefore);
      }),
    );

    it.each(['one', 'two'])(`cp ${CP_BYTES / MB} MB to the pod and back through /clusters/%s (sha256)`, (cpCluster) =>
      through(websocket, cpCluster, 'exec', 'some', async () => {
        const pod = POD[cpCluster]!;
        const kubeconfig = fx.kubeconfigs[cpCluster]!;
        const remote = `up-${tag}-${cpCluster}.bin`;
        const up = await runKubectl(bin(), ['cp', 'cp-source.bin', `${pod}:${remote}`], { kubeconfig, cwd: fx.work, timeoutMs: 120_000 });
        expect(up.code, summary(up)).toBe(0);
        // The upload is checked on its own (in the pod's working directory of this cluster), so a
        // download bug can't hide an upload bug.
        expect(await sha256File(join(fx.clusters[cpCluster]!.dataDir, 'default', pod, remote))).toEqual({ sha256: cpSha, byteLength: CP_BYTES });
        const down = await runKubectl(bin(), ['cp', `${pod}:${remote}`, `down-${tag}-${cpCluster}.bin`], { kubeconfig, cwd: fx.work, timeoutMs: 120_000 });
        expect(down.code, summary(down)).toBe(0);
        expect(await sha256File(join(fx.work, `down-${tag}-${cpCluster}.bin`))).toEqual({ sha256: cpSha, byteLength: CP_BYTES });
      }, true),
      180_000,
    );

    it.each(['one', 'two'])(`port-forward through /clusters/%s: ${PF_BYTES / MB} MB and ${PF_CONCURRENT} concurrent connections, byte-exact`, (pfCluster) =>
      // kubectl 1.33 port-forwards over WebSocket: one session, whatever the connections; 1.27 none.
      through(websocket, pfCluster, 'portforward', 1, async () => {
        const requestsBefore = bytes.requests;
        const pf = startKubectl(bin(), ['port-forward', `pod/${POD[pfCluster]}`, `:${bytes.port}`], { kubeconfig: fx.kubeconfigs[pfCluster]!, env: {} });
        let exit: Awaited<ReturnType<typeof pf.stop>>;
        try {
          const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytes.port}\\b`), 30_000);
          const local = `http://127.0.0.1:${m[1]}`;
          const big = await downloadDigest(`${local}/bytes/${PF_BYTES}?seed=42`);
          expect(big.status).toBe(200);
          expect({ sha256: big.sha256, byteLength: big.byteLength }).toEqual(bytes.expected(PF_BYTES, 42));
          const seeds = Array.from({ length: PF_CONCURRENT }, (_, i) => 43 + i);
          const many = await Promise.all(seeds.map((s) => downloadDigest(`${local}/bytes/${PF_CONCURRENT_BYTES}?seed=${s}`)));
          many.forEach((d, i) => {
            expect(d.status).toBe(200);
            expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(bytes.expected(PF_CONCURRENT_BYTES, seeds[i]));
          });
          expect(bytes.requests - requestsBefore).toBe(1 + PF_CONCURRENT);
        } finally {
          exit = await pf.stop('SIGINT', 10_000);
        }
        const { stdout, stderr } = pf.output();
        // kubectl port-forward handles SIGINT and returns normally: exit 0, not killed by us.
        expect(exit, `${pf.command}\nstdout: ${stdout}\nstderr: ${stderr}`).toEqual({ code: 0, signal: null, killed: false });
      }),
      180_000,
    );
  });
});
