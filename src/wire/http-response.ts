/**
 * Writing a complete HTTP/1.1 answer on a raw socket, for the phases where Node's ServerResponse is
 * not available: inside an 'upgrade' handler (before or instead of a 101) and after a hijack.
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { encodeStatus, type V1Status } from '../status.js';

/** Headers as name → value or repeated values. */
export type RawHeaders = Record<string, string | number | readonly string[]>;

/** Serialise a response head (status line, headers, blank line). */
export function responseHead(statusCode: number, headers: RawHeaders, statusMessage?: string): Buffer {
  let head = `HTTP/1.1 ${statusCode} ${statusMessage ?? STATUS_CODES[statusCode] ?? 'Unknown'}\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    const values = Array.isArray(value) ? value : [value];
    for (const v of values) head += `${name}: ${String(v)}\r\n`;
  }
  return Buffer.from(head + '\r\n', 'latin1');
}

/**
 * Write a full answer with a body and `Connection: close`, then end the socket. Used to refuse an
 * upgrade; the socket is never reused afterwards.
 */
export function writeRawResponse(
  socket: Duplex,
  statusCode: number,
  headers: RawHeaders,
  body: Buffer | string = '',
): void {
  const payload = typeof body === 'string' ? Buffer.from(body) : body;
  const head = responseHead(statusCode, {
    ...headers,
    'Content-Length': payload.length,
    Connection: 'close',
  });
  if (socket.destroyed) return;
  socket.end(Buffer.concat([head, payload]));
}

/** Refuse an upgrade with a JSON Status body (what the apiserver's responder writes). */
export function writeRawStatus(socket: Duplex, status: V1Status, extraHeaders: RawHeaders = {}): void {
  writeRawResponse(
    socket,
    status.code ?? 500,
    { 'Content-Type': 'application/json', ...extraHeaders },
    encodeStatus(status),
  );
}
