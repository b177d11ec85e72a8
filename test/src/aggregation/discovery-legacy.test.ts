/** Legacy /apis and /apis/<group>: kube-aggregator's merge, golden against a recorded upstream list. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mergedAPIGroup, mergedAPIGroupList } from '../../../src/aggregation/discovery-legacy.js';
import { apiService } from './helpers.js';

const upstream = JSON.parse(readFileSync(new URL('./fixtures/upstream-apigrouplist.json', import.meta.url), 'utf8')).list;

const registered = [
  apiService('v1beta1.metrics.k8s.io', 100, 100, { backend: 'kube-system/metrics-server' }),
  apiService('v1alpha3.subresources.kubevirt.io', 1000, 15, { backend: 'kubevirt/virt-api' }),
  apiService('v1.subresources.kubevirt.io', 1000, 15, { backend: 'kubevirt/virt-api' }),
  apiService('v1.stable.example.com', 2000, 100),
];

const summary = (groups: Array<{ name: string; versions: Array<{ version: string }>; preferredVersion: { version: string } }>) =>
  groups.map((g) => `${g.name}: ${g.versions.map((v) => v.version).join(',')} (${g.preferredVersion.version})`);

describe('mergedAPIGroupList', () => {
  it('merges and orders like kube-aggregator (golden)', () => {
    const list = mergedAPIGroupList(upstream, registered);
    expect(list.kind).toBe('APIGroupList');
    expect(list.apiVersion).toBe('v1');
    expect(summary(list.groups)).toEqual([
      'apiregistration.k8s.io: v1 (v1)',
      'apps: v1 (v1)',
      'events.k8s.io: v1 (v1)',
      'authentication.k8s.io: v1 (v1)',
      'authorization.k8s.io: v1 (v1)',
      'autoscaling: v2,v1 (v2)',
      'batch: v1 (v1)',
      'resource.k8s.io: v1,v1beta2,v1beta1 (v1)',
      'flowcontrol.apiserver.k8s.io: v1,v1beta3 (v1)',
      'stable.example.com: v1,v1beta1 (v1)',
      'acme.example.io: v1 (v1)',
      'subresources.kubevirt.io: v1,v1alpha3 (v1)',
      'metrics.k8s.io: v1beta1 (v1beta1)',
    ]);
    expect(list.groups[5]).toEqual({
      name: 'autoscaling',
      versions: [{ groupVersion: 'autoscaling/v2', version: 'v2' }, { groupVersion: 'autoscaling/v1', version: 'v1' }],
      preferredVersion: { groupVersion: 'autoscaling/v2', version: 'v2' },
    });
  });

  it('lists the registered groups alone (after apiregistration.k8s.io) when the upstream list is unknown', () => {
    expect(summary(mergedAPIGroupList(undefined, registered).groups)).toEqual([
      'apiregistration.k8s.io: v1 (v1)',
      'stable.example.com: v1 (v1)',
      'subresources.kubevirt.io: v1,v1alpha3 (v1)',
      'metrics.k8s.io: v1beta1 (v1beta1)',
    ]);
  });

  it('has a stable byte form (what the cache hashes)', () => {
    expect(JSON.stringify(mergedAPIGroupList(undefined, registered.slice(0, 1)))).toBe(
      '{"kind":"APIGroupList","apiVersion":"v1","groups":[' +
        '{"name":"apiregistration.k8s.io","versions":[{"groupVersion":"apiregistration.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apiregistration.k8s.io/v1","version":"v1"}},' +
        '{"name":"metrics.k8s.io","versions":[{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}],"preferredVersion":{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}}]}',
    );
  });
});

describe('mergedAPIGroup', () => {
  it('answers a registered group with kind APIGroup, including the upstream\'s other versions', () => {
    const g = mergedAPIGroup('stable.example.com', upstream, [...registered, apiService('v2.stable.example.com', 2000, 200, { backend: 'ns/api' })]);
    expect(g).toEqual({
      kind: 'APIGroup',
      apiVersion: 'v1',
      name: 'stable.example.com',
      versions: [
        { groupVersion: 'stable.example.com/v2', version: 'v2' },
        { groupVersion: 'stable.example.com/v1', version: 'v1' },
        { groupVersion: 'stable.example.com/v1beta1', version: 'v1beta1' },
      ],
      preferredVersion: { groupVersion: 'stable.example.com/v2', version: 'v2' },
    });
  });

  it('answers apiregistration.k8s.io itself and leaves unregistered groups to the upstream', () => {
    expect(mergedAPIGroup('apiregistration.k8s.io', upstream, [])?.preferredVersion.groupVersion).toBe('apiregistration.k8s.io/v1');
    expect(mergedAPIGroup('apps', upstream, registered)).toBeUndefined();
    expect(mergedAPIGroup('', upstream, registered)).toBeUndefined();
  });
});
