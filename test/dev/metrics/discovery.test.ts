import { describe, expect, it } from 'vitest';
import {
  aggregatedContentType,
  apiGroup,
  apiGroupDiscoveryList,
  apiGroupList,
  apiResourceList,
  negotiateApisDocument,
} from '../../../dev/metrics/discovery.js';

const GV = '{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}';

describe('legacy discovery (golden, as metrics-server serves it)', () => {
  it('/apis', () => {
    expect(JSON.stringify(apiGroupList())).toBe(
      `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"metrics.k8s.io","versions":[${GV}],"preferredVersion":${GV}}]}`,
    );
  });
  it('/apis/metrics.k8s.io', () => {
    expect(JSON.stringify(apiGroup())).toBe(`{"kind":"APIGroup","apiVersion":"v1","name":"metrics.k8s.io","versions":[${GV}],"preferredVersion":${GV}}`);
  });
  it('/apis/metrics.k8s.io/v1beta1', () => {
    expect(JSON.stringify(apiResourceList())).toBe(
      '{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"metrics.k8s.io/v1beta1","resources":[' +
        '{"name":"nodes","singularName":"","namespaced":false,"kind":"NodeMetrics","verbs":["get","list"]},' +
        '{"name":"pods","singularName":"","namespaced":true,"kind":"PodMetrics","verbs":["get","list"]}]}',
    );
  });
});

describe('aggregated discovery', () => {
  it.each(['v2', 'v2beta1'] as const)('%s document (golden)', (v) => {
    expect(JSON.stringify(apiGroupDiscoveryList(v))).toBe(
      `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/${v}","metadata":{},"items":[{"metadata":{"name":"metrics.k8s.io","creationTimestamp":null},` +
        '"versions":[{"version":"v1beta1","resources":[' +
        '{"resource":"nodes","responseKind":{"group":"metrics.k8s.io","version":"v1beta1","kind":"NodeMetrics"},"scope":"Cluster","singularResource":"","verbs":["get","list"]},' +
        '{"resource":"pods","responseKind":{"group":"metrics.k8s.io","version":"v1beta1","kind":"PodMetrics"},"scope":"Namespaced","singularResource":"","verbs":["get","list"]}],' +
        '"freshness":"Current"}]}]}',
    );
    expect(aggregatedContentType(v)).toBe(`application/json;g=apidiscovery.k8s.io;v=${v};as=APIGroupDiscoveryList`);
  });

  const V2 = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';
  const V2BETA1 = 'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList';
  it.each([
    ['no Accept', undefined, 'legacy'],
    ['plain JSON', 'application/json', 'legacy'],
    ['a wildcard', '*/*', 'legacy'],
    ['kubectl >= 1.30', `${V2},${V2BETA1},application/json`, 'v2'],
    ['kubectl 1.26-1.29', `${V2BETA1},application/json`, 'v2beta1'],
    ['with profile=nopeer and reordered parameters', 'application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io;profile=nopeer', 'v2'],
    ['an unknown aggregated version first', 'application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,' + V2BETA1, 'v2beta1'],
    ['q weights', `application/json;q=0.5,${V2};q=0.9`, 'v2'],
    ['protobuf only, then JSON', 'application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json', 'legacy'],
  ])('%s → %s', (_name, accept, want) => {
    expect(negotiateApisDocument(accept)).toBe(want);
  });
});
