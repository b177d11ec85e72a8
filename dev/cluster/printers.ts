/**
 * The Table columns and cells of the dev cluster's resources, as kube-apiserver's printers
 * (`pkg/printers/internalversion/printers.go`, server side so with `Wide: true`: every column has a
 * cell, kubectl hides priority > 0 without `-o wide`). Each printer reads the v1 JSON object the dev
 * cluster serves, so what `get` prints is exactly what `get -o json` shows.
 *
 * Descriptions: pods, nodes, namespaces and events carry kube-apiserver's exact texts (the swagger
 * docs of the fields, as recorded from real answers); services and endpointslices carry the first
 * sentence of theirs.
 */
import { AGE_COLUMN, NAME_COLUMN, translateTimestampSince, type TableColumnDefinition } from '../../src/meta-table.js';

type Json = Record<string, unknown>;

const NODE_ADDRESSES_DOC =
  "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";

const col = (name: string, description: string, priority = 0, format = ''): TableColumnDefinition => ({
  name,
  type: 'string',
  format,
  description,
  priority,
});
const nameCol = (priority = 0): TableColumnDefinition => ({ ...NAME_COLUMN, priority });
const ageCol = (): TableColumnDefinition => AGE_COLUMN;

/** A resource's columns and how one object becomes its cells. */
export interface Printer {
  columns: readonly TableColumnDefinition[];
  cells(object: Json, now?: number): unknown[];
}

const obj = (v: unknown): Json => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const orNone = (s: string): string => (s === '' ? '<none>' : s);
const age = (o: Json, now?: number): string => translateTimestampSince(obj(o.metadata).creationTimestamp, now);

/** `kubectl get pods`: NAME READY STATUS RESTARTS AGE, wide IP NODE NOMINATED NODE READINESS GATES. */
export const POD_PRINTER: Printer = {
  columns: [
    nameCol(),
    col('Ready', 'The aggregate readiness state of this pod for accepting traffic.'),
    col('Status', 'The aggregate status of the containers in this pod.'),
    col('Restarts', 'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.'),
    ageCol(),
    col('IP', 'podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.', 1),
    col('Node', 'NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements.', 1),
    col('Nominated Node', 'nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.', 1),
    col('Readiness Gates', 'If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to "True" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates', 1),
  ],
  cells(pod, now) {
    const spec = obj(pod.spec);
    const status = obj(pod.status);
    const statuses = arr(status.containerStatuses).map(obj);
    const total = arr(spec.containers).length;
    let ready = 0;
    let restarts = 0;
    let lastRestart = '';
    let reason = str(status.reason) || str(status.phase);
    for (const cs of statuses) {
      restarts += typeof cs.restartCount === 'number' ? cs.restartCount : 0;
      const finished = str(obj(obj(cs.lastState).terminated).finishedAt);
      if (finished > lastRestart) lastRestart = finished;
      const state = obj(cs.state);
      const waiting = str(obj(state.waiting).reason);
      if (waiting) reason = waiting;
      else if (state.running !== undefined && cs.ready === true) ready++;
    }
    const conditions = arr(status.conditions).map(obj);
    if (reason === 'Running' && !conditions.some((c) => c.type === 'Ready' && c.status === 'True')) reason = 'NotReady';
    const restartsCell = lastRestart ? `${restarts} (${translateTimestampSince(lastRestart, now)} ago)` : String(restarts);
    const gates = arr(spec.readinessGates).length;
    return [
      str(obj(pod.metadata).name),
      `${ready}/${total}`,
      reason,
      restartsCell,
      age(pod, now),
      orNone(str(status.podIP)),
      orNone(str(spec.nodeName)),
      orNone(str(status.nominatedNodeName)),
      gates === 0 ? '<none>' : `${gates}`,
    ];
  },
};

