/**
 * `renderKubeconfig`: one context as before, or one context per entry (the multi-cluster demo), the
 * first current; repeated names are refused rather than silently merged.
 */
import { describe, expect, it } from 'vitest';
import { renderKubeconfig } from '../../dev/kubeconfig.js';

describe('renderKubeconfig', () => {
  it('one entry: its cluster, user and context, current', () => {
    expect(JSON.parse(renderKubeconfig({ server: 'http://127.0.0.1:6443', name: 'demo', token: 't' }))).toEqual({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'demo', cluster: { server: 'http://127.0.0.1:6443' } }],
      users: [{ name: 'demo', user: { token: 't' } }],
      contexts: [{ name: 'demo', context: { cluster: 'demo', user: 'demo', namespace: 'default' } }],
      'current-context': 'demo',
      preferences: {},
    });
  });

  it('several entries: one context each, in order, the first current', () => {
    const config = JSON.parse(
      renderKubeconfig([
        { server: 'http://127.0.0.1:6443/clusters/one', name: 'one' },
        { server: 'http://127.0.0.1:6443/clusters/two', name: 'two', namespace: 'kube-system' },
      ]),
    );
    expect(config.clusters).toEqual([
      { name: 'one', cluster: { server: 'http://127.0.0.1:6443/clusters/one' } },
      { name: 'two', cluster: { server: 'http://127.0.0.1:6443/clusters/two' } },
    ]);
    expect(config.contexts).toEqual([
      { name: 'one', context: { cluster: 'one', user: 'one', namespace: 'default' } },
      { name: 'two', context: { cluster: 'two', user: 'two', namespace: 'kube-system' } },
    ]);
    expect(config['current-context']).toBe('one');
  });

  it('refuses repeated names and an empty list', () => {
    expect(() => renderKubeconfig([{ server: 'http://a' }, { server: 'http://b' }])).toThrow(/context names repeat: kube-stream-proxy, kube-stream-proxy/);
    expect(() => renderKubeconfig([])).toThrow(/no context/);
  });
});
