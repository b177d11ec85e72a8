/**
 * `?watch=true` on the pod lists: a chunked stream of `{"type":…,"object":…}` lines, kept open.
 * Without a resourceVersion (or with "0") it starts with ADDED for every existing pod; with one, it
 * replays the changes after it (410 Gone, as an ERROR event, if they are no longer known). Asked
 * for Tables (`kubectl get pods -w`), each event carries a one-row Table.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorStatus } from '../../src/status.js';
import type { PodEvent, PodRegistry } from './pod-registry.js';
import { podObject } from './pod-object.js';
import type { PodPredicate } from './pod-selectors.js';
import { sendStatus } from './http-json.js';
import { watchEventObject } from './printable-response.js';
import { POD_PRINTER } from './printers.js';

/** True when the query asks for a watch (`watch=true`, `watch=1`, any value but false/0). */
export function isWatch(query: URLSearchParams): boolean {
  const v = query.get('watch');
  return v !== null && v.toLowerCase() !== 'false' && v !== '0';
}

/** Serve one pod watch until the client leaves, `timeoutSeconds` passes or the cluster closes. */
export function servePodWatch(
  req: IncomingMessage,
  res: ServerResponse,
  registry: PodRegistry,
  namespace: string | undefined,
  matches: PodPredicate,
  query: URLSearchParams,
): void {
  const encode = watchEventObject(req, query, POD_PRINTER);
  if (!encode.ok) return sendStatus(res, encode.status);
  const selected = (e: PodEvent): boolean => (namespace === undefined || e.pod.namespace === namespace) && matches(e.pod);
  const send = (type: string, object: unknown): void => {
    res.write(JSON.stringify({ type, object: type === 'ERROR' ? object : encode.value(object as Record<string, unknown>) }) + '\n');
  };
  res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
  res.flushHeaders();

  const rv = query.get('resourceVersion') ?? '';
  if (rv === '' || rv === '0') {
    for (const pod of registry.list(namespace)) if (matches(pod)) send('ADDED', podObject(pod));
  } else {
    const since = Number(rv);
    if (!Number.isInteger(since) || since < registry.oldestResumable) {
      send('ERROR', { ...errorStatus(410, `too old resource version: ${rv} (${registry.resourceVersion})`, 'Expired') });
      res.end();
      return;
    }
    for (const e of registry.eventsSince(since)) if (selected(e)) send(e.type, e.object);
  }

  const onEvent = (e: PodEvent): void => {
    if (selected(e)) send(e.type, e.object);
  };
  registry.on('event', onEvent);
  const timeout = Number(query.get('timeoutSeconds') ?? '0');
  const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
  const stop = (): void => {
    registry.off('event', onEvent);
    clearTimeout(timer);
  };
  res.once('close', stop);
  req.once('close', stop);
}
