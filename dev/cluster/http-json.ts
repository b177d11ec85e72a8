/**
 * JSON answers and request bodies for the dev cluster's plain (non-upgrade) HTTP handlers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { encodeStatus, errorStatus, type V1Status } from '../../src/status.js';

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
