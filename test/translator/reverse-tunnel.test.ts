/**
 * The ReverseStreamTunnelProxy on the wire, driven directly over in-memory connections (see
 * reverse-wire.ts): the tunnel's WebSocket handshake upstream, the client's bytes held until the
 * upstream's 101, both directions byte for byte with the upstream's messages cut at every boundary,
 * the ends (an upstream close 1000 delivers everything first; a client FIN becomes close 1000), every
 * refusal, and the port-forward record the right way round.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Duplex } from 'node:stream';
import { Registry } from 'prom-client';
import { PortForwardRecording } from '../../src/recording/port-forward-recording.js';
import { createRecordingMetrics } from '../../src/recording/recording-metrics.js';
import { newRecordingId } from '../../src/recording/sink.js';
import { ReverseStreamTunnelProxy } from '../../translator/reverse-tunnel.js';
import type { TunnelOutcome } from '../../translator/stream-tunnel.js';
import { MemorySink } from '../src/recording/recording-fixture.js';
import { ClientFrames, closeFrame, headValue, MemoryRoute, parsedRequest, playUpstream, responseOf, serverFrame, socketPair, SpdyClientFrames, switching, until, type Dialled } from './reverse-wire.js';

const TUNNEL = 'SPDY/3.1+portforward.k8s.io';
const PF_HEAD = (protocol = 'portforward.k8s.io'): string =>
  'POST /api/v1/namespaces/default/pods/demo/portforward HTTP/1.1\r\nHost: proxy.example\r\nUser-Agent: kubectl/v1.28.0\r\nAuthorization: Bearer caller-token\r\n' +
  `Content-Length: 0\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: ${protocol}\r\n\r\n`;

interface Run {
  route: MemoryRoute;
  outcome: Promise<TunnelOutcome>;
  client: Duplex;
  received(): Buffer;
  ended(): boolean;
  closed(): boolean;
}

const runs: Run[] = [];
afterEach(() => {
  for (const r of runs.splice(0)) r.client.destroy();
});

async function open(early: Buffer = Buffer.alloc(0), protocol?: string, recording?: PortForwardRecording): Promise<Run> {
  const route = new MemoryRoute();
  const proxy = new ReverseStreamTunnelProxy({ upstream: route, maxBytesPerSec: 0, responseTimeoutMs: 5_000 });
  const req = await parsedRequest(PF_HEAD(protocol));
  const [socket, client] = socketPair();
  const chunks: Buffer[] = [];
  let ended = false;
  let closed = false;
  client.on('data', (c: Buffer) => chunks.push(c));
  client.on('end', () => (ended = true));
  client.on('close', () => (closed = true));
  client.on('error', () => {});
  const outcome = proxy.tryTunnel(req, socket, early, { remoteAddress: '10.0.0.7', proto: 'https', host: 'proxy.example' }, recording);
  const run: Run = { route, outcome, client, received: () => Buffer.concat(chunks), ended: () => ended, closed: () => closed };
  runs.push(run);
  return run;
}

/** The client's bytes after its 101. */
const afterSwitch = (run: Run): Buffer => responseOf(run.received())?.rest ?? Buffer.alloc(0);

