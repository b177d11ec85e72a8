/**
 * Relaying an upstream's refusal of an upgrade (≥ 400) to the client byte for byte, within
 * apiserver's 10 s deadline, then closing both connections. Shared by the UpgradeAwareProxy, the
 * port-forward tunnel, the translator and the agent.
 */
import type { Duplex } from 'node:stream';
import { closeAfterAnswer } from './close-after-answer.js';
import type { CompleteResponseHead } from './response-head.js';

/**
 * How long an upstream error response (≥ 400) may take to reach the client; apiserver sets the same
 * 10 s read/write deadlines before echoing it.
 */
export const ERROR_RESPONSE_DEADLINE_MS = 10_000;

/**
 * Replay an upstream ≥ 400 answer byte for byte: the bytes already read, then the rest of the body
 * (exactly Content-Length bytes when given, else until the upstream closes), within the deadline.
 * Shared with the port-forward tunnel.
 */
export function relayErrorResponse(client: Duplex, upstream: Duplex, raw: Buffer, response: CompleteResponseHead, isHead: boolean): void {
  const length = response.head.headers.get('content-length');
  const chunked = response.head.headers.tokens('transfer-encoding').includes('chunked');
  let remaining = isHead ? 0 : length !== undefined && !chunked && /^\d+$/.test(length) ? Number(length) - response.rest.length : Infinity;
  const deadline = setTimeout(() => finish(), ERROR_RESPONSE_DEADLINE_MS);
  deadline.unref();
  let finished = false;
  const finish = (): void => {
    if (finished) return;
    finished = true;
    clearTimeout(deadline);
    upstream.off('data', onData);
    upstream.destroy();
    closeAfterAnswer(client);
  };
  const onData = (chunk: Buffer): void => {
    const part = chunk.length > remaining ? chunk.subarray(0, remaining) : chunk;
    remaining -= part.length;
    if (!client.write(part)) {
      upstream.pause();
      client.once('drain', () => upstream.resume());
    }
    if (remaining <= 0) finish();
  };
  client.write(raw);
  if (remaining <= 0) return finish();
  upstream.on('data', onData);
  upstream.once('end', finish);
  upstream.once('close', finish);
  upstream.on('error', finish);
  upstream.resume();
}
