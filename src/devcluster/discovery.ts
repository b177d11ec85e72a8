/**
 * The legacy (unaggregated) discovery documents of the dev cluster: `/version`, `/api`, `/apis` and
 * `/api/v1`. They are always plain `application/json`, whatever the Accept header asks for; kubectl
 * then falls back from aggregated discovery by itself.
 */

/** The Kubernetes version the dev cluster claims (the apiserver in front of a pre-1.30 kubelet). */
export const DEV_CLUSTER_VERSION = {
  major: '1',
  minor: '28',
  gitVersion: 'v1.28.0',
  gitCommit: '855e7c48de7388eb330da0f8d9d2394ee818fb8d',
  gitTreeState: 'clean',
  buildDate: '2023-08-15T10:20:15Z',
  goVersion: 'go1.20.7',
  compiler: 'gc',
  platform: 'linux/amd64',
};

/** `GET /api`: the core group's versions. */
export function apiVersions(serverAddress: string): Record<string, unknown> {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

/** The named API groups served when token authentication is on (both v1 only). */
export const REVIEW_GROUPS = ['authentication.k8s.io', 'authorization.k8s.io'] as const;
/** One of {@link REVIEW_GROUPS}. */
export type ReviewGroup = (typeof REVIEW_GROUPS)[number];

/** `GET /apis/{group}` (and an entry of `/apis`): the group with its one version, v1. */
export function apiGroup(name: ReviewGroup, withKind = true): Record<string, unknown> {
  const version = { groupVersion: `${name}/v1`, version: 'v1' };
  const group = { name, versions: [version], preferredVersion: version };
  return withKind ? { kind: 'APIGroup', apiVersion: 'v1', ...group } : group;
}

/**
 * `GET /apis`: no named groups, or (`withReviews`, token authentication on)
 * authentication.k8s.io and authorization.k8s.io.
 */
export function apiGroupList(withReviews = false): Record<string, unknown> {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: withReviews ? REVIEW_GROUPS.map((g) => apiGroup(g, false)) : [] };
}

/** `GET /apis/{group}/v1` of a review group: tokenreviews or subjectaccessreviews (create only). */
export function reviewGroupResources(group: ReviewGroup): Record<string, unknown> {
  const resource =
    group === 'authentication.k8s.io'
      ? { name: 'tokenreviews', singularName: 'tokenreview', namespaced: false, kind: 'TokenReview', verbs: ['create'] }
      : { name: 'subjectaccessreviews', singularName: 'subjectaccessreview', namespaced: false, kind: 'SubjectAccessReview', verbs: ['create'] };
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `${group}/v1`, resources: [resource] };
}

/** `GET /api/v1`: the resources the dev cluster serves (`nodes` only with a kubelet listener). */
export function coreV1Resources(withNodes = false): Record<string, unknown> {
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
      {
        name: 'namespaces',
        singularName: 'namespace',
        namespaced: false,
        kind: 'Namespace',
        verbs: ['get', 'list', 'watch'],
        shortNames: ['ns'],
      },
      ...(withNodes
        ? [{ name: 'nodes', singularName: 'node', namespaced: false, kind: 'Node', verbs: ['get', 'list'], shortNames: ['no'] }]
        : []),
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
    ],
  };
}