describe('ReverseStreamTunnelProxy', () => {
  it('asks the upstream for the tunnel and holds the client bytes until its 101; then both ways byte for byte', async () => {
    const spdy = new SpdyClientFrames();
    const early = Buffer.concat([spdy.syn(1, { streamtype: 'error', port: '8080', requestid: '0' }), spdy.syn(3, { streamtype: 'data', port: '8080', requestid: '0' })]);
    // Copies: an in-memory connection hands the proxy these very buffers, which it masks in place.
    const sentEarly = Buffer.from(early);
    const run = await open(early);
    const up = await run.route.next();
    const { head, rest } = await up.head;
    expect(head.split('\r\n')[0]).toBe('GET /api/v1/namespaces/default/pods/demo/portforward HTTP/1.1');
    expect(headValue(head, 'upgrade')).toBe('websocket');
    expect(headValue(head, 'sec-websocket-protocol')).toBe(TUNNEL);
    expect(headValue(head, 'authorization')).toBe('Bearer caller-token');
    expect(headValue(head, 'x-stream-protocol-version')).toBeUndefined();
    expect(rest.length).toBe(0);
    expect(run.received().length).toBe(0);
    const frames = playUpstream(up, head);
    up.socket.write(switching(head, TUNNEL));
    const outcome = await run.outcome;
    expect(outcome).toMatchObject({ kind: 'tunneled', statusCode: 101, tunnelCode: 101, protocol: 'portforward.k8s.io' });
    expect(responseOf(run.received())?.head).toBe('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n');
    // The held SPDY bytes, then more, arrive upstream as binary messages (masked on the wire).
    const more = spdy.data(3, 'GET / HTTP/1.0\r\n\r\n');
    const sent = Buffer.concat([sentEarly, more]);
    run.client.write(more);
    await until('the client bytes upstream', () => Buffer.concat(frames.messages).length === sent.length);
    expect(Buffer.concat(frames.messages)).toEqual(sent);
    expect(frames.error).toBeUndefined();
    run.client.end();
    await until('close 1000 upstream', () => frames.closeCode !== undefined);
    expect(frames.closeCode).toBe(1000);
    if (outcome.kind === 'tunneled') {
      const end = await outcome.relay.done;
      expect(end.side).toBe('client');
      expect(outcome.relay.bytes).toEqual({ toUpstream: early.length + more.length, toClient: 0 });
    }
  });

  it('the upstream messages reach the client as bytes, whatever the cut; its close 1000 delivers all, then ends the client', { timeout: 30_000 }, async () => {
    const payload = Buffer.from('0123456789abcdefghij'.repeat(7));
    const messages = Buffer.concat([serverFrame(2, payload.subarray(0, 50)), serverFrame(2, payload.subarray(50, 51)), serverFrame(2, payload.subarray(51)), closeFrame(1000)]);
    const probe = await open();
    const total = switching((await (await probe.route.next()).head).head, TUNNEL).length + messages.length;
    probe.client.destroy();
    for (let cut = 1; cut < total; cut++) {
      const run = await open();
      const up = await run.route.next();
      const { head } = await up.head;
      playUpstream(up, head);
      const bytes = Buffer.concat([switching(head, TUNNEL), messages]);
      up.socket.write(bytes.subarray(0, cut));
      up.socket.write(bytes.subarray(cut));
      const outcome = await run.outcome;
      expect(outcome.kind).toBe('tunneled');
      await until('the end of the client connection', () => run.ended());
      expect({ cut, bytes: afterSwitch(run).toString() }).toEqual({ cut, bytes: payload.toString() });
      if (outcome.kind === 'tunneled') expect(await outcome.relay.done).toMatchObject({ side: 'upstream', reason: 'eof' });
    }
  });

  it('an upstream refusal is relayed verbatim', async () => {
    const run = await open();
    const up = await run.route.next();
    await up.head;
    const answer = 'HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\nforbidden';
    up.socket.write(answer);
    expect(await run.outcome).toEqual({ kind: 'forwarded', statusCode: 403, tunnelCode: 403 });
    await until('the answer', () => run.received().length === answer.length);
    expect(run.received().toString()).toBe(answer);
  });

  it('an upstream 101 without the tunnel subprotocol: 500 Status, no 101', async () => {
    const run = await open();
    const up = await run.route.next();
    const { head } = await up.head;
    up.socket.write(switching(head, 'v4.channel.k8s.io'));
    const outcome = await run.outcome;
    expect(outcome).toMatchObject({ kind: 'error', statusCode: 500, tunnelCode: 500 });
    await until('the answer', () => (responseOf(run.received())?.rest.length ?? 0) > 0);
    expect(responseOf(run.received())?.status).toBe(500);
  });

  it('a client that offers another protocol is refused with 403 before any dial', async () => {
    const run = await open(Buffer.alloc(0), 'v4.channel.k8s.io');
    expect(await run.outcome).toMatchObject({ kind: 'error', statusCode: 403, tunnelCode: 403 });
    await until('the answer', () => (responseOf(run.received())?.rest.length ?? 0) > 0);
    const answer = responseOf(run.received())!;
    expect(answer.head).toContain('X-Accepted-Stream-Protocol-Versions: portforward.k8s.io\r\n');
    expect(run.route.dials).toHaveLength(0);
  });

  it('the port-forward record reads the client SPDY streams and counts the bytes the right way round', async () => {
    const sink = new MemorySink();
    const recording = new PortForwardRecording(
      { id: newRecordingId(), namespace: 'default', pod: 'demo', ports: [], enforce: false },
      sink,
      createRecordingMetrics(new Registry()),
      { warn: () => undefined },
    );
    const spdy = new SpdyClientFrames();
    const early = spdy.syn(1, { streamtype: 'error', port: '6443', requestid: '0' });
    const run = await open(early, undefined, recording);
    const up = await run.route.next();
    const { head } = await up.head;
    playUpstream(up, head);
    up.socket.write(Buffer.concat([switching(head, TUNNEL), serverFrame(2, Buffer.from('from the kubelet')), closeFrame(1000)]));
    const outcome = await run.outcome;
    if (outcome.kind !== 'tunneled') throw new Error('not tunneled');
    await outcome.relay.done;
    await until('the record', () => sink.records.length === 1);
    expect(sink.records[0]).toMatchObject({ subresource: 'portforward', ports: ['6443'], bytesToUpstream: early.length, bytesToClient: 'from the kubelet'.length });
  });
});
