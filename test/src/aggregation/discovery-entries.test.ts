/** discoveryEntries: registered APIServices plus the upstream's group-versions, with their priorities. */
import { describe, expect, it } from 'vitest';
import { discoveryEntries, upstreamGroupsOf } from '../../../src/aggregation/discovery-entries.js';
import { apiService } from './helpers.js';

const prio = (entries: ReturnType<typeof discoveryEntries>) =>
  Object.fromEntries(entries.map((e) => [e.metadata.name, [e.spec.groupPriorityMinimum, e.spec.versionPriority, e.servedBy]]));

describe('discoveryEntries', () => {
  it('gives built-in upstream group-versions kube-apiserver\'s priorities', () => {
    expect(prio(discoveryEntries([{ name: 'apps', versions: ['v1'] }, { name: 'autoscaling', versions: ['v2', 'v1'] }], []))).toEqual({
      'v1.apps': [17800, 15, 'upstream'],
      'v2.autoscaling': [17500, 30, 'upstream'],
      'v1.autoscaling': [17500, 15, 'upstream'],
    });
  });

  it('gives unknown groups the CRD rule and keeps the upstream\'s version order', () => {
    // The upstream prefers v1beta1 over v1 here (its own priorities): that order survives.
    expect(prio(discoveryEntries([{ name: 'odd.example.io', versions: ['v1beta1', 'v1'] }], []))).toEqual({
      'v1beta1.odd.example.io': [1000, 101, 'upstream'],
      'v1.odd.example.io': [1000, 100, 'upstream'],
    });
  });

  it('places a version missing from the table where the upstream lists it', () => {
    expect(prio(discoveryEntries([{ name: 'resource.k8s.io', versions: ['v1', 'v1beta2', 'v1beta1'] }], []))).toEqual({
      'v1.resource.k8s.io': [16200, 16, 'upstream'],
      'v1beta2.resource.k8s.io': [16200, 15, 'upstream'],
      'v1beta1.resource.k8s.io': [16200, 9, 'upstream'],
    });
    expect(prio(discoveryEntries([{ name: 'apps', versions: ['v1', 'v1alpha9'] }], []))['v1alpha9.apps']).toEqual([17800, 14, 'upstream']);
  });

  it('lets a registered APIService win for its group-version, local or remote, and keeps the union', () => {
    const entries = discoveryEntries([{ name: 'metrics.k8s.io', versions: ['v1beta1'] }, { name: 'stable.example.com', versions: ['v1', 'v1beta1'] }], [
      apiService('v1beta1.metrics.k8s.io', 100, 100, { backend: 'kube-system/metrics-server' }),
      apiService('v1.stable.example.com', 2000, 100),
      apiService('v2.stable.example.com', 2000, 50, { backend: 'url:https://10.0.0.1:8443' }),
    ]);
    expect(prio(entries)).toEqual({
      'v1beta1.metrics.k8s.io': [100, 100, 'backend'],
      'v1.stable.example.com': [2000, 100, 'upstream'],
      'v2.stable.example.com': [2000, 50, 'backend'],
      'v1beta1.stable.example.com': [1000, 100, 'upstream'],
    });
    expect(entries.find((e) => e.metadata.name === 'v1beta1.metrics.k8s.io')?.apiService?.spec.service?.name).toBe('metrics-server');
  });

  it('leaves out apiregistration.k8s.io and the core group', () => {
    const entries = discoveryEntries([{ name: 'apiregistration.k8s.io', versions: ['v1'] }, { name: '', versions: ['v1'] }], [apiService('v1.', 18000, 1)]);
    expect(entries).toEqual([]);
  });

  it('reads an APIGroupList, skipping malformed groups', () => {
    expect(upstreamGroupsOf({ groups: [{ name: 'apps', versions: [{ version: 'v1' }, { version: 3 }] }, { name: 7, versions: [] }, { name: 'x' }] })).toEqual([{ name: 'apps', versions: ['v1'] }]);
    expect(upstreamGroupsOf(undefined)).toEqual([]);
  });
});
