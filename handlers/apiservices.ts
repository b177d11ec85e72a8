/**
 * `apiregistration.k8s.io/v1` served by the proxy itself, as kube-aggregator serves it: the group,
 * its resource list, and `apiservices` (list and get, JSON or server-side-printed Table) with the
 * registrations of `--apiservice-config` and their live `Available` condition — so
 * `kubectl get apiservices` shows the `AVAILABLE` column through the proxy.
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { toAPIServiceJSON, type APIService } from '../src/aggregation/apiservice.js';
import type { Aggregator } from '../src/aggregation/aggregator.js';
import { AGE_COLUMN, includeObjectPolicy, NAME_COLUMN, table, translateTimestampSince, wantsTable, type TableColumnDefinition } from '../src/meta-table.js';
import { errorStatus, notFoundStatus, type V1Status } from '../src/status.js';
import { sendStatus } from '../src/wire/status-reply.js';

/** The group's name. */
export const APIREGISTRATION_GROUP = 'apiregistration.k8s.io';

/** Options of {@link apiServiceRoutes}. */
export interface APIServiceRouteOptions {
  aggregator: Aggregator;
}

/** `/apis/apiregistration.k8s.io` (legacy discovery of the group). */
export const APIREGISTRATION_GROUP_DOC = {
  kind: 'APIGroup',
  apiVersion: 'v1',
  name: APIREGISTRATION_GROUP,
  versions: [{ groupVersion: `${APIREGISTRATION_GROUP}/v1`, version: 'v1' }],
  preferredVersion: { groupVersion: `${APIREGISTRATION_GROUP}/v1`, version: 'v1' },
};

/** `/apis/apiregistration.k8s.io/v1`. */
export const APIREGISTRATION_RESOURCES = {
  kind: 'APIResourceList',
  apiVersion: 'v1',
  groupVersion: `${APIREGISTRATION_GROUP}/v1`,
  resources: [
    { name: 'apiservices', singularName: 'apiservice', namespaced: false, kind: 'APIService', verbs: ['get', 'list'], categories: ['api-extensions'] },
    { name: 'apiservices/status', singularName: '', namespaced: false, kind: 'APIService', verbs: ['get'] },
  ],
};

const COLUMNS: TableColumnDefinition[] = [
  NAME_COLUMN,
  { name: 'Service', type: 'string', format: '', description: 'The reference to the service that hosts this API endpoint.', priority: 0 },
  { name: 'Available', type: 'string', format: '', description: 'Whether this service is available.', priority: 0 },
  AGE_COLUMN,
];

/** kube-aggregator's printer: `Local` or `ns/name`; `True`, or `False (Reason)`. */
function cellsOf(a: APIService): unknown[] {
  const service = a.spec.service ? `${a.spec.service.namespace}/${a.spec.service.name}` : a.backendURL ? a.backendURL.origin : 'Local';
  const c = a.status.conditions.find((x) => x.type === 'Available');
  const available = !c ? 'Unknown' : c.status === 'True' ? 'True' : `${c.status}${c.reason ? ` (${c.reason})` : ''}`;
  return [a.metadata.name, service, available, translateTimestampSince(a.metadata.creationTimestamp)];
}

/** The Table of `items`, or the 400 Status for a bad `includeObject`. */
function printed(items: readonly APIService[], query: Record<string, string | undefined>): { ok: true; table: Record<string, unknown> } | { ok: false; status: V1Status } {
  const include = includeObjectPolicy(new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined)));
  if (!include.ok) return include;
  return { ok: true, table: table(COLUMNS, items.map((a) => ({ cells: cellsOf(a), object: toJSON(a) })), '', include.value) };
}

function toJSON(a: APIService): Record<string, unknown> & { metadata: Record<string, unknown> } {
  const json = toAPIServiceJSON(a) as Record<string, unknown> & { metadata: Record<string, unknown> };
  if (a.metadata.creationTimestamp) json.metadata.creationTimestamp = a.metadata.creationTimestamp;
  return json;
}

/** Fastify plugin: the apiregistration.k8s.io routes. */
export const apiServiceRoutes: FastifyPluginAsync<APIServiceRouteOptions> = async (scope: FastifyInstance, o: APIServiceRouteOptions) => {
  scope.get(`/apis/${APIREGISTRATION_GROUP}`, async (_request, reply) => reply.type('application/json').send(APIREGISTRATION_GROUP_DOC));
  scope.get(`/apis/${APIREGISTRATION_GROUP}/v1`, async (_request, reply) => reply.type('application/json').send(APIREGISTRATION_RESOURCES));
  scope.get(`/apis/${APIREGISTRATION_GROUP}/v1/apiservices`, async (request, reply) => {
    const query = request.query as Record<string, string | undefined>;
    if (query.watch === 'true' || query.watch === '1') {
      return sendStatus(reply, errorStatus(405, 'watch is not supported on apiservices by this proxy', 'MethodNotAllowed'));
    }
    const items = o.aggregator.list().sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    if (wantsTable(request.headers.accept)) {
      const t = printed(items, query);
      return t.ok ? reply.type('application/json').send(t.table) : sendStatus(reply, t.status);
    }
    return reply.type('application/json').send({ kind: 'APIServiceList', apiVersion: `${APIREGISTRATION_GROUP}/v1`, metadata: { resourceVersion: '' }, items: items.map(toJSON) });
  });
  scope.get<{ Params: { name: string } }>(`/apis/${APIREGISTRATION_GROUP}/v1/apiservices/:name`, async (request, reply) => {
    const a = o.aggregator.get(request.params.name);
    if (!a) return sendStatus(reply, notFoundStatus(`apiservices.${APIREGISTRATION_GROUP}`, request.params.name));
    if (wantsTable(request.headers.accept)) {
      const t = printed([a], request.query as Record<string, string | undefined>);
      return t.ok ? reply.type('application/json').send(t.table) : sendStatus(reply, t.status);
    }
    return reply.type('application/json').send(toJSON(a));
  });
};
