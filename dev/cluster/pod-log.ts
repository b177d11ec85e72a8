/**
 * `GET …/pods/{name}/log`: the main process's recent output (`kubectl logs`), with `container`,
 * `tailLines` and `follow=true` (`kubectl logs -f`: the output keeps coming until the process
 * exits, or the client leaves). Errors are the Status objects kube-apiserver answers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorStatus } from '../../src/status.js';
import { sendStatus } from './http-json.js';
import type { Pod } from './pod.js';

/** The last `n` lines of `text` (a final line without newline counts), as the kubelet's tail does. */
export function tailLines(text: Buffer, n: number): Buffer {
  if (n <= 0) return Buffer.alloc(0);
  let end = text.length;
  if (end > 0 && text[end - 1] === 0x0a) end--;
  let start = end;
  let lines = 0;
  while (start > 0) {
    if (text[start - 1] === 0x0a && ++lines === n) break;
    start--;
  }
  return text.subarray(start);
}

const isTrue = (v: string | null): boolean => v !== null && v !== 'false' && v !== '0';

/** Serve one pods/log request for `pod`. */
export function serveLog(pod: Pod, query: URLSearchParams, req: IncomingMessage, res: ServerResponse): void {
  const container = query.get('container') || (pod.containers.length === 1 ? pod.containers[0]!.name : '');
  const main = pod.mains.get(container);
  if (!main) {
    const names = pod.containers.map((c) => c.name).join(' ');
    return sendStatus(
      res,
      errorStatus(
        400,
        container ? `container ${container} is not valid for pod ${pod.name}` : `a container name must be specified for pod ${pod.name}, choose one of: [${names}]`,
      ),
    );
  }
  if (isTrue(query.get('previous'))) {
    return sendStatus(res, errorStatus(400, `previous terminated container "${container}" in pod "${pod.name}" not found`));
  }
  const tailParam = query.get('tailLines');
  const tail = tailParam === null ? undefined : Number(tailParam);
  if (tail !== undefined && (!Number.isInteger(tail) || tail < 0)) {
    return sendStatus(res, errorStatus(400, `tailLines: Invalid value: ${JSON.stringify(tailParam)}: must be a non-negative integer`));
  }
  const recent = (): Buffer => (tail === undefined ? main.logs() : tailLines(main.logs(), tail));
  if (!isTrue(query.get('follow'))) {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end(recent());
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/plain', 'Transfer-Encoding': 'chunked', 'Cache-Control': 'no-cache, private' });
  res.flushHeaders();
  const first = recent();
  if (first.length > 0) res.write(first);
  const stop = main.follow({ write: (chunk) => res.write(chunk), end: () => res.end() });
  const leave = (): void => stop();
  req.once('close', leave);
  res.once('close', leave);
}
