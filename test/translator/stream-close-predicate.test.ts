import { describe, expect, it } from 'vitest';
import { isWebSocketRequestWithStreamCloseProtocol } from '../../translator/stream-close-predicate.js';
import { clientStreamProtocolOf } from '../../handlers/stream-path.js';
import { FEATURE_GATE_DEFAULTS } from '../../src/feature-gate.js';

const base = ['Connection', 'Upgrade', 'Upgrade', 'websocket'];
const ON = FEATURE_GATE_DEFAULTS;
const OFF = { ...FEATURE_GATE_DEFAULTS, TranslateStreamCloseWebsocketRequests: false };
/** Node's parsed header object of raw lines (the decision reads both). */
const headersOf = (raw: string[]): Record<string, string> => {
  const h: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) h[raw[i]!.toLowerCase()] ??= raw[i + 1]!;
  return h;
};
/** The decision's reading: a v5 exec for the translator (or its passthrough) to take. */
const isV5 = (raw: string[], gates: typeof OFF): boolean => clientStreamProtocolOf(raw, headersOf(raw), 'exec', gates) === 'websocket-v5';

describe('the v5 predicate (IsWebSocketRequestWithStreamCloseProtocol) and the gate, as handlers/stream-path.ts reads them', () => {
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
    expect(isV5(raw, ON)).toBe(expected);
  });

  it('gate off: never v5 (a legacy WebSocket, passed through)', () => {
    expect(isV5([...base, 'Sec-WebSocket-Protocol', 'v5.channel.k8s.io'], OFF)).toBe(false);
  });
});
