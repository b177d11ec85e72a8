/**
 * Issue 32, item 5: the dev cluster's default, a 1.36 apiserver with a 1.36 kubelet that declares
 * `ExtendWebSocketsToKubelet`. Real kubectl 1.33 against it directly: exec -i (stdin EOF by the v5
 * CLOSE frame), exec -t, attach, cp and port-forward over the tunnel all go over WebSockets, passed
 * by the apiserver to the kubelet — proven by the dev cluster's counters, which move by exactly the
 * sessions run (kubectl would fall back to SPDY silently). kubectl 1.27 (SPDY) still works and moves
 * none of them.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { downloadDigest, startBytesServer, type BytesServer } from '../../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, kubectlEnv } from '../../helpers/kubectl.js';
import { writeDeterministicFile } from '../../helpers/random-data.js';
import { hasLine, startTmux } from '../../helpers/tty.js';
import { startKubectlCluster, withPortForward, type KubectlCluster } from './streaming-ways.js';

const CP_BYTES = 3_000_000;
const PF_BYTES = 5_000_000;

describe.skipIf(kubectlE2eSkipReason() !== undefined)('a modern kubelet (1.36, the default): kubectl 1.33 over WebSockets, passed to the kubelet', () => {
  let c: KubectlCluster;
  let bytes: BytesServer;

  beforeAll(async () => {
    c = await startKubectlCluster();
    bytes = await startBytesServer();
  });
  afterAll(async () => {
    await c?.close();
    await bytes?.close();
  });

  it('declares ExtendWebSocketsToKubelet on its node (get, list, watch) and plays v1.36.0', async () => {
    const node = (await (await fetch(`${c.cluster.url}/api/v1/nodes/dev-node`)).json()) as { status: { declaredFeatures?: string[]; nodeInfo: { kubeletVersion: string } } };
    expect(node.status.declaredFeatures).toEqual(['ExtendWebSocketsToKubelet']);
    expect(node.status.nodeInfo.kubeletVersion).toBe('v1.36.0');
    const list = (await (await fetch(`${c.cluster.url}/api/v1/nodes`)).json()) as { items: { status: { declaredFeatures?: string[] } }[] };
    expect(list.items.map((n) => n.status.declaredFeatures)).toEqual([['ExtendWebSocketsToKubelet']]);
    const ac = new AbortController();
    const watch = await fetch(`${c.cluster.url}/api/v1/nodes?watch=1`, { signal: ac.signal });
    const reader = watch.body!.getReader();
    let got = '';
    while (!got.includes('\n')) got += new TextDecoder().decode((await reader.read()).value);
    ac.abort();
    expect(JSON.parse(got.split('\n')[0]!)).toMatchObject({ type: 'ADDED', object: { status: { declaredFeatures: ['ExtendWebSocketsToKubelet'] } } });
    expect(((await (await fetch(`${c.cluster.url}/version`)).json()) as { gitVersion: string }).gitVersion).toBe('v1.36.0');
  });

  it('exec -i: stdin reaches the command, its EOF (v5 CLOSE) ends it, exit codes and stderr come back', async () => {
    const input = Buffer.from('line one\nline two\n');
    const moved = await c.during(async () => {
      const cat = await c.kubectl('1.33', ['exec', '-i', 'demo', '--', 'sh', '-c', 'cat; echo "eof seen" >&2; exit 7'], input);
      expect(cat.code, cat.summary).toBe(7);
      expect(cat.out).toBe('line one\nline two\n');
      expect(cat.stderr).toContain('eof seen');
    });
    expect(moved).toEqual({ 'apiserver/exec/proxied_to_kubelet': 1, 'kubelet/exec': 1 });
  });

  it("exec -t under a terminal: a tty of the window's size (resize channel), exit 0", async () => {
    const moved = await c.during(async () => {
      const term = await startTmux({ argv: [findKubectl('1.33'), '--kubeconfig', c.kubeconfig, 'exec', '-it', 'demo', '--', 'sh'], env: kubectlEnv(c.kubeconfig), width: 90, height: 25, cwd: c.work });
      try {
        const size = (): Promise<void> => term.sendLine('stty size');
        await size();
        await term.waitForScreen(hasLine('25 90'), 30_000, { onPoll: size, retryEveryMs: 1000 });
        await term.sendLine('exit 0');
        expect(await term.waitForExit(15_000)).toBe(0);
      } finally {
        await term.kill();
      }
    });
    expect(moved).toEqual({ 'apiserver/exec/proxied_to_kubelet': 1, 'kubelet/exec': 1 });
  });

  it('attach -i drives the main shell', async () => {
    const moved = await c.during(async () => {
      const attach = await c.kubectl('1.33', ['attach', '-i', 'demo'], Buffer.from('echo attached-over-v5\nexit 0\n'));
      expect(attach.code, attach.summary).toBe(0);
      expect(attach.out).toContain('attached-over-v5');
    });
    expect(moved).toEqual({ 'apiserver/attach/proxied_to_kubelet': 1, 'kubelet/attach': 1 });
  });

  it(`cp ${CP_BYTES / 1e6} MB into the pod and back, byte-exact`, async () => {
    const digest = await writeDeterministicFile(join(c.work, 'up.bin'), 32, CP_BYTES);
    const seen = c.cluster.requests.length;
    const moved = await c.during(async () => {
      const up = await c.kubectl('1.33', ['cp', 'up.bin', 'demo:up.bin']);
      expect(up.code, up.summary).toBe(0);
      const down = await c.kubectl('1.33', ['cp', 'demo:up.bin', 'down.bin']);
      expect(down.code, down.summary).toBe(0);
    });
    expect(createHash('sha256').update(readFileSync(join(c.work, 'down.bin'))).digest('hex')).toBe(digest.sha256);
    // kubectl cp runs more than one exec (tar, and checks around it): each was a v5 WebSocket, counted once.
    const execs = c.cluster.requests.slice(seen).filter((r) => r.upgrade && /\/pods\/demo\/exec\?/.test(r.url));
    expect(execs.length).toBeGreaterThanOrEqual(2);
    expect(execs.map((r) => `${r.headers.upgrade} ${r.headers['sec-websocket-protocol']?.split(',')[0]}`)).toEqual(execs.map(() => 'websocket v5.channel.k8s.io'));
    expect(moved).toEqual({ 'apiserver/exec/proxied_to_kubelet': execs.length, 'kubelet/exec': execs.length });
  });

  it(`port-forward over the tunnel: ${PF_BYTES / 1e6} MB byte-exact`, async () => {
    const moved = await c.during(async () => {
      const d = await withPortForward(c, '1.33', bytes.port, (local) => downloadDigest(`http://127.0.0.1:${local}/bytes/${PF_BYTES}?seed=5`));
      expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(bytes.expected(PF_BYTES, 5));
    });
    expect(moved).toEqual({ 'apiserver/portforward/proxied_to_kubelet': 1, 'kubelet/portforward': 1 });
  });

  it('kubectl 1.27 (SPDY) still works: exec -i, cp, port-forward; no WebSocket counter moves', async () => {
    const moved = await c.during(async () => {
      const cat = await c.kubectl('1.27', ['exec', '-i', 'demo', '--', 'cat'], Buffer.from('spdy stdin\n'));
      expect(cat.code, cat.summary).toBe(0);
      expect(cat.out).toBe('spdy stdin\n');
      const down = await c.kubectl('1.27', ['cp', 'demo:up.bin', 'down-127.bin']);
      expect(down.code, down.summary).toBe(0);
      const d = await withPortForward(c, '1.27', bytes.port, (local) => downloadDigest(`http://127.0.0.1:${local}/bytes/100000?seed=6`));
      expect(d.sha256).toBe(bytes.expected(100_000, 6).sha256);
    });
    expect(createHash('sha256').update(readFileSync(join(c.work, 'down-127.bin'))).digest('hex')).toBe(createHash('sha256').update(readFileSync(join(c.work, 'up.bin'))).digest('hex'));
    expect(moved).toEqual({});
  });
});
