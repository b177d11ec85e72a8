/**
 * The kubelet address of a node, as kube-apiserver picks it (`--kubelet-preferred-address-types`,
 * `nodeutil.GetPreferredNodeAddress`): the first address of the first preferred type the node
 * reports; the port from `status.daemonEndpoints.kubeletEndpoint.Port`, else 10250.
 */
import type { NodeInfo } from '../../api-client.js';

/** kube-apiserver's default `--kubelet-preferred-address-types`. */
export const DEFAULT_PREFERRED_ADDRESS_TYPES: readonly string[] = ['Hostname', 'InternalDNS', 'InternalIP', 'ExternalDNS', 'ExternalIP'];

/** The kubelet's default port (`--kubelet-port` of old apiservers). */
export const DEFAULT_KUBELET_PORT = 10250;

/** Host and port of the kubelet, or undefined when the node reports no address of a preferred type. */
export function kubeletAddress(node: NodeInfo, preferredTypes: readonly string[] = DEFAULT_PREFERRED_ADDRESS_TYPES): { host: string; port: number } | undefined {
  for (const type of preferredTypes) {
    const address = node.addresses.find((a) => a.type === type && a.address !== '');
    if (address) return { host: address.address, port: node.kubeletPort ?? DEFAULT_KUBELET_PORT };
  }
  return undefined;
}
