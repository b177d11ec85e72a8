/**
 * The translator dials first: against a scripted upstream whose every byte the test writes, an
 * upstream refusal (401, 403, 404) is the answer to the client's WebSocket handshake, byte for byte —
 * no 101 before it — counted under its code with the session outcome `upstream_refused`. Other
 * upstream failures still upgrade the client and report a Status on channel 3.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { scrapeCounter } from '../helpers/metrics.js';
import { RawClient, startProxy, startScriptedUpstream, type ScriptedUpstream } from '../proxy/scripted-upstream.js';

const EXEC = '/api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true';

/** A browser-style v5 handshake, raw. */
function handshake(path = EXEC): string {
  return (
    `GET ${path} HTTP/1.1\r\nHost: proxy.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
    'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n'
  );
}

/** An apiserver-style refusal with an odd header that must survive. */
function refusal(code: number, reason: string, message: string): string {
  const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code }) + '\n';
  return `HTTP/1.1 ${code} ${reason}\r\nContent-Type: application/json\r\nX-Odd:  kept\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

let upstream: ScriptedUpstream;
let proxy: RunningServer;
beforeAll(async () => {
  upstream = await startScriptedUpstream();
  // The translator's own refusals: the proxy dials the upstream in SPDY at once, as before issue 32
  // (by default it would first pass the v5 handshake through to this scripted upstream).
  proxy = await startProxy(upstream.url, { upstreamStreaming: 'spdy' });
});
afterAll(async () => {
  await proxy?.close();
  await upstream?.close();
});

const counter = (name: string, labels: Record<string, string>) => scrapeCounter(proxy.url, name, labels);

describe('translated path: the upstream answers before the client is upgraded', () => {
  it.each([
    [401, 'Unauthorized', 'Unauthorized'],
    [403, 'Forbidden', 'pods "demo" is forbidden: User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "default"'],
    [404, 'NotFound', 'pods "demo" not found'],
  ])('an upstream %i is relayed verbatim as the handshake answer, no 101, counted', async (code, reason, message) => {
    const before = {
      translator: await counter('apiserver_stream_translator_requests_total', { code: String(code) }),
      upgrades: await counter('kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: String(code) }),
      refused: await counter('kube_stream_proxy_streaming_requests_total', { path: 'translated', outcome: 'upstream_refused' }),
      established: await counter('kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '101' }),
    };
    const client = await RawClient.connect(proxy.url, { timeoutMs: 10_000 });
    client.write(handshake());
    const conn = await upstream.next();
    // The upstream leg is a SPDY upgrade with the v4-and-older protocols.
    expect(conn.head).toMatch(/^POST \/api\/v1\/namespaces\/default\/pods\/demo\/exec\?command=true&stdout=true HTTP\/1\.1\r\n/);
    expect(conn.head).toContain('\r\nUpgrade: SPDY/3.1\r\n');
    const answer = refusal(code, reason, message);
    conn.socket.write(answer);
    const received = await client.closed();
    // Everything the client got is the upstream's answer: no 101 came first.
    expect(received.toString('latin1')).toBe(answer);
    expect(await counter('apiserver_stream_translator_requests_total', { code: String(code) })).toBe(before.translator + 1);
    expect(await counter('kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: String(code) })).toBe(before.upgrades + 1);
    expect(await counter('kube_stream_proxy_streaming_requests_total', { path: 'translated', outcome: 'upstream_refused' })).toBe(before.refused + 1);
    expect(await counter('kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '101' })).toBe(before.established);
  });

  it('another non-101 answer (a redirect) still upgrades and reports its Status on channel 3, as before', async () => {
    const client = await RawClient.connect(proxy.url, { timeoutMs: 10_000 });
    client.write(handshake());
    const conn = await upstream.next();
    conn.socket.end('HTTP/1.1 302 Found\r\nLocation: http://elsewhere.invalid/\r\nContent-Length: 5\r\n\r\nmoved');
    // The Status, then a close frame (0x88) that waits for ours; this raw client just leaves.
    const received = (await client.until((b) => b.includes(0x88), 'the close frame')).toString('latin1');
    client.destroy();
    expect(received).toMatch(/^HTTP\/1\.1 101 Switching Protocols\r\n/);
    // The Status rides in a binary frame on channel 3: 0x82, a length, then 0x03 and the JSON.
    const json = received.slice(received.indexOf('{"'), received.lastIndexOf('}') + 1);
    const status = JSON.parse(json) as { status: string; code: number; message: string };
    expect(status).toMatchObject({ status: 'Failure', code: 500 });
    expect(status.message).toContain('unable to upgrade connection: moved');
  });

  it('a client whose connection is reset before the upstream answers is not counted and the upstream connection is dropped', async () => {
    const before = await counter('apiserver_stream_translator_requests_total', {});
    const client = await RawClient.connect(proxy.url, { timeoutMs: 10_000 });
    client.write(handshake());
    const conn = await upstream.next();
    const upstreamClosed = new Promise<void>((resolve) => conn.socket.once('close', () => resolve()));
    conn.socket.resume();
    // A reset is seen at once; a plain FIN only when the upstream answers (the socket is not read before).
    client.socket.resetAndDestroy();
    await upstreamClosed;
    expect(await counter('apiserver_stream_translator_requests_total', {})).toBe(before);
  });
});
