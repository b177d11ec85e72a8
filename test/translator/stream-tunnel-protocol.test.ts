import { describe, expect, it } from 'vitest';
import {
  answeredSubprotocol,
  isTunnelingProtocol,
  isTunnelingRequest,
  offeredWebSocketProtocols,
  tunnelRequestHeaders,
  tunneledSpdyProtocols,
} from '../../translator/stream-tunnel-protocol.js';

const WS = ['Connection', 'Upgrade', 'Upgrade', 'websocket'];

describe('isTunnelingProtocol', () => {
  it.each([
    ['SPDY/3.1+portforward.k8s.io', true],
    ['SPDY/3.1+v4.channel.k8s.io', true],
    ['SPDY/3.1+.k8s.io', true],
    ['spdy/3.1+portforward.k8s.io', false], // Go's HasPrefix is case-sensitive
    ['SPDY/3.1+portforward.k8s.io.example', false],
    ['SPDY/3.1portforward.k8s.io', false],
    ['portforward.k8s.io', false],
    ['v4.channel.k8s.io', false],
    ['v5.channel.k8s.io', false],
  ])('%s → %s', (protocol, expected) => {
    expect(isTunnelingProtocol(protocol)).toBe(expected);
  });
});

describe('isTunnelingRequest', () => {
  it.each<[string, string[], boolean]>([
    ['kubectl 1.31', [...WS, 'Sec-WebSocket-Protocol', 'SPDY/3.1+portforward.k8s.io'], true],
    ['listed among others, odd spacing', [...WS, 'Sec-WebSocket-Protocol', ' v4.channel.k8s.io ,SPDY/3.1+portforward.k8s.io '], true],
    ['lower-case upgrade headers', ['connection', 'keep-alive, upgrade', 'upgrade', 'WebSocket', 'sec-websocket-protocol', 'SPDY/3.1+portforward.k8s.io'], true],
    ['only on the second protocol line', [...WS, 'Sec-WebSocket-Protocol', 'v4.channel.k8s.io', 'Sec-WebSocket-Protocol', 'SPDY/3.1+portforward.k8s.io'], false],
    ['legacy WebSocket v4 (client-node)', [...WS, 'Sec-WebSocket-Protocol', 'v4.channel.k8s.io, v4.base64.channel.k8s.io'], false],
    ['no protocol', WS, false],
    ['SPDY upgrade', ['Connection', 'Upgrade', 'Upgrade', 'SPDY/3.1', 'X-Stream-Protocol-Version', 'portforward.k8s.io'], false],
    ['no Connection: upgrade', ['Upgrade', 'websocket', 'Sec-WebSocket-Protocol', 'SPDY/3.1+portforward.k8s.io'], false],
    ['Upgrade is not websocket', ['Connection', 'Upgrade', 'Upgrade', 'h2c', 'Sec-WebSocket-Protocol', 'SPDY/3.1+portforward.k8s.io'], false],
  ])('%s', (_name, raw, expected) => {
    expect(isTunnelingRequest(raw)).toBe(expected);
  });
});

describe('protocol stripping', () => {
  it('keeps only tunneling entries of the first line, prefix stripped, in the client order', () => {
    const raw = [...WS, 'Sec-WebSocket-Protocol', 'SPDY/3.1+v2.portforward.k8s.io, v4.channel.k8s.io,, SPDY/3.1+portforward.k8s.io', 'Sec-WebSocket-Protocol', 'SPDY/3.1+other.k8s.io'];
    expect(offeredWebSocketProtocols(raw)).toEqual(['SPDY/3.1+v2.portforward.k8s.io', 'v4.channel.k8s.io', 'SPDY/3.1+portforward.k8s.io']);
    expect(tunneledSpdyProtocols(raw)).toEqual(['v2.portforward.k8s.io', 'portforward.k8s.io']);
  });

  it('finds nothing without a tunneling protocol', () => {
    expect(tunneledSpdyProtocols([...WS, 'Sec-WebSocket-Protocol', 'v4.channel.k8s.io'])).toEqual([]);
    expect(tunneledSpdyProtocols(WS)).toEqual([]);
  });

  it.each<[string | undefined, string[], string | undefined]>([
    ['portforward.k8s.io', ['SPDY/3.1+portforward.k8s.io'], 'SPDY/3.1+portforward.k8s.io'],
    [' portforward.k8s.io ', ['SPDY/3.1+portforward.k8s.io'], 'SPDY/3.1+portforward.k8s.io'],
    [undefined, ['SPDY/3.1+portforward.k8s.io'], undefined],
    ['', ['SPDY/3.1+portforward.k8s.io'], undefined],
    ['v9.portforward.k8s.io', ['SPDY/3.1+portforward.k8s.io'], undefined],
  ])('upstream chose %j → answer %j', (chosen, offered, expected) => {
    expect(answeredSubprotocol(chosen, offered)).toBe(expected);
  });
});

describe('tunnelRequestHeaders', () => {
  const client = { remoteAddress: '::ffff:10.1.2.3', proto: 'https' as const, host: 'proxy.example:6443' };
  const raw = [
    'Host', 'proxy.example:6443',
    'Connection', 'Upgrade',
    'Upgrade', 'websocket',
    'Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ==',
    'Sec-WebSocket-Version', '13',
    'Sec-WebSocket-Protocol', 'SPDY/3.1+portforward.k8s.io',
    'Sec-WebSocket-Extensions', 'permessage-deflate',
    'X-Stream-Protocol-Version', 'smuggled.k8s.io',
    'Authorization', 'Bearer caller-token',
    'Impersonate-User', 'alice',
    'Impersonate-Group', 'devs',
    'X-Forwarded-For', '192.0.2.1',
    'User-Agent', 'kubectl/v1.33.0',
    'Keep-Alive', 'timeout=5',
  ];

  it('turns the WebSocket request into a SPDY/3.1 upgrade and keeps the caller identity', () => {
    expect(tunnelRequestHeaders(raw, ['portforward.k8s.io', 'v2.portforward.k8s.io'], client, {}, 'kubelet:10250')).toEqual([
      // The upgrade lines first: a Node upstream keeps only about the first 1,000 header lines.
      ['Host', 'kubelet:10250'],
      ['Connection', 'Upgrade'],
      ['Upgrade', 'SPDY/3.1'],
      ['X-Stream-Protocol-Version', 'portforward.k8s.io'],
      ['X-Stream-Protocol-Version', 'v2.portforward.k8s.io'],
      ['Content-Length', '0'],
      ['Authorization', 'Bearer caller-token'],
      ['Impersonate-User', 'alice'],
      ['Impersonate-Group', 'devs'],
      ['User-Agent', 'kubectl/v1.33.0'],
      ['X-Forwarded-For', '192.0.2.1, 10.1.2.3'],
      ['X-Forwarded-Proto', 'https'],
      ['X-Forwarded-Host', 'proxy.example:6443'],
    ]);
  });

  it('sets the given auth headers over the caller\'s (for the impersonating modes; passthrough passes none)', () => {
    const pairs = tunnelRequestHeaders(raw, ['portforward.k8s.io'], client, { Authorization: 'Bearer proxy-token' }, 'u');
    expect(pairs.filter(([n]) => n.toLowerCase() === 'authorization')).toEqual([['Authorization', 'Bearer proxy-token']]);
  });
});
