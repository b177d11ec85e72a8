/**
 * Issue 32, item 5: `kubeletVersion: '1.35'` (`dev-cluster --kubelet-version 1.35`), an older kubelet
 * behind the default 1.36 apiserver. Its node declares nothing, so the apiserver look-alike translates
 * v5 and unwraps the tunnel itself, as kube-apiserver 1.31–1.35 does (and 1.36 for such a node):
 * kubectl 1.33 still works over WebSockets, and the counters say `translated_at_apiserver` /
 * `tunneled_at_apiserver` while the kubelet's counter stays at zero.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { downloadDigest, startBytesServer, type BytesServer } from '../../helpers/http-fixture.js';
import { kubectlE2eSkipReason } from '../../helpers/kubectl.js';
import { startKubectlCluster, wayCounts, withPortForward, type KubectlCluster } from './streaming-ways.js';

describe.skipIf(kubectlE2eSkipReason() !== undefined)('an older kubelet (1.35): the apiserver translates, kubectl 1.33 still works', () => {
  let c: KubectlCluster;
  let bytes: BytesServer;

  beforeAll(async () => {
    c = await startKubectlCluster({ kubeletVersion: '1.35' });
    bytes = await startBytesServer();
  });
  afterAll(async () => {
    await c?.close();
    await bytes?.close();
  });

  it('has a node without declaredFeatures, kubelet v1.35.0, behind apiserver v1.36.0', async () => {
    const node = (await (await fetch(`${c.cluster.url}/api/v1/nodes/dev-node`)).json()) as { status: Record<string, unknown> & { nodeInfo: { kubeletVersion: string } } };
    expect(node.status).not.toHaveProperty('declaredFeatures');
    expect(node.status.nodeInfo.kubeletVersion).toBe('v1.35.0');
    expect(c.cluster.versions).toEqual({ apiserver: 36, kubelet: 35 });
  });

  it('exec -i and attach: translated at the apiserver (translator code 200), never at the kubelet', async () => {
    const moved = await c.during(async () => {
      const cat = await c.kubectl('1.33', ['exec', '-i', 'demo', '--', 'sh', '-c', 'cat; exit 4'], Buffer.from('older kubelet\n'));
      expect(cat.code, cat.summary).toBe(4);
      expect(cat.out).toBe('older kubelet\n');
      const attach = await c.kubectl('1.33', ['attach', '-i', 'demo'], Buffer.from('echo attached-translated\nexit 0\n'));
      expect(attach.code, attach.summary).toBe(0);
      expect(attach.out).toContain('attached-translated');
    });
    expect(moved).toEqual({ 'apiserver/exec/translated_at_apiserver': 1, 'apiserver/attach/translated_at_apiserver': 1, 'translator/200': 2 });
  });

  it('port-forward: tunnelled at the apiserver (tunnel code 101)', async () => {
    const moved = await c.during(async () => {
      const d = await withPortForward(c, '1.33', bytes.port, (local) => downloadDigest(`http://127.0.0.1:${local}/bytes/2000000?seed=9`));
      expect(d.sha256).toBe(bytes.expected(2_000_000, 9).sha256);
    });
    expect(moved).toEqual({ 'apiserver/portforward/tunneled_at_apiserver': 1, 'tunnel/101': 1 });
    expect(Object.keys(await wayCounts(c.cluster)).filter((k) => k.startsWith('kubelet/'))).toEqual([]);
  });
});
