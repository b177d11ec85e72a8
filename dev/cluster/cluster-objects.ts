/**
 * The dev cluster's stored objects besides pods — Services, EndpointSlices, Events — wired
 * together: one store each (sharing the pods' resourceVersion counter), the Event recorder following
 * the pods, and the seeded Services of {@link DevClusterOptions.services}.
 */
import { errorStatus } from '../../src/status.js';
import { EventRecorder, EVENTS } from './events.js';
import type { ObjectResource } from './object-api.js';
import { ObjectStore } from './object-store.js';
import type { PodRegistry } from './pod-registry.js';
import { ENDPOINT_SLICE_PRINTER, EVENT_PRINTER, SERVICE_PRINTER } from './printers.js';
import {
  ClusterIPAllocator,
  ENDPOINT_SLICES,
  parseEndpointSlice,
  parseService,
  seedService,
  SERVICES,
  type DevClusterServiceSeed,
} from './services.js';

export type { DevClusterServiceSeed };

/** The stores and what serves and fills them. */
export interface ClusterObjects {
  /** By plural resource name, for `object-api.ts`. */
  resources: Record<string, ObjectResource>;
  events: EventRecorder;
  /** Seed one more Service (throws on a bad seed or an existing name). */
  seed(service: DevClusterServiceSeed): void;
}

/** Create the stores, start recording pod Events, and seed `services` (throws on a bad seed). */
export function createObjectResources(registry: PodRegistry, services: readonly DevClusterServiceSeed[]): ClusterObjects {
  const next = { next: () => registry.nextResourceVersion(), current: () => registry.resourceVersion };
  const ips = new ClusterIPAllocator();
  const serviceStore = new ObjectStore(SERVICES, next);
  const sliceStore = new ObjectStore(ENDPOINT_SLICES, next);
  const eventStore = new ObjectStore(EVENTS, next);
  const events = new EventRecorder(eventStore);
  events.follow(registry);
  const seed = (service: DevClusterServiceSeed): void => {
    registry.namespaces.add(service.namespace ?? 'default');
    seedService(service, serviceStore, sliceStore, () => ips.allocate());
  };
  for (const service of services) seed(service);
  const resources: Record<string, ObjectResource> = {
    services: { store: serviceStore, printer: SERVICE_PRINTER, parse: (b) => parseService(b, () => ips.allocate()), fields: ['spec.type', 'spec.clusterIP'] },
    endpointslices: { store: sliceStore, printer: ENDPOINT_SLICE_PRINTER, parse: parseEndpointSlice, fields: ['addressType'] },
    events: {
      store: eventStore,
      printer: EVENT_PRINTER,
      parse: (b) =>
        typeof b === 'object' && b !== null && !Array.isArray(b)
          ? { ok: true, value: { ...(b as Record<string, unknown>), kind: 'Event', apiVersion: 'v1' } }
              : { ok: false, status: errorStatus(400, 'the body of the request is not an Event object') },
      fields: [
        'involvedObject.kind',
        'involvedObject.namespace',
        'involvedObject.name',
        'involvedObject.uid',
        'involvedObject.apiVersion',
        'involvedObject.resourceVersion',
        'involvedObject.fieldPath',
        'reason',
        'reportingComponent',
        'source.component',
        'type',
      ],
    },
  };
  return { resources, events, seed };
}
