/**
 * The apiserver look-alike's decision table (`apiserver-streaming.ts`): per apiserver version, node
 * declaration and wire, which way a streaming upgrade goes and which `proxy_type` is counted; the
 * refusals first; and how a request's wire is told.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { SPDY_STREAMING_REFUSED, streamWay, streamWire, type StreamWire } from '../../../dev/cluster/apiserver-streaming.js';
import type { StreamSubresource } from '../../../dev/cluster/streaming-metrics.js';

const DECLARES = ['ExtendWebSocketsToKubelet'];

describe('streamWay', () => {
  it.each<[number, readonly string[], StreamSubresource, StreamWire, string]>([
    [36, DECLARES, 'exec', 'v5', 'kubelet proxied_to_kubelet'],
    [36, DECLARES, 'attach', 'v5', 'kubelet proxied_to_kubelet'],
    [36, DECLARES, 'portforward', 'tunnel', 'kubelet proxied_to_kubelet'],
    [36, DECLARES, 'exec', 'spdy', 'kubelet'],
    [36, DECLARES, 'exec', 'websocket', 'kubelet'],
    [36, [], 'exec', 'v5', 'translate translated_at_apiserver'],
    [36, [], 'portforward', 'tunnel', 'tunnel tunneled_at_apiserver'],
    [36, ['SomethingElse'], 'attach', 'v5', 'translate translated_at_apiserver'],
    [36, [], 'portforward', 'spdy', 'kubelet'],
    [35, DECLARES, 'exec', 'v5', 'translate'],
    [35, [], 'portforward', 'tunnel', 'tunnel'],
    [31, [], 'portforward', 'tunnel', 'tunnel'],
    [30, [], 'exec', 'v5', 'translate'],
    [30, [], 'portforward', 'tunnel', 'kubelet'],
    [29, [], 'exec', 'v5', 'kubelet'],
    [29, [], 'portforward', 'tunnel', 'kubelet'],
  ])('apiserver 1.%i, node declares %j: %s %s → %s', (minor, features, subresource, wire, want) => {
    const way = streamWay({ apiserverMinor: minor }, subresource, wire, features);
    expect([way.way, 'proxyType' in way ? way.proxyType : undefined].filter(Boolean).join(' ')).toBe(want);
  });

  it.each<[StreamSubresource, StreamWire]>([
    ['exec', 'v5'],
    ['attach', 'v5'],
    ['portforward', 'tunnel'],
  ])('refuseWebSocketStreaming refuses %s %s with an empty 403, before any version rule', (subresource, wire) => {
    for (const minor of [29, 35, 36]) {
      expect(streamWay({ apiserverMinor: minor, refuseWebSocketStreaming: true }, subresource, wire, DECLARES)).toEqual({
        way: 'refuse',
        refusal: { statusCode: 403, body: '' },
      });
    }
  });

  it('refuseWebSocketStreaming leaves SPDY and legacy WebSockets alone; refuseSpdyStreaming refuses SPDY only', () => {
    const both = { apiserverMinor: 36, refuseWebSocketStreaming: true };
    expect(streamWay(both, 'exec', 'spdy', DECLARES)).toEqual({ way: 'kubelet' });
    expect(streamWay(both, 'exec', 'websocket', DECLARES)).toEqual({ way: 'kubelet' });
    const gateway = { apiserverMinor: 36, refuseSpdyStreaming: true };
    for (const subresource of ['exec', 'attach', 'portforward'] as const) {
      expect(streamWay(gateway, subresource, 'spdy', DECLARES)).toEqual({
        way: 'refuse',
        refusal: { statusCode: 403, contentType: 'text/plain; charset=utf-8', body: `${SPDY_STREAMING_REFUSED}\n` },
      });
    }
    expect(streamWay(gateway, 'exec', 'v5', DECLARES)).toEqual({ way: 'kubelet', proxyType: 'proxied_to_kubelet' });
    expect(streamWay(gateway, 'exec', 'websocket', DECLARES)).toEqual({ way: 'kubelet' });
  });
});

describe('streamWire', () => {
  const req = (...raw: string[]): Pick<IncomingMessage, 'rawHeaders'> => ({ rawHeaders: ['Connection', 'Upgrade', 'Upgrade', 'websocket', ...raw] });
  it.each<[string, Pick<IncomingMessage, 'rawHeaders'>, StreamSubresource, StreamWire]>([
    ['v5 first', req('Sec-WebSocket-Protocol', 'v5.channel.k8s.io, v4.channel.k8s.io'), 'exec', 'v5'],
    ['v5 later on the first line', req('Sec-WebSocket-Protocol', 'v4.channel.k8s.io,v5.channel.k8s.io'), 'attach', 'v5'],
    ['v5 only on a second line (x/net/websocket reads the first)', req('Sec-WebSocket-Protocol', 'v4.channel.k8s.io', 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io'), 'exec', 'websocket'],
    ['v5 in the wrong case', req('Sec-WebSocket-Protocol', 'V5.CHANNEL.K8S.IO'), 'exec', 'websocket'],
    ['v5 offered to portforward', req('Sec-WebSocket-Protocol', 'v5.channel.k8s.io'), 'portforward', 'websocket'],
    ['the tunnel', req('Sec-WebSocket-Protocol', 'SPDY/3.1+portforward.k8s.io'), 'portforward', 'tunnel'],
    ['the tunnel offered to exec', req('Sec-WebSocket-Protocol', 'SPDY/3.1+portforward.k8s.io'), 'exec', 'websocket'],
    ['no subprotocol', req(), 'exec', 'websocket'],
  ])('%s', (_name, r, subresource, want) => {
    expect(streamWire(r, 'websocket', subresource)).toBe(want);
  });

  it('SPDY is SPDY whatever else it carries', () => {
    expect(streamWire(req('Sec-WebSocket-Protocol', 'v5.channel.k8s.io'), 'spdy', 'exec')).toBe('spdy');
  });
});
