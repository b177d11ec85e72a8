import { describe, expect, it } from 'vitest';
import { setHeaders, stripHopByHop, withForwardedHeaders, type HeaderPair } from '../../../src/wire/forwarded-headers.js';

describe('forwarded headers', () => {
  it('removes hop-by-hop headers and every header named in Connection', () => {
    const pairs: HeaderPair[] = [
      ['Connection', 'keep-alive, X-Private'],
      ['connection', 'Upgrade'],
      ['Keep-Alive', 'timeout=5'],
      ['Proxy-Authorization', 'Basic eA=='],
      ['Proxy-Connection', 'keep-alive'],
      ['TE', 'trailers'],
      ['Trailer', 'X-T'],
      ['Transfer-Encoding', 'chunked'],
      ['Upgrade', 'SPDY/3.1'],
      ['x-private', 'secret'],
      ['Accept', 'application/json'],
      ['X-Stream-Protocol-Version', 'v4.channel.k8s.io'],
    ];
    expect(stripHopByHop(pairs)).toEqual([
      ['Accept', 'application/json'],
      ['X-Stream-Protocol-Version', 'v4.channel.k8s.io'],
    ]);
  });

  it('spares Connection-named headers that keep() protects', () => {
    const pairs: HeaderPair[] = [
      ['Connection', 'Upgrade, Sec-WebSocket-Key'],
      ['Sec-WebSocket-Key', 'k'],
    ];
    expect(stripHopByHop(pairs, (n) => n.startsWith('sec-websocket-'))).toEqual([['Sec-WebSocket-Key', 'k']]);
  });

  it('appends the client to X-Forwarded-For in one line and replaces X-Forwarded-Proto/Host', () => {
    const out = withForwardedHeaders(
      [
        ['X-Forwarded-For', '10.0.0.1'],
        ['x-forwarded-for', '10.0.0.2'],
        ['X-Forwarded-Proto', 'gopher'],
        ['Accept', '*/*'],
      ],
      { remoteAddress: '::ffff:127.0.0.1', proto: 'https', host: 'proxy.example:6443' },
    );
    expect(out).toEqual([
      ['Accept', '*/*'],
      ['X-Forwarded-For', '10.0.0.1, 10.0.0.2, 127.0.0.1'],
      ['X-Forwarded-Proto', 'https'],
      ['X-Forwarded-Host', 'proxy.example:6443'],
    ]);
  });

  it('replaces credentials case-insensitively', () => {
    expect(setHeaders([['authorization', 'Bearer client'], ['A', 'b']], { Authorization: 'Bearer proxy' })).toEqual([
      ['A', 'b'],
      ['Authorization', 'Bearer proxy'],
    ]);
  });

});
