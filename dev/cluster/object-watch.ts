/**
 * `?watch=true` on a stored resource's list (services, endpointslices, events): a chunked stream
 * of `{"type":…,"object":…}` lines, as for pods (`pod-watch.ts`). Without a resourceVersion (or
 * with "0") it starts with ADDED for every matching object; with one, it replays the changes after
 * it (410 Gone, as an ERROR event, when they are no longer kept).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorStatus } from '../../src/status.js';
import { sendStatus } from './http-json.js';
import { meta, type ObjectStore, type StoreEvent } from './object-store.js';
import { watchEventObject } from './printable-response.js';
import type { Printer } from './printers.js';

type Json = Record<string, unknown>;

/** Serve one watch until the client leaves, `timeoutSeconds` passes or the cluster closes. */
export function serveObjectWatch(
  req: IncomingMessage,
  res: ServerResponse,
  store: ObjectStore,
  namespace: string | undefined,
  matches: (object: Json) => boolean,
  query: URLSearchParams,
  printer: Printer,
): void {
  const encode = watchEventObject(req, query, printer);
  if (!encode.ok) return sendStatus(res, encode.status);
  const selected = (o: Json): boolean => (namespace === undefined || meta(o).namespace === namespace) && matches(o);
  const send = (type: string, object: unknown): void => {
    res.write(JSON.stringify({ type, object: type === 'ERROR' ? object : encode.value(object as Json) }) + '\n');
  };
  res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
  res.flushHeaders();

  const rv = query.get('resourceVersion') ?? '';
  if (rv === '' || rv === '0') {
    for (const o of store.list(namespace)) {
      if (matches(o)) send('ADDED', { kind: store.info.kind, apiVersion: store.info.apiVersion, ...o });
    }
  } else {
    const since = Number(rv);
    const changes = Number.isInteger(since) ? store.changesSince(since) : undefined;
    if (!changes) {
      send('ERROR', errorStatus(410, `too old resource version: ${rv} (${store.versions.current()})`, 'Expired'));
      res.end();
      return;
    }
    for (const e of changes) if (selected(e.object)) send(e.type, e.object);
  }

  const onChange = (e: StoreEvent): void => {
    if (selected(e.object)) send(e.type, e.object);
  };
  store.on('change', onChange);
  const timeout = Number(query.get('timeoutSeconds') ?? '0');
  const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
  const stop = (): void => {
    store.off('change', onChange);
    clearTimeout(timer);
  };
  res.once('close', stop);
  req.once('close', stop);
}
