/** APIResourceList → APIVersionDiscovery, golden against recorded kube-apiserver and metrics-server shapes. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { apiResourceListToVersionDiscovery } from '../../../src/aggregation/discovery-convert.js';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));

describe('apiResourceListToVersionDiscovery', () => {
  it.each([
    ['metrics-server-v1beta1.json', 'metrics.k8s.io', 'v1beta1'],
    ['apps-v1-legacy.json', 'apps', 'v1'],
  ])('converts %s byte for byte', (file, group, version) => {
    const { list, aggregated } = fixture(file);
    expect(JSON.stringify(apiResourceListToVersionDiscovery(list, group, version))).toBe(JSON.stringify(aggregated));
  });

  it('creates a missing parent for an orphan subresource, with an empty responseKind', () => {
    const v = apiResourceListToVersionDiscovery({ groupVersion: 'subresources.kubevirt.io/v1', resources: [
      { name: 'virtualmachineinstances/console', namespaced: true, kind: '', verbs: ['get'] },
      { name: 'virtualmachineinstances/vnc', namespaced: true, kind: '', verbs: ['get'] },
    ] }, 'subresources.kubevirt.io', 'v1');
    expect(v.resources).toEqual([{
      resource: 'virtualmachineinstances',
      responseKind: { group: '', version: '', kind: '' },
      scope: 'Namespaced',
      singularResource: '',
      verbs: [],
      subresources: [
        { subresource: 'console', responseKind: { group: '', version: '', kind: '' }, verbs: ['get'] },
        { subresource: 'vnc', responseKind: { group: '', version: '', kind: '' }, verbs: ['get'] },
      ],
    }]);
  });

  it('rejects a scope mismatch between parent and subresource, and a non-list', () => {
    expect(() => apiResourceListToVersionDiscovery({ resources: [{ name: 'a', namespaced: false, kind: 'A', verbs: [] }, { name: 'a/b', namespaced: true, verbs: [] }] }, 'g', 'v1'))
      .toThrow('Error: Parent a (scope: Cluster) and subresource b (scope: Namespaced) scope do not match');
    expect(() => apiResourceListToVersionDiscovery({ kind: 'Status' }, 'g', 'v1')).toThrow('discovery for g/v1 is not an APIResourceList');
    expect(() => apiResourceListToVersionDiscovery(null, '', 'v1')).toThrow('discovery for v1 is not an APIResourceList');
  });

  it('omits resources for an empty list but keeps it Current', () => {
    expect(apiResourceListToVersionDiscovery({ groupVersion: 'g/v1', resources: [] }, 'g', 'v1')).toEqual({ version: 'v1', freshness: 'Current' });
  });
});
