/**
 * The REST surface of the dev cluster's stored objects: core/v1 `services` and `events`,
 * discovery.k8s.io/v1 `endpointslices`. Per resource: list (all namespaces or one, with
 * `labelSelector` and `fieldSelector`), watch (`object-watch.ts`), get, create and delete,
 * answered as JSON or as a Table.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorStatus, notFoundStatus, type V1Status } from '../../src/status.js';
import { readJsonBody, sendJson, sendStatus } from './http-json.js';
import { fieldValue, meta, type ObjectStore } from './object-store.js';
import { serveObjectWatch } from './object-watch.js';
import { isWatch } from './pod-watch.js';
import { fieldSelector, labelSelector } from './pod-selectors.js';
import { sendPrintable } from './printable-response.js';
import type { Printer } from './printers.js';
import type { Parsed } from './stream-options.js';

type Json = Record<string, unknown>;

/** One served resource: its store, printer, create parsing and the fields it can be selected by. */
export interface ObjectResource {
  store: ObjectStore;
  printer: Printer;
  /** Validate and default a create body (as the resource's REST strategy). */
  parse(body: unknown): Parsed<Json>;
  /** Field selector paths besides metadata.name and metadata.namespace. */
  fields: readonly string[];
}

/** Where a request for a stored resource points. */
export interface ObjectRoute {
  resource: ObjectResource;
  /** Undefined: all namespaces. */
  namespace?: string;
  name?: string;
}

/** What the handler needs besides the route. */
export interface ObjectApiDeps {
  /** Namespaces that exist (requests into others get 404). */
  namespaces: ReadonlySet<string>;
}

function methodNotAllowed(method: string): V1Status {
  return errorStatus(405, `the server does not allow this method on the requested resource (${method})`);
}

/** Serve one request for a stored resource. */
export async function serveObjects(route: ObjectRoute, deps: ObjectApiDeps, req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<void> {
  const { resource, namespace, name } = route;
  const { store, printer } = resource;
  const { info } = store;
  const method = req.method ?? 'GET';
  if (namespace !== undefined && !deps.namespaces.has(namespace)) return sendStatus(res, notFoundStatus('namespaces', namespace));
  const notFound = (n: string): V1Status =>
    errorStatus(404, `${info.resource}${info.group ? `.${info.group}` : ''} "${n}" not found`, 'NotFound', {
      name: n,
      ...(info.group ? { group: info.group } : {}),
      kind: info.resource,
    });

  if (name !== undefined) {
    const found = store.get(namespace!, name);
    if (method === 'GET' || method === 'HEAD') {
      if (!found) return sendStatus(res, notFound(name));
      return sendPrintable(req, res, query, printer, found);
    }
    if (method === 'DELETE') {
      const gone = store.delete(namespace!, name);
      if (!gone) return sendStatus(res, notFound(name));
      if (info.returnDeletedObject) return sendJson(res, 200, gone);
      return sendJson(res, 200, {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Success',
        details: { name, ...(info.group ? { group: info.group } : {}), kind: info.resource, uid: meta(gone).uid },
      });
    }
    return sendStatus(res, methodNotAllowed(method));
  }

  if (method === 'POST') {
    if (namespace === undefined) return sendStatus(res, methodNotAllowed(method));
    const body = await readJsonBody(req);
    if (!body.ok) return sendStatus(res, body.status);
    const bodyNamespace = meta((body.value ?? {}) as Json).namespace;
    if (typeof bodyNamespace === 'string' && bodyNamespace !== '' && bodyNamespace !== namespace) {
      return sendStatus(res, errorStatus(400, 'the namespace of the provided object does not match the namespace sent on the request'));
    }
    const parsed = resource.parse(body.value);
    if (!parsed.ok) return sendStatus(res, parsed.status);
    const created = store.create(namespace, parsed.value);
    if (!created) {
      const n = String(meta(parsed.value).name);
      return sendStatus(res, errorStatus(409, `${info.resource}${info.group ? `.${info.group}` : ''} "${n}" already exists`, 'AlreadyExists', { name: n, ...(info.group ? { group: info.group } : {}), kind: info.resource }));
    }
    return sendJson(res, 201, created);
  }
  if (method !== 'GET' && method !== 'HEAD') return sendStatus(res, methodNotAllowed(method));
  const labels = labelSelector(query.get('labelSelector'));
  if (!labels.ok) return sendStatus(res, labels.status);
  const supported = new Set(['metadata.name', 'metadata.namespace', ...resource.fields]);
  const fields = fieldSelector<Json>(query.get('fieldSelector'), (f) => supported.has(f), fieldValue);
  if (!fields.ok) return sendStatus(res, fields.status);
  const matches = (o: Json): boolean => labels.value((meta(o).labels ?? {}) as Record<string, string>) && fields.value(o);
  if (isWatch(query)) return serveObjectWatch(req, res, store, namespace, matches, query, printer);
  const items = store
    .list(namespace)
    .filter(matches);
  sendPrintable(req, res, query, printer, {
    kind: `${info.kind}List`,
    apiVersion: info.apiVersion,
    metadata: { resourceVersion: String(store.versions.current()) },
    items,
  });
}

/**
 * Match a path (split into decoded segments) to a stored resource: `api/v1/{services|events}`,
 * `api/v1/namespaces/{ns}/{services|events}[/{name}]`, `apis/discovery.k8s.io/v1/endpointslices`,
 * `apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices[/{name}]`. Undefined: not one of them.
 */
export function objectRoute(parts: readonly string[], resources: Readonly<Record<string, ObjectResource>>): ObjectRoute | undefined {
  let rest: readonly string[];
  let group: string;
  if (parts[0] === 'api' && parts[1] === 'v1') {
    group = '';
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts[2] === 'v1') {
    group = parts[1]!;
    rest = parts.slice(3);
  } else return undefined;
  const lookup = (plural: string | undefined): ObjectResource | undefined => {
    const r = plural === undefined ? undefined : resources[plural];
    return r && r.store.info.group === group ? r : undefined;
  };
  if (rest.length === 1) {
    const resource = lookup(rest[0]);
    return resource ? { resource } : undefined;
  }
  if (rest[0] !== 'namespaces' || rest.length < 3 || rest.length > 4) return undefined;
  const resource = lookup(rest[2]);
  if (!resource) return undefined;
  return { resource, namespace: rest[1]!, ...(rest.length === 4 ? { name: rest[3]! } : {}) };
}
