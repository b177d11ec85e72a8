/**
 * Answering a GET with an object or a list: plain JSON, or (when the client asks for it, as
 * `kubectl get` does) the meta.k8s.io/v1 Table of it, rendered by the resource's printer; and the
 * same for each watch event's object (`kubectl get -w`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson, sendStatus } from './http-json.js';
import type { Printer } from './printers.js';
import type { Parsed } from './stream-options.js';
import { includeObjectPolicy, table, wantsTable } from '../../src/meta-table.js';

type Json = Record<string, unknown>;

/**
 * Send `body` (one object with kind/apiVersion, or a `…List` with `items`) as JSON or as a Table.
 * `itemKind` / `itemApiVersion` are put on list items for `includeObject=Object`.
 */
export function sendPrintable(
  req: IncomingMessage,
  res: ServerResponse,
  query: URLSearchParams,
  printer: Printer,
  body: Json,
  code = 200,
): void {
  if (!wantsTable(req.headers.accept)) return sendJson(res, code, body);
  const include = includeObjectPolicy(query);
  if (!include.ok) return sendStatus(res, include.status);
  const metadata = (typeof body.metadata === 'object' && body.metadata !== null ? body.metadata : {}) as Json;
  const resourceVersion = typeof metadata.resourceVersion === 'string' ? metadata.resourceVersion : '';
  const now = Date.now();
  let objects: Json[];
  if (Array.isArray(body.items)) {
    const kind = typeof body.kind === 'string' ? body.kind.replace(/List$/, '') : '';
    objects = (body.items as Json[]).map((item) => ({ kind, apiVersion: body.apiVersion, ...item }));
  } else {
    objects = [body];
  }
  sendJson(
    res,
    code,
    table(
      printer.columns,
      objects.map((object) => ({ cells: printer.cells(object, now), object })),
      resourceVersion,
      include.value,
    ),
  );
}

/**
 * What a watch event carries for `object` (with kind/apiVersion): the object, or, when the client
 * asks for Tables, a one-row Table — with the column definitions in the first event only, as
 * kube-apiserver's watch encoder saves them (`columnDefinitions: null`; kubectl keeps the last ones).
 */
export function watchEventObject(req: IncomingMessage, query: URLSearchParams, printer: Printer): Parsed<(object: Json) => unknown> {
  if (!wantsTable(req.headers.accept)) return { ok: true, value: (object) => object };
  const include = includeObjectPolicy(query);
  if (!include.ok) return include;
  let first = true;
  return {
    ok: true,
    value: (object) => {
      const metadata = (typeof object.metadata === 'object' && object.metadata !== null ? object.metadata : {}) as Json;
      const t = table(printer.columns, [{ cells: printer.cells(object), object }], String(metadata.resourceVersion ?? ''), include.value);
      if (!first) t.columnDefinitions = null;
      first = false;
      return t;
    },
  };
}
