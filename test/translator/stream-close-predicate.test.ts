import { describe, expect, it } from 'vitest';
import { isWebSocketRequestWithStreamCloseProtocol, shouldTranslate } from '../../translator/stream-close-predicate.js';

const base = ['Connection', 'Upgrade', 'Upgrade', 'websocket'];
const ON = { TranslateStreamCloseWebsocketRequests: true };
const OFF = { TranslateStreamCloseWebsocketRequests: false };

describe('translator predicate (IsWebSocketRequestWithStreamCloseProtocol + gate)', () => {
  it.each<[string, string[], boolean]>([
    ['kubectl: v5 alone', [...base, 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io'], true],
    ['client-node: v5 first of many', [...base, 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io, v4.channel.k8s.io, channel.k8s.io'], true],
    ['v5 later in the first line, odd spacing', [...base, 'Sec-WebSocket-Protocol', 'v4.channel.k8s.io ,  v5.channel.k8s.io  '], true],
    ['v5 only in the second line', [...base, 'Sec-WebSocket-Protocol', 'v4.channel.k8s.io', 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io'], false],
    ['no v5', [...base, 'Sec-WebSocket-Protocol', 'v4.channel.k8s.io, channel.k8s.io'], false],
    ['v5 in a different case (Go compares exactly)', [...base, 'Sec-WebSocket-Protocol', 'V5.Channel.K8s.Io'], false],
    ['no subprotocol header', [...base], false],
    ['Upgrade in any case', ['connection', 'upgrade', 'upgrade', 'WebSocket', 'sec-websocket-protocol', 'v5.channel.k8s.io'], true],
    ['Connection list containing upgrade', ['Connection', 'keep-alive, Upgrade', 'Upgrade', 'websocket', 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io'], true],
    ['Connection upgrade only on a second line', ['Connection', 'keep-alive', 'Connection', 'Upgrade', 'Upgrade', 'websocket', 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io'], true],
    ['no Connection: upgrade', ['Connection', 'keep-alive', 'Upgrade', 'websocket', 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io'], false],
    ['SPDY upgrade', ['Connection', 'Upgrade', 'Upgrade', 'SPDY/3.1', 'X-Stream-Protocol-Version', 'v5.channel.k8s.io'], false],
    ['first Upgrade line is not websocket', ['Connection', 'Upgrade', 'Upgrade', 'h2c', 'Upgrade', 'websocket', 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io'], false],
    ['port-forward tunnel protocol', [...base, 'Sec-WebSocket-Protocol', 'SPDY/3.1+portforward.k8s.io'], false],
  ])('%s → %s', (_name, raw, expected) => {
    expect(isWebSocketRequestWithStreamCloseProtocol(raw)).toBe(expected);
    expect(shouldTranslate(raw, ON)).toBe(expected);
  });

  it('gate off: never translates', () => {
    expect(shouldTranslate([...base, 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io'], OFF)).toBe(false);
  });
});
