/**
 * Resolving an APIService's `spec.service` to the addresses to dial, as kube-aggregator does it
 * (`apiserver/pkg/util/proxy` `ResolveEndpoint` with `--enable-aggregator-routing`, and the reasons
 * of its availability controller): the Service must exist and be ClusterIP, NodePort or
 * LoadBalancer; it must have a port with the APIService's port number; its EndpointSlices must carry
 * that port's name with at least one ready address. Each failure has the controller's reason and
 * message, so the same result answers a request (503) and sets the `Available` condition.
 */
import type { EndpointSliceInfo, ProxyApiClient, ServiceInfo } from '../api-client.js';
import type { ServiceReference } from './apiservice.js';

/** A ready endpoint: where to dial. */
export interface EndpointAddress {
  host: string;
  port: number;
}

/** Why a Service could not be resolved: kube-aggregator's `Available=False` reasons. */
export type ResolutionFailureReason = 'ServiceNotFound' | 'ServicePortError' | 'EndpointsNotFound' | 'MissingEndpoints' | 'ServiceAccessError';

/** The outcome of {@link resolveServiceEndpoints}. */
export type ServiceResolution = { ok: true; endpoints: EndpointAddress[] } | { ok: false; reason: ResolutionFailureReason; message: string };

const ROUTABLE_TYPES = new Set(['ClusterIP', 'NodePort', 'LoadBalancer']);

/** The decision on an already-read Service and its EndpointSlices (pure; see {@link resolveServiceEndpoints}). */
export function endpointsOf(ref: ServiceReference, service: ServiceInfo | undefined, slices: readonly EndpointSliceInfo[]): ServiceResolution {
  const where = `service/${ref.name} in "${ref.namespace}"`;
  if (!service) return { ok: false, reason: 'ServiceNotFound', message: `${where} is not present` };
  if (!ROUTABLE_TYPES.has(service.type)) return { ok: false, reason: 'ServicePortError', message: `${where} has unsupported service type "${service.type}"` };
  const port = service.ports.find((p) => p.port === ref.port);
  if (!port) return { ok: false, reason: 'ServicePortError', message: `${where} is not listening on port ${ref.port}` };
  if (slices.length === 0) return { ok: false, reason: 'EndpointsNotFound', message: `cannot find endpoints for ${where}` };
  const endpoints: EndpointAddress[] = [];
  for (const slice of slices) {
    const slicePort = slice.ports.find((p) => p.name === port.name);
    if (!slicePort || slicePort.port <= 0) continue;
    for (const ep of slice.endpoints) {
      if (!ep.ready) continue;
      for (const host of ep.addresses) endpoints.push({ host, port: slicePort.port });
    }
  }
  if (endpoints.length === 0) return { ok: false, reason: 'MissingEndpoints', message: `endpoints for ${where} have no addresses with port name "${port.name}"` };
  return { ok: true, endpoints };
}

/** Read the Service and its EndpointSlices through the API and decide (an API error is `ServiceAccessError`). */
export async function resolveServiceEndpoints(api: Pick<ProxyApiClient, 'readService' | 'listEndpointSlices'>, ref: ServiceReference): Promise<ServiceResolution> {
  let service: ServiceInfo | undefined;
  let slices: EndpointSliceInfo[] = [];
  try {
    service = await api.readService(ref.namespace, ref.name);
    if (service) slices = await api.listEndpointSlices(ref.namespace, ref.name);
  } catch (e) {
    return { ok: false, reason: 'ServiceAccessError', message: `service/${ref.name} in "${ref.namespace}" could not be read: ${(e as Error).message}` };
  }
  return endpointsOf(ref, service, slices);
}

/** One endpoint chosen at random, as kube-aggregator's resolver spreads requests. */
export function pickEndpoint(endpoints: readonly EndpointAddress[], random: () => number = Math.random): EndpointAddress {
  return endpoints[Math.floor(random() * endpoints.length) % endpoints.length]!;
}
