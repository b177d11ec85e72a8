/**
 * The dev cluster's Services (core/v1) and EndpointSlices (discovery.k8s.io/v1): validating and
 * defaulting what a client creates, as kube-apiserver's service and endpointslice strategies do
 * (type ClusterIP, an allocated cluster IP, protocol TCP, targetPort = port), and seeding a Service
 * with its EndpointSlice from {@link DevClusterServiceSeed} (the aggregation tests' `kube-system/metrics-server`).
 * No controller runs: a Service's selector does not produce endpoints; slices are created as given.
 */
import { errorStatus, type V1Status } from '../../src/status.js';
import { meta, stableSuffix, type ObjectStore, type StoredResource } from './object-store.js';
import type { Parsed } from './stream-options.js';

type Json = Record<string, unknown>;

/** The label that ties an EndpointSlice to its Service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** The label kube-controller-manager's EndpointSlice controller puts on the slices it manages. */
export const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';

/** The Services store's identity. */
export const SERVICES: StoredResource = { resource: 'services', kind: 'Service', apiVersion: 'v1', group: '', returnDeletedObject: true };
/** The EndpointSlices store's identity. */
export const ENDPOINT_SLICES: StoredResource = {
  resource: 'endpointslices',
  kind: 'EndpointSlice',
  apiVersion: 'discovery.k8s.io/v1',
  group: 'discovery.k8s.io',
  returnDeletedObject: false,
};

/** One port of a seeded Service. */
export interface DevClusterServicePort {
  /** Port name (`https`); also the EndpointSlice port's name. */
  name?: string;
  /** The Service port (443). */
  port: number;
  /** Where the endpoints listen (default: `port`); the EndpointSlice port's number. */
  targetPort?: number;
  protocol?: 'TCP' | 'UDP' | 'SCTP';
}

