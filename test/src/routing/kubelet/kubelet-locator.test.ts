/**
 * The kubelet locator's node cache and the route's streaming capability: a node is read once while
 * fresh (its declaredFeatures change only when the kubelet restarts), read again after the TTL, and a
 * missing node is never cached. The API is a table here; the real client-node read of
 * `status.declaredFeatures` is proven in test/security/streaming-fallback.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { declaredFeaturesOf, type NodeInfo, type PodInfo } from '../../../../src/api-client.js';
import { KubeletLocator, NODE_CACHE_TTL_MS } from '../../../../src/routing/kubelet/kubelet-locator.js';

function api(nodes: Record<string, NodeInfo | undefined>) {
  const reads: string[] = [];
  return {
    reads,
    readPod: async (_ns: string, name: string): Promise<PodInfo> => ({ nodeName: name.split('.')[0]!, containers: ['main'] }),
    readNode: async (name: string) => {
      reads.push(name);
      return nodes[name];
    },
  };
}

const target = (pod: string) => ({ subresource: 'exec' as const, namespace: 'default', pod, query: new URLSearchParams('command=sh&stdout=true') });

describe('KubeletLocator', () => {
  it('puts the node\'s declaredFeatures on the route and reads a node once while fresh', async () => {
    let now = 0;
    const nodes = { n1: { addresses: [{ type: 'InternalIP', address: '10.0.0.1' }], declaredFeatures: ['ExtendWebSocketsToKubelet'] } };
    const a = api(nodes);
    const locator = new KubeletLocator(a, { insecureSkipTlsVerify: true, preferredAddressTypes: ['InternalIP'] }, undefined, { now: () => now });
    const first = await locator.locate(target('n1.a'));
    expect(first.ok && first.route.streaming).toEqual({ kubelet: { declaredFeatures: ['ExtendWebSocketsToKubelet'] } });
    await locator.locate(target('n1.b'));
    expect(a.reads).toEqual(['n1']);
    now += NODE_CACHE_TTL_MS;
    await locator.locate(target('n1.c'));
    expect(a.reads).toEqual(['n1', 'n1']);
    locator.close();
  });

  it('a node without declaredFeatures gives an empty list; a missing node is read again next time', async () => {
    const a = api({ n1: { addresses: [{ type: 'InternalIP', address: '10.0.0.1' }] }, gone: undefined });
    const locator = new KubeletLocator(a, { insecureSkipTlsVerify: true, preferredAddressTypes: ['InternalIP'] });
    const r = await locator.locate(target('n1.a'));
    expect(r.ok && r.route.streaming).toEqual({ kubelet: { declaredFeatures: [] } });
    expect((await locator.locate(target('gone.a'))).ok).toBe(false);
    expect((await locator.locate(target('gone.b'))).ok).toBe(false);
    expect(a.reads).toEqual(['n1', 'gone', 'gone']);
    locator.close();
  });
});

describe('declaredFeaturesOf', () => {
  it.each([
    ['{"status":{"declaredFeatures":["ExtendWebSocketsToKubelet","X"]}}', ['ExtendWebSocketsToKubelet', 'X']],
    ['{"status":{"declaredFeatures":["A",3,null,"B"]}}', ['A', 'B']],
    ['{"status":{"declaredFeatures":"ExtendWebSocketsToKubelet"}}', []],
    ['{"status":{}}', []],
    ['null', []],
    ['not json', []],
  ])('%s', (json, want) => expect(declaredFeaturesOf(json)).toEqual(want));
});
