/**
 * JSON answers and request bodies for the dev cluster's plain (non-upgrade) HTTP handlers, and its
 * `/metrics` answers (Prometheus text).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { encodeStatus, errorStatus, type V1Status } from '../../src/status.js';
import { PROMETHEUS_TEXT_CONTENT_TYPE } from './resource-metrics-text.js';

/** Largest request body accepted (a Pod manifest, a review). */
export const MAX_BODY_BYTES = 1024 * 1024;

/** Write a JSON body. */
export function sendJson(res: ServerResponse, code: number, body: unknown): void {
  const payload = Buffer.from(JSON.stringify(body));
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': payload.length });
  res.end(payload);
}

/** Write a Status as the answer, with its code. */
export function sendStatus(res: ServerResponse, status: V1Status): void {
  const payload = encodeStatus(status);
  res.writeHead(status.code ?? 500, { 'Content-Type': 'application/json', 'Content-Length': payload.length });
  res.end(payload);
}

/** Answer GET or HEAD with Prometheus text (`text()` is not called for other methods: 405). */
export function sendMetricsText(req: IncomingMessage, res: ServerResponse, text: () => string | Promise<string>): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return sendStatus(res, errorStatus(405, `the server does not allow this method on the requested resource (${req.method})`));
  }
  Promise.resolve()
    .then(text)
    .then(
      (t) => {
        const body = Buffer.from(t);
        res.writeHead(200, { 'Content-Type': PROMETHEUS_TEXT_CONTENT_TYPE, 'Content-Length': body.length });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (err: unknown) => sendStatus(res, errorStatus(500, `Internal error occurred: ${String(err)}`)),
    );
}

/** Read a whole request body (rejects beyond {@link MAX_BODY_BYTES}). */
export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
}

/** Read a JSON body: the value, or the 400 Status the apiserver would answer. */
export async function readJsonBody(req: IncomingMessage): Promise<{ ok: true; value: unknown } | { ok: false; status: V1Status }> {
  try {
    return { ok: true, value: JSON.parse((await readBody(req)).toString('utf8')) };
  } catch (err) {
    return { ok: false, status: errorStatus(400, `the request body is not valid JSON: ${(err as Error).message}`) };
  }
}
