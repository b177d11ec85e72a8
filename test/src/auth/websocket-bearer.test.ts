import { describe, expect, it } from 'vitest';
import { websocketBearer, withWebSocketProtocols } from '../../../src/auth/websocket-bearer.js';

const P = 'base64url.bearer.authorization.k8s.io.';
const enc = (t: string): string => Buffer.from(t).toString('base64url');

describe('websocketBearer', () => {
  it('takes the token out of the list and keeps the other protocols in order, across lines', () => {
    expect(websocketBearer(['Sec-WebSocket-Protocol', `${P}${enc('abc')}, v5.channel.k8s.io`, 'sec-websocket-protocol', 'v4.channel.k8s.io'])).toEqual({
      token: 'abc',
      protocols: ['v5.channel.k8s.io', 'v4.channel.k8s.io'],
    });
    expect(websocketBearer(['Sec-WebSocket-Protocol', 'v5.channel.k8s.io'])).toEqual({ protocols: ['v5.channel.k8s.io'] });
  });

  it("refuses what kube-apiserver's ProtocolAuthenticator refuses", () => {
    expect(websocketBearer(['Sec-WebSocket-Protocol', `${P}${enc('a')}, ${P}${enc('b')}, v5.channel.k8s.io`]).error).toBe('multiple base64.bearer.authorization tokens specified');
    expect(websocketBearer(['Sec-WebSocket-Protocol', `${P}${enc('a')}`]).error).toBe('missing additional subprotocol');
    expect(websocketBearer(['Sec-WebSocket-Protocol', `${P}not=base64, v5.channel.k8s.io`]).error).toBe('invalid base64.bearer.authorization token');
    expect(websocketBearer(['Sec-WebSocket-Protocol', `${P}${Buffer.from([0xff, 0xfe]).toString('base64url')}, v5.channel.k8s.io`]).error).toBe('invalid base64.bearer.authorization token');
  });

  it('withWebSocketProtocols rewrites the lines into one', () => {
    expect(withWebSocketProtocols(['Host', 'h', 'Sec-WebSocket-Protocol', 'x, y', 'sec-websocket-protocol', 'z'], ['y', 'z'])).toEqual(['Host', 'h', 'Sec-WebSocket-Protocol', 'y, z']);
  });
});