/** `kubectl get nodes`: NAME STATUS ROLES AGE VERSION, wide INTERNAL-IP … CONTAINER-RUNTIME. */
export const NODE_PRINTER: Printer = {
  columns: [
    nameCol(),
    col('Status', 'The status of the node'),
    col('Roles', 'The roles of the node'),
    ageCol(),
    col('Version', 'Kubelet Version reported by the node.'),
    col('Internal-IP', NODE_ADDRESSES_DOC, 1),
    col('External-IP', NODE_ADDRESSES_DOC, 1),
    col('OS-Image', 'OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).', 1),
    col('Kernel-Version', "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
    col('Container-Runtime', 'ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).', 1),
  ],
  cells(node, now) {
    const status = obj(node.status);
    const ready = arr(status.conditions).map(obj).find((c) => c.type === 'Ready');
    const states = [ready === undefined ? 'Unknown' : ready.status === 'True' ? 'Ready' : 'NotReady'];
    if (obj(node.spec).unschedulable === true) states.push('SchedulingDisabled');
    const labels = obj(obj(node.metadata).labels);
    const roles = new Set<string>();
    for (const [k, v] of Object.entries(labels)) {
      if (k.startsWith('node-role.kubernetes.io/')) roles.add(k.slice('node-role.kubernetes.io/'.length));
      else if (k === 'kubernetes.io/role' && typeof v === 'string' && v !== '') roles.add(v);
    }
    const address = (type: string): string =>
      str(arr(status.addresses).map(obj).find((a) => a.type === type)?.address);
    const info = obj(status.nodeInfo);
    const orUnknown = (s: string): string => (s === '' ? '<unknown>' : s);
    return [
      str(obj(node.metadata).name),
      states.join(','),
      roles.size === 0 ? '<none>' : [...roles].sort().join(','),
      age(node, now),
      str(info.kubeletVersion),
      orNone(address('InternalIP')),
      orNone(address('ExternalIP')),
      orUnknown(str(info.osImage)),
      orUnknown(str(info.kernelVersion)),
      orUnknown(str(info.containerRuntimeVersion)),
    ];
  },
};

/** `kubectl get namespaces`: NAME STATUS AGE. */
export const NAMESPACE_PRINTER: Printer = {
  columns: [nameCol(), col('Status', 'The status of the namespace'), ageCol()],
  cells: (ns, now) => [str(obj(ns.metadata).name), str(obj(ns.status).phase), age(ns, now)],
};

/** printers.go `makePortString`: `443/TCP`, `80:30080/TCP`, joined by commas; `<none>` without ports. */
function servicePorts(ports: unknown[]): string {
  const pieces = ports.map(obj).map((p) => {
    const protocol = str(p.protocol) || 'TCP';
    return typeof p.nodePort === 'number' && p.nodePort !== 0 ? `${p.port}:${p.nodePort}/${protocol}` : `${p.port}/${protocol}`;
  });
  return pieces.length === 0 ? '<none>' : pieces.join(',');
}

/** `kubectl get services`: NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE, wide SELECTOR. */
export const SERVICE_PRINTER: Printer = {
  columns: [
    nameCol(),
    col('Type', 'type determines how the Service is exposed.'),
    col('Cluster-IP', 'clusterIP is the IP address of the service and is usually assigned randomly.'),
    col('External-IP', 'externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.'),
    col('Port(s)', 'The list of ports that are exposed by this service.'),
    ageCol(),
    col('Selector', 'Route service traffic to pods with label keys and values matching this selector.', 1),
  ],
  cells(svc, now) {
    const spec = obj(svc.spec);
    const type = str(spec.type) || 'ClusterIP';
    const external =
      type === 'ExternalName' ? str(spec.externalName) : arr(spec.externalIPs).filter((x) => typeof x === 'string').join(',');
    const selector = Object.entries(obj(spec.selector))
      .map(([k, v]) => `${k}=${String(v)}`)
      .sort()
      .join(',');
    return [
      str(obj(svc.metadata).name),
      type,
      orNone(str(spec.clusterIP)),
      orNone(external),
      servicePorts(arr(spec.ports)),
      age(svc, now),
      orNone(selector),
    ];
  },
};

/** printers.go `listWithMoreString`: at most 3 entries, then "+ N more...", `<unset>` when empty. */
function listWithMore(items: string[], max = 3): string {
  if (items.length > max) return `${items.slice(0, max).join(',')} + ${items.length - max} more...`;
  return items.length === 0 ? '<unset>' : items.join(',');
}

/** `kubectl get endpointslices`: NAME ADDRESSTYPE PORTS ENDPOINTS AGE. */
export const ENDPOINT_SLICE_PRINTER: Printer = {
  columns: [
    nameCol(),
    col('AddressType', 'addressType specifies the type of address carried by this EndpointSlice.'),
    col('Ports', 'ports specifies the list of network ports exposed by each endpoint in this slice.'),
    col('Endpoints', 'endpoints is a list of unique endpoints in this slice.'),
    ageCol(),
  ],
  cells(slice, now) {
    const ports = arr(slice.ports)
      .map(obj)
      .map((p) => (typeof p.port === 'number' ? String(p.port) : '*'));
    const addresses = arr(slice.endpoints).flatMap((e) => arr(obj(e).addresses).filter((a): a is string => typeof a === 'string'));
    return [str(obj(slice.metadata).name), str(slice.addressType), listWithMore(ports), listWithMore(addresses), age(slice, now)];
  },
};

/** `kubectl get events`: LAST SEEN TYPE REASON OBJECT MESSAGE, wide SUBOBJECT SOURCE FIRST SEEN COUNT NAME. */
export const EVENT_PRINTER: Printer = {
  columns: [
    col('Last Seen', 'The time at which the most recent occurrence of this event was recorded.'),
    col('Type', 'Type of this event (Normal, Warning), new types could be added in the future'),
    col('Reason', "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
    col('Object', 'The object that this event is about.'),
    col('Subobject', 'If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: "spec.containers{name}" (where "name" refers to the name of the container that triggered the event) or if no container name is specified "spec.containers[2]" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.', 1),
    col('Source', 'The component reporting this event. Should be a short machine understandable string.', 1),
    col('Message', 'A human-readable description of the status of this operation.'),
    col('First Seen', 'The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)', 1),
    col('Count', 'The number of times this event has occurred.', 1),
    nameCol(1),
  ],
  cells(event, now) {
    const first = translateTimestampSince(event.firstTimestamp || event.eventTime, now);
    const last = event.lastTimestamp ? translateTimestampSince(event.lastTimestamp, now) : first;
    const involved = obj(event.involvedObject);
    const kind = str(involved.kind).toLowerCase();
    const target = str(involved.name) ? `${kind}/${str(involved.name)}` : kind;
    const source = obj(event.source);
    const component = str(source.component) || str(event.reportingComponent);
    const host = str(source.host) || str(event.reportingInstance);
    const count = typeof event.count === 'number' && event.count > 0 ? event.count : 1;
    return [
      last,
      str(event.type),
      str(event.reason),
      target,
      str(involved.fieldPath),
      host ? `${component}, ${host}` : component,
      str(event.message).trim(),
      first,
      count,
      str(obj(event.metadata).name),
    ];
  },
};
