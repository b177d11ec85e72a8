/** The merged APIGroupDiscoveryList: order, freshness of backends, upstream passthrough, encoding. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  apiregistrationVersionDiscovery,
  encodeAPIGroupDiscoveryList,
  mergedAPIGroupDiscoveryList,
  type BackendGroupVersion,
} from '../../../src/aggregation/discovery-aggregated.js';
import { apiResourceListToVersionDiscovery } from '../../../src/aggregation/discovery-convert.js';
import type { APIGroupDiscoveryList } from '../../../src/aggregation/discovery-types.js';
import { apiService } from './helpers.js';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const upstream = fixture('upstream-apigroupdiscoverylist.json').document as APIGroupDiscoveryList;
const metricsResources = apiResourceListToVersionDiscovery(fixture('metrics-server-v1beta1.json').list, 'metrics.k8s.io', 'v1beta1').resources!;

const registered = [
  apiService('v1beta1.metrics.k8s.io', 100, 100, { backend: 'kube-system/metrics-server' }),
  apiService('v1.subresources.kubevirt.io', 1000, 15, { backend: 'kubevirt/virt-api' }),
  apiService('v1alpha3.subresources.kubevirt.io', 1000, 15, { backend: 'kubevirt/virt-api' }),
  apiService('v1beta1.stable.example.com', 2000, 200),
];

const summary = (list: APIGroupDiscoveryList) =>
  list.items.map((g) => `${g.metadata.name}: ${(g.versions ?? []).map((v) => `${v.version}/${v.freshness ?? '-'}/${v.resources?.length ?? 0}`).join(',')}`);

describe('mergedAPIGroupDiscoveryList', () => {
  it('merges the upstream document with the backends, ordered and with freshness (golden)', () => {
    const backends = new Map<string, BackendGroupVersion>([
      ['v1beta1.metrics.k8s.io', { resources: metricsResources, freshness: 'Current' }],
      ['v1.subresources.kubevirt.io', { resources: [], freshness: 'Stale' }],
    ]);
    const list = mergedAPIGroupDiscoveryList({ upstream, apiServices: registered, backends });
    expect(summary(list)).toEqual([
      'apiregistration.k8s.io: v1/Current/1',
      'apps: v1/Current/1',
      'autoscaling: v2/Current/1,v1/Current/1',
      // A local APIService at 2000/200 lifts the group and makes v1beta1 preferred.
      'stable.example.com: v1beta1/Current/1,v1/Current/1',
      // The backend is down: Stale; v1alpha3 was never synced: Stale too.
      'subresources.kubevirt.io: v1/Stale/0,v1alpha3/Stale/0',
      // The registration replaces the upstream's own (stale) metrics.k8s.io.
      'metrics.k8s.io: v1beta1/Current/2',
    ]);
    // Upstream versions are copied verbatim.
    expect(list.items[1]!.versions).toEqual(upstream.items[1]!.versions);
    expect(list.items[0]!.versions![0]).toEqual(apiregistrationVersionDiscovery());
    expect(list.items[5]!.versions![0]).toEqual({ version: 'v1beta1', resources: metricsResources, freshness: 'Current' });
  });

  it('keeps the last known resources of a backend that went down, marked Stale', () => {
    const list = mergedAPIGroupDiscoveryList({ upstream: undefined, apiServices: registered.slice(0, 1), backends: new Map([['v1beta1.metrics.k8s.io', { resources: metricsResources, freshness: 'Stale' }]]) });
    expect(JSON.stringify(list.items[1])).toBe(JSON.stringify({ metadata: { name: 'metrics.k8s.io' }, versions: [{ version: 'v1beta1', resources: metricsResources, freshness: 'Stale' }] }));
  });

  it('lists only apiregistration.k8s.io with no upstream and no registrations, and drops a local GV the upstream lacks', () => {
    expect(summary(mergedAPIGroupDiscoveryList({ upstream: undefined, apiServices: [apiService('v1.ghost.io', 5000, 10)], backends: new Map() }))).toEqual(['apiregistration.k8s.io: v1/Current/1']);
  });

  it('encodes v2 and v2beta1 with the same items and their own apiVersion', () => {
    const list = mergedAPIGroupDiscoveryList({ upstream, apiServices: [], backends: new Map() });
    const v2 = JSON.parse(encodeAPIGroupDiscoveryList(list, 'v2').toString());
    const v2beta1 = JSON.parse(encodeAPIGroupDiscoveryList(list, 'v2beta1').toString());
    expect(v2.apiVersion).toBe('apidiscovery.k8s.io/v2');
    expect(v2beta1.apiVersion).toBe('apidiscovery.k8s.io/v2beta1');
    expect(v2beta1.items).toEqual(v2.items);
    expect(encodeAPIGroupDiscoveryList(list, 'v2').toString()).toMatch(/^\{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io\/v2","metadata":\{\},"items":\[/);
    // The upstream's own stale metrics.k8s.io passes through when nothing is registered for it.
    // (Unregistered, it sorts as an unknown upstream group at 1000: by name, before stable.example.com.)
    expect(summary(list).slice(3)).toEqual(['metrics.k8s.io: v1beta1/Stale/0', 'stable.example.com: v1/Current/1,v1beta1/Current/1']);
  });
});
