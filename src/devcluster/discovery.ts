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

/** `GET /apis`: no named groups. */
export function apiGroupList(): Record<string, unknown> {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: [] };
}

/** `GET /api/v1`: the resources the dev cluster serves. */
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
      {
        name: 'namespaces',
        singularName: 'namespace',
        namespaced: false,
        kind: 'Namespace',
        verbs: ['get', 'list', 'watch'],
        shortNames: ['ns'],
      },
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
