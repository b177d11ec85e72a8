/**
 * The legacy (unaggregated) discovery documents of the dev cluster: `/version`, `/api`, `/apis` and
 * `/api/v1`. They are always plain `application/json`, whatever the Accept header asks for; kubectl
 * then falls back from aggregated discovery by itself.
 */
import { gitVersion } from './cluster-versions.js';

/** `GET /version` of a dev cluster playing kube-apiserver 1.`minor` (`--apiserver-version`). */
export function devClusterVersion(minor: number): Record<string, string> {
  return {
    major: '1',
    minor: String(minor),
    gitVersion: gitVersion(minor),
    gitCommit: '855e7c48de7388eb330da0f8d9d2394ee818fb8d',
    gitTreeState: 'clean',
    buildDate: '2023-08-15T10:20:15Z',
    goVersion: 'go1.20.7',
    compiler: 'gc',
    platform: 'linux/amd64',
  };
}

/** `GET /api`: the core group's versions. */
export function apiVersions(serverAddress: string): Record<string, unknown> {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

/** The named API groups the dev cluster serves (each v1 only). */
export const NAMED_GROUPS = ['authentication.k8s.io', 'authorization.k8s.io', 'discovery.k8s.io'] as const;
/** One of {@link NAMED_GROUPS}. */
export type NamedGroup = (typeof NAMED_GROUPS)[number];
/** The groups whose reviews need token authentication (authentication.k8s.io has nothing else). */
export const REVIEW_GROUPS = ['authentication.k8s.io', 'authorization.k8s.io'] as const;
/** One of {@link REVIEW_GROUPS}. */
export type ReviewGroup = (typeof REVIEW_GROUPS)[number];

/** The named groups served: all of them (authentication.k8s.io has SelfSubjectReview even without token authentication). */
export function servedGroups(_withReviews: boolean): NamedGroup[] {
  return [...NAMED_GROUPS];
}

/** `GET /apis/{group}` (and an entry of `/apis`): the group with its one version, v1. */
export function apiGroup(name: NamedGroup, withKind = true): Record<string, unknown> {
  const version = { groupVersion: `${name}/v1`, version: 'v1' };
  const group = { name, versions: [version], preferredVersion: version };
  return withKind ? { kind: 'APIGroup', apiVersion: 'v1', ...group } : group;
}

/**
 * `GET /apis`: authentication.k8s.io and authorization.k8s.io (self reviews, always) and
 * discovery.k8s.io (EndpointSlices).
 */
export function apiGroupList(withReviews = false): Record<string, unknown> {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: servedGroups(withReviews).map((g) => apiGroup(g, false)) };
}

const createOnly = (name: string, kind: string): Record<string, unknown> => ({
  name,
  singularName: name.replace(/s$/, ''),
  namespaced: false,
  kind,
  verbs: ['create'],
});

/**
 * `GET /apis/{group}/v1`: selfsubjectreviews and (`withReviews`) tokenreviews (authentication.k8s.io); selfsubjectaccessreviews,
 * selfsubjectrulesreviews and (`withReviews`) subjectaccessreviews (authorization.k8s.io);
 * endpointslices (discovery.k8s.io).
 */
export function groupResources(group: NamedGroup, withReviews = false): Record<string, unknown> {
  let resources: Record<string, unknown>[];
  if (group === 'authentication.k8s.io') resources = [...(withReviews ? [createOnly('tokenreviews', 'TokenReview')] : []), createOnly('selfsubjectreviews', 'SelfSubjectReview')];
  else if (group === 'authorization.k8s.io') {
    resources = [
      createOnly('selfsubjectaccessreviews', 'SelfSubjectAccessReview'),
      createOnly('selfsubjectrulesreviews', 'SelfSubjectRulesReview'),
      ...(withReviews ? [createOnly('subjectaccessreviews', 'SubjectAccessReview')] : []),
    ];
  } else {
    resources = [
      {
        name: 'endpointslices',
        singularName: 'endpointslice',
        namespaced: true,
        kind: 'EndpointSlice',
        verbs: ['create', 'delete', 'get', 'list', 'watch'],
      },
    ];
  }
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `${group}/v1`, resources };
}

/** `GET /api/v1`: the core resources the dev cluster serves. */
export function coreV1Resources(): Record<string, unknown> {
  const sub = (name: string, kind: string, verbs: string[]): Record<string, unknown> => ({
    name,
    singularName: '',
    namespaced: true,
    kind,
    verbs,
  });
  return {
    kind: 'APIResourceList',
    groupVersion: 'v1',
    resources: [
      { name: 'events', singularName: 'event', namespaced: true, kind: 'Event', verbs: ['create', 'delete', 'get', 'list', 'watch'], shortNames: ['ev'] },
      {
        name: 'namespaces',
        singularName: 'namespace',
        namespaced: false,
        kind: 'Namespace',
        verbs: ['get', 'list', 'watch'],
        shortNames: ['ns'],
      },
      { name: 'nodes', singularName: 'node', namespaced: false, kind: 'Node', verbs: ['get', 'list', 'watch'], shortNames: ['no'] },
      {
        name: 'pods',
        singularName: 'pod',
        namespaced: true,
        kind: 'Pod',
        verbs: ['create', 'delete', 'get', 'list', 'watch'],
        shortNames: ['po'],
        categories: ['all'],
      },
      sub('pods/attach', 'PodAttachOptions', ['create', 'get']),
      sub('pods/exec', 'PodExecOptions', ['create', 'get']),
      sub('pods/log', 'Pod', ['get']),
      sub('pods/portforward', 'PodPortForwardOptions', ['create', 'get']),
      {
        name: 'services',
        singularName: 'service',
        namespaced: true,
        kind: 'Service',
        verbs: ['create', 'delete', 'get', 'list', 'watch'],
        shortNames: ['svc'],
        categories: ['all'],
      },
    ],
  };
}
