/**
 * `readRefusalBody` (src/wire/refusal-body.ts): an upstream's refusal of an upgrade read whole before
 * the fallback is decided — only a small Content-Length body, within its deadline, decoded as a
 * Kubernetes Status when it is one; every byte it read kept in `rest` so a relay writes nothing twice
 * and loses nothing; a body that stops short, ends early or is too large is not waited for.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { MAX_REFUSAL_BODY_BYTES, readRefusalBody } from '../../../src/wire/refusal-body.js';
import { ResponseHeadParser } from '../../../src/wire/response-head.js';

function headOf(text: string) {
  const parsed = new ResponseHeadParser().push(Buffer.from(text, 'latin1'));
  if (!parsed) throw new Error('incomplete head');
  return parsed;
}

const STATUS = JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason: 'NotFound', code: 404, message: 'pods "x" not found' });

describe('readRefusalBody', () => {
  it('reads the rest of a Content-Length body from the socket and decodes the Status', async () => {
    const response = headOf(`HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${STATUS.length}\r\n\r\n${STATUS.slice(0, 5)}`);
    const upstream = new PassThrough();
    upstream.pause();
    const read = readRefusalBody(upstream, response);
    upstream.write(STATUS.slice(5, 20));
    upstream.write(STATUS.slice(20) + 'NEXT');
    const { response: after, refusal } = await read;
    expect(refusal).toEqual({ statusCode: 404, status: JSON.parse(STATUS) });
    // Exactly the body: what came after it stays in the socket.
    expect(after.rest.toString()).toBe(STATUS);
    expect(upstream.isPaused()).toBe(true);
    expect(upstream.read()?.toString()).toBe('NEXT');
  });

  it('a body that stops short: no Status after the deadline, the bytes read kept', async () => {
    const response = headOf(`HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: ${STATUS.length}\r\n\r\n`);
    const upstream = new PassThrough();
    upstream.pause();
    const read = readRefusalBody(upstream, response, 50);
    upstream.write(STATUS.slice(0, 10));
    const { response: after, refusal } = await read;
    expect(refusal).toEqual({ statusCode: 403 });
    expect(after.rest.toString()).toBe(STATUS.slice(0, 10));
  });

  it('a connection that ends before the body is whole: no Status, no wait for the deadline', async () => {
    const response = headOf(`HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: ${STATUS.length}\r\n\r\n`);
    const upstream = new PassThrough();
    upstream.pause();
    const started = Date.now();
    const read = readRefusalBody(upstream, response, 60_000);
    upstream.end(STATUS.slice(0, 10));
    const { refusal } = await read;
    expect(refusal).toEqual({ statusCode: 403 });
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it.each([
    ['chunked', `HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`],
    ['no length (read until close)', `HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n\r\n`],
    ['larger than the limit', `HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: ${MAX_REFUSAL_BODY_BYTES + 1}\r\n\r\n`],
  ])('%s: not read at all', async (_name, head) => {
    const response = headOf(head);
    const upstream = new PassThrough();
    upstream.pause();
    upstream.write('{"kind":"Status"}');
    const { response: after, refusal } = await readRefusalBody(upstream, response, 50);
    expect(refusal).toEqual({ statusCode: 403 });
    expect(after).toBe(response);
    expect(upstream.read()?.toString()).toBe('{"kind":"Status"}');
  });

  it.each([
    ['text/plain', 'text/plain', STATUS],
    ['JSON that is no Status', 'application/json', '{"kind":"Pod"}'],
    ['malformed JSON', 'application/json', '{"kind":'],
  ])('%s: the body is kept, no Status', async (_name, type, body) => {
    const response = headOf(`HTTP/1.1 403 Forbidden\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    const { response: after, refusal } = await readRefusalBody(new PassThrough(), response, 50);
    expect(refusal).toEqual({ statusCode: 403 });
    expect(after.rest.toString()).toBe(body);
  });
});