/** A Service (and, with `endpoints`, its EndpointSlice) that exists from the start. */
export interface DevClusterServiceSeed {
  /** Default `default`; created if missing. */
  namespace?: string;
  name: string;
  ports: DevClusterServicePort[];
  labels?: Record<string, string>;
  selector?: Record<string, string>;
  /** Endpoint addresses (IPv4), e.g. `[{ address: '127.0.0.1' }]`; ready unless `ready: false`. */
  endpoints?: { address: string; ready?: boolean }[];
  /** A fixed cluster IP (default: the next free one). */
  clusterIP?: string;
  /** The EndpointSlice's name (default `<name>-<5 hex>`, as the EndpointSlice controller names them). */
  endpointSliceName?: string;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `<Kind> "<name>" is invalid: <field>: <detail>` (422), as `apierrors.NewInvalid` words it. */
function invalid(kind: string, group: string, name: string, field: string, detail: string): V1Status {
  const qualified = group ? `${kind}.${group}` : kind;
  return errorStatus(422, `${qualified} "${name}" is invalid: ${field}: ${detail}`, 'Invalid', {
    name,
    group,
    kind,
    causes: [{ reason: 'FieldValueInvalid', message: detail, field }],
  });
}

function nameOf(body: Json): string {
  const m = meta(body);
  return typeof m.name === 'string' ? m.name : '';
}

/** Check a create body's kind/apiVersion/name; `undefined` means fine. */
function checkIdentity(body: unknown, info: StoredResource): V1Status | undefined {
  if (!isObject(body)) return errorStatus(400, `the body of the request is not a ${info.kind} object`);
  if (body.kind !== undefined && body.kind !== info.kind) return errorStatus(400, `the body kind ${JSON.stringify(body.kind)} is not ${info.kind}`);
  if (body.apiVersion !== undefined && body.apiVersion !== info.apiVersion) {
    return errorStatus(400, `the body apiVersion ${JSON.stringify(body.apiVersion)} is not ${info.apiVersion}`);
  }
  const name = nameOf(body);
  const generate = meta(body).generateName;
  if (name === '' && (typeof generate !== 'string' || generate === '')) {
    return invalid(info.kind, info.group, '', 'metadata.name', 'Required value: name or generateName is required');
  }
  if (name !== '' && !DNS_LABEL.test(name)) {
    return invalid(info.kind, info.group, name, 'metadata.name', `Invalid value: "${name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character`);
  }
  return undefined;
}

const validPort = (p: unknown): p is number => Number.isInteger(p) && (p as number) >= 1 && (p as number) <= 65535;

/** Validate and default a Service create body (clusterIP comes from `allocateIP`). */
export function parseService(body: unknown, allocateIP: () => string): Parsed<Json> {
  const bad = checkIdentity(body, SERVICES);
  if (bad) return { ok: false, status: bad };
  const svc = body as Json;
  const name = nameOf(svc);
  const spec = isObject(svc.spec) ? { ...svc.spec } : {};
  const type = typeof spec.type === 'string' ? spec.type : 'ClusterIP';
  if (!['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'].includes(type)) {
    return { ok: false, status: invalid('Service', '', name, 'spec.type', `Unsupported value: "${type}": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`) };
  }
  const ports: Json[] = [];
  for (const [i, raw] of (Array.isArray(spec.ports) ? spec.ports : []).entries()) {
    const p = isObject(raw) ? raw : {};
    if (!validPort(p.port)) {
      return { ok: false, status: invalid('Service', '', name, `spec.ports[${i}].port`, `Invalid value: ${JSON.stringify(p.port ?? 0)}: must be between 1 and 65535, inclusive`) };
    }
    ports.push({ ...p, protocol: typeof p.protocol === 'string' ? p.protocol : 'TCP', targetPort: p.targetPort ?? p.port });
  }
  if (ports.length === 0 && type !== 'ExternalName') {
    return { ok: false, status: invalid('Service', '', name, 'spec.ports', 'Required value') };
  }
  const clusterIP = type === 'ExternalName' ? undefined : typeof spec.clusterIP === 'string' && spec.clusterIP !== '' ? spec.clusterIP : allocateIP();
  const out: Json = {
    ...spec,
    type,
    ports,
    sessionAffinity: spec.sessionAffinity ?? 'None',
    internalTrafficPolicy: spec.internalTrafficPolicy ?? 'Cluster',
  };
  if (clusterIP !== undefined) {
    out.clusterIP = clusterIP;
    out.clusterIPs = [clusterIP];
    if (clusterIP !== 'None') {
      out.ipFamilies = ['IPv4'];
      out.ipFamilyPolicy = 'SingleStack';
    }
  }
  return { ok: true, value: { ...svc, kind: 'Service', apiVersion: 'v1', spec: out, status: { loadBalancer: {} } } };
}

/** Validate and default an EndpointSlice create body. */
export function parseEndpointSlice(body: unknown): Parsed<Json> {
  const bad = checkIdentity(body, ENDPOINT_SLICES);
  if (bad) return { ok: false, status: bad };
  const slice = body as Json;
  const name = nameOf(slice);
  const fail = (field: string, detail: string): Parsed<Json> => ({ ok: false, status: invalid('EndpointSlice', 'discovery.k8s.io', name, field, detail) });
  const addressType = slice.addressType;
  if (addressType !== 'IPv4' && addressType !== 'IPv6' && addressType !== 'FQDN') {
    return fail('addressType', addressType === undefined ? 'Required value' : `Unsupported value: ${JSON.stringify(addressType)}: supported values: "FQDN", "IPv4", "IPv6"`);
  }
  const endpoints: Json[] = [];
  for (const [i, raw] of (Array.isArray(slice.endpoints) ? slice.endpoints : []).entries()) {
    const e = isObject(raw) ? raw : {};
    const addresses = Array.isArray(e.addresses) ? e.addresses : [];
    if (addresses.length === 0 || addresses.some((a) => typeof a !== 'string' || a === '')) {
      return fail(`endpoints[${i}].addresses`, 'Required value: must contain at least 1 address');
    }
    endpoints.push(e);
  }
  const ports: Json[] = [];
  for (const [i, raw] of (Array.isArray(slice.ports) ? slice.ports : []).entries()) {
    const p = isObject(raw) ? raw : {};
    if (p.port !== undefined && !validPort(p.port)) {
      return fail(`ports[${i}].port`, `Invalid value: ${JSON.stringify(p.port)}: must be between 1 and 65535, inclusive`);
    }
    ports.push({ ...p, protocol: typeof p.protocol === 'string' ? p.protocol : 'TCP' });
  }
  return { ok: true, value: { ...slice, kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', endpoints, ports } };
}

/** Hands out cluster IPs from 10.96.0.0/12 from 10.96.0.10 on (10.96.0.1 is the `kubernetes` Service's). */
export class ClusterIPAllocator {
  #next = 10;
  /** The next free address. */
  allocate(): string {
    const n = this.#next++;
    return `10.96.${Math.floor(n / 256) % 256}.${n % 256}`;
  }
}

/** Create a seeded Service and (with endpoints) its EndpointSlice `<name>-<5 chars>`; throws on a bad seed. */
export function seedService(seed: DevClusterServiceSeed, services: ObjectStore, slices: ObjectStore, allocateIP: () => string): void {
  const namespace = seed.namespace ?? 'default';
  const svc = parseService(
    {
      metadata: { name: seed.name, ...(seed.labels ? { labels: seed.labels } : {}) },
      spec: {
        ...(seed.selector ? { selector: seed.selector } : {}),
        ...(seed.clusterIP ? { clusterIP: seed.clusterIP } : {}),
        ports: seed.ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), port: p.port, protocol: p.protocol ?? 'TCP', targetPort: p.targetPort ?? p.port })),
      },
    },
    allocateIP,
  );
  if (!svc.ok) throw new Error(`dev cluster: bad service seed ${namespace}/${seed.name}: ${svc.status.message}`);
  if (!services.create(namespace, svc.value)) throw new Error(`dev cluster: service ${namespace}/${seed.name} seeded twice`);
  if (!seed.endpoints) return;
  const slice = parseEndpointSlice({
    metadata: {
      name: seed.endpointSliceName ?? `${seed.name}-${stableSuffix(`${namespace}/${seed.name}`)}`,
      labels: { [SERVICE_NAME_LABEL]: seed.name, [MANAGED_BY_LABEL]: 'endpointslice-controller.k8s.io' },
    },
    addressType: 'IPv4',
    endpoints: seed.endpoints.map((e) => ({
      addresses: [e.address],
      conditions: { ready: e.ready ?? true, serving: e.ready ?? true, terminating: false },
    })),
    ports: seed.ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), port: p.targetPort ?? p.port, protocol: p.protocol ?? 'TCP' })),
  });
  if (!slice.ok) throw new Error(`dev cluster: bad endpoints for service seed ${namespace}/${seed.name}: ${slice.status.message}`);
  slices.create(namespace, slice.value);
}

/**
 * The `default/kubernetes` Service every cluster has (10.96.0.1:443 `https`), whose EndpointSlice
 * `kubernetes` points at the API server itself (`address`:`port`).
 */
export function kubernetesServiceSeed(address: string, port: number): DevClusterServiceSeed {
  return {
    namespace: 'default',
    name: 'kubernetes',
    labels: { component: 'apiserver', provider: 'kubernetes' },
    clusterIP: '10.96.0.1',
    ports: [{ name: 'https', port: 443, targetPort: port }],
    endpoints: [{ address }],
    endpointSliceName: 'kubernetes',
  };
}
