/**
 * The dev cluster's one Node, rendered as a core/v1 Node: `Ready`, with this host's CPUs and memory
 * as capacity and allocatable, always served (with or without a kubelet listener). Its `status.addresses` hold exactly two
 * entries, in this order: `InternalIP` (the kubelet listener's IP) and `Hostname` (the node name);
 * `status.daemonEndpoints.kubeletEndpoint.Port` is the kubelet listener's port (0 when the dev
 * cluster runs without a kubelet listener). A proxy resolving pod → node → kubelet with
 * kube-apiserver's preferred address types (`Hostname,InternalDNS,InternalIP,…` by default) must be
 * configured to prefer InternalIP, since `dev-node` does not resolve. `nodeInfo.kubeletVersion` is the
 * kubelet's version, and a kubelet that serves WebSockets itself (≥ 1.36) lists
 * `ExtendWebSocketsToKubelet` in `status.declaredFeatures` (KEP-5328; absent otherwise, as the field is
 * `omitempty`), which is what kube-apiserver reads to pass WebSockets to it.
 */

import { cpus, release, totalmem } from 'node:os';

/** The node every pod "runs" on (`spec.nodeName`). */
export const NODE_NAME = 'dev-node';

/** What the Node object shows. */
export interface NodeInfo {
  name: string;
  /** The kubelet listener's IP (`InternalIP`). */
  internalIP: string;
  /** The kubelet listener's port (0: none). */
  kubeletPort: number;
  /** `nodeInfo.kubeletVersion`, e.g. `v1.36.0`. */
  kubeletVersion: string;
  /** `status.declaredFeatures` (sorted; empty: absent). */
  declaredFeatures: readonly string[];
}

/** The node's capacity (= allocatable): this host's CPUs and memory, and the kubelet's default 110 pods. */
const NODE_RESOURCES = {
  cpu: String(Math.max(1, cpus().length)),
  memory: `${Math.floor(totalmem() / 1024)}Ki`,
  pods: '110',
};

/** When the node "was created". */
const NODE_CREATED = new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/** The v1 Node JSON of `node`; `withKind` adds kind/apiVersion (single objects). */
export function nodeObject(node: NodeInfo, withKind = true): Record<string, unknown> {
  const uidHex = Buffer.from(node.name).toString('hex').padEnd(12, '0').slice(0, 12);
  const condition = (type: string, status: string, reason: string, message: string): Record<string, unknown> => ({
    type,
    status,
    lastHeartbeatTime: NODE_CREATED,
    lastTransitionTime: NODE_CREATED,
    reason,
    message,
  });
  const obj = {
    metadata: {
      name: node.name,
      uid: `00000000-0000-4000-9000-${uidHex}`,
      resourceVersion: '1',
      creationTimestamp: NODE_CREATED,
      labels: {
        'kubernetes.io/arch': process.arch === 'x64' ? 'amd64' : process.arch,
        'kubernetes.io/hostname': node.name,
        'kubernetes.io/os': 'linux',
      },
    },
    spec: {},
    status: {
      capacity: NODE_RESOURCES,
      allocatable: NODE_RESOURCES,
      conditions: [
        condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
        condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
      ],
      addresses: [
        { type: 'InternalIP', address: node.internalIP },
        { type: 'Hostname', address: node.name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: node.kubeletPort } },
      nodeInfo: {
        machineID: '',
        systemUUID: '',
        bootID: '',
        kernelVersion: release(),
        osImage: 'kube-stream-proxy dev cluster',
        containerRuntimeVersion: 'dev://0.1.0',
        kubeletVersion: node.kubeletVersion,
        kubeProxyVersion: node.kubeletVersion,
        operatingSystem: 'linux',
        architecture: process.arch === 'x64' ? 'amd64' : process.arch,
      },
      ...(node.declaredFeatures.length > 0 ? { declaredFeatures: [...node.declaredFeatures].sort() } : {}),
    },
  };
  return withKind ? { kind: 'Node', apiVersion: 'v1', ...obj } : obj;
}

/** `GET /api/v1/nodes`. */
export function nodeList(node: NodeInfo): Record<string, unknown> {
  return { kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: '1' }, items: [nodeObject(node, false)] };
}
