/**
 * The one decision of a streaming request's path (handlers/stream-path.ts), row by row as
 * docs/translator.md "Which path a streaming request takes" tells it, and the client protocol as the
 * decision reads it off real request heads.
 */
import { describe, expect, it } from 'vitest';
import { clientStreamProtocolOf, decideStreamPath, isFallbackAnswer, isVerdict, offersReverseProtocol, type StreamAttempt, type StreamDecisionInput, type StreamPlan } from '../../handlers/stream-path.js';
import type { UpstreamRefusal } from '../../src/wire/refusal-body.js';
import type { V1Status } from '../../src/status.js';
import { FEATURE_GATE_DEFAULTS, type FeatureGates } from '../../src/feature-gate.js';

const declaring = { kubelet: { declaredFeatures: ['ExtendWebSocketsToKubelet', 'SomethingElse'] } };
const older = { kubelet: { declaredFeatures: [] } };
const on = { ExtendWebSocketsToKubelet: true };
const off = { ExtendWebSocketsToKubelet: false };

/** A plan as `first → fallback` with proxy types, e.g. `passthrough(proxied_to_upstream)/websocket → translated(translated_at_apiserver)/spdy`. */
function show(p: StreamPlan): string {
  const one = (a: StreamPlan['first']): string => `${a.path}${a.proxyType ? `(${a.proxyType})` : ''}/${a.upstreamProtocol}`;
  return p.fallback ? `${one(p.first)} → ${one(p.fallback)}` : one(p.first);
}

const base: StreamDecisionInput = { subresource: 'exec', client: 'websocket-v5', gates: on, upstreamStreaming: 'auto', translatable: true, reverseNegotiable: true };

describe('decideStreamPath: the decision table', () => {
  it.each<[string, Partial<StreamDecisionInput>, string]>([
    // Kubelet mode: the node's declaredFeatures decide, once, no fallback.
    ['kubelet, declaring node, v5 exec', { route: declaring }, 'passthrough(proxied_to_kubelet)/websocket'],
    ['kubelet, declaring node, the tunnel', { route: declaring, subresource: 'portforward', client: 'websocket-tunnel' }, 'passthrough(proxied_to_kubelet)/websocket'],
    ['kubelet, older node, v5 attach', { route: older, subresource: 'attach' }, 'translated(translated_at_apiserver)/spdy'],
    ['kubelet, older node, the tunnel', { route: older, subresource: 'portforward', client: 'websocket-tunnel' }, 'tunnel(tunneled_at_apiserver)/spdy'],
    ['kubelet, declaring node, gate ExtendWebSocketsToKubelet off', { route: declaring, gates: off }, 'translated(translated_at_apiserver)/spdy'],
    ['kubelet, SPDY', { route: older, client: 'spdy' }, 'passthrough/spdy'],
    ['kubelet, SPDY port-forward, declaring node', { route: declaring, subresource: 'portforward', client: 'spdy' }, 'passthrough/spdy'],
    ['kubelet, WebSocket v4', { route: older, client: 'websocket-legacy' }, 'passthrough(proxied_to_kubelet)/websocket'],
    ['kubelet ignores --upstream-streaming and the memory', { route: older, upstreamStreaming: 'websocket', remembered: 'websocket' }, 'translated(translated_at_apiserver)/spdy'],
    // An upstream that is asked (apiserver, agent cluster): auto.
    ['upstream, v5: passthrough, then translated', {}, 'passthrough(proxied_to_upstream)/websocket → translated(translated_at_apiserver)/spdy'],
    ['upstream, the tunnel: passthrough, then unwrapped', { subresource: 'portforward', client: 'websocket-tunnel' }, 'passthrough(proxied_to_upstream)/websocket → tunnel(tunneled_at_apiserver)/spdy'],
    ['upstream, SPDY exec: passthrough, then reverse-translated', { client: 'spdy' }, 'passthrough/spdy → reverse_translated/websocket'],
    ['upstream, SPDY port-forward: passthrough, then reverse-tunnelled', { subresource: 'portforward', client: 'spdy' }, 'passthrough/spdy → reverse_tunnel/websocket'],
    ['upstream, v5, remembered SPDY: translated at once', { remembered: 'spdy' }, 'translated(translated_at_apiserver)/spdy'],
    ['upstream, v5, remembered WebSocket: as without memory', { remembered: 'websocket' }, 'passthrough(proxied_to_upstream)/websocket → translated(translated_at_apiserver)/spdy'],
    ['upstream, SPDY, remembered WebSocket: reverse at once', { client: 'spdy', remembered: 'websocket' }, 'reverse_translated/websocket'],
    ['upstream, SPDY, remembered SPDY', { client: 'spdy', remembered: 'spdy' }, 'passthrough/spdy → reverse_translated/websocket'],
    ['upstream, the tunnel, remembered SPDY', { subresource: 'portforward', client: 'websocket-tunnel', remembered: 'spdy' }, 'tunnel(tunneled_at_apiserver)/spdy'],
    ['upstream, v5 whose query cannot be translated: the upstream judges it', { translatable: false }, 'passthrough(proxied_to_upstream)/websocket'],
    ['upstream, SPDY whose query cannot be translated', { client: 'spdy', translatable: false }, 'passthrough/spdy'],
    // A SPDY client offering no X-Stream-Protocol-Version the reverse translator negotiates (none at
    // all, or only unknown ones): the upstream's own refusal is its answer, nothing more goes upstream.
    ['upstream, SPDY exec offering no version the reverse translator serves', { client: 'spdy', reverseNegotiable: false }, 'passthrough/spdy'],
    ['upstream, SPDY port-forward offering no portforward.k8s.io', { subresource: 'portforward', client: 'spdy', reverseNegotiable: false }, 'passthrough/spdy'],
    ['upstream, SPDY exec, bad versions and an untranslatable query', { client: 'spdy', reverseNegotiable: false, translatable: false }, 'passthrough/spdy'],
    ['upstream, SPDY exec offering no version, remembered WebSocket: the reverse translator answers its 400/403', { client: 'spdy', reverseNegotiable: false, remembered: 'websocket' }, 'reverse_translated/websocket'],
    ['websocket, SPDY exec offering no version: the reverse translator answers its 400/403', { upstreamStreaming: 'websocket', client: 'spdy', reverseNegotiable: false }, 'reverse_translated/websocket'],
    ['spdy, SPDY exec offering no version: passthrough, as before', { upstreamStreaming: 'spdy', client: 'spdy', reverseNegotiable: false }, 'passthrough/spdy'],
    ['kubelet, SPDY offering no version: passthrough (the kubelet refuses)', { route: older, client: 'spdy', reverseNegotiable: false }, 'passthrough/spdy'],
    ['upstream, v5 is not read for SPDY versions', { reverseNegotiable: false }, 'passthrough(proxied_to_upstream)/websocket → translated(translated_at_apiserver)/spdy'],
    ['upstream, WebSocket v4: passthrough only', { client: 'websocket-legacy' }, 'passthrough(proxied_to_upstream)/websocket'],
    ['upstream, an unknown upgrade: passthrough only', { client: 'other' }, 'passthrough/spdy'],
    // --upstream-streaming spdy: as before 1.36.
    ['spdy, v5', { upstreamStreaming: 'spdy' }, 'translated(translated_at_apiserver)/spdy'],
    ['spdy, the tunnel', { upstreamStreaming: 'spdy', subresource: 'portforward', client: 'websocket-tunnel' }, 'tunnel(tunneled_at_apiserver)/spdy'],
    ['spdy, SPDY', { upstreamStreaming: 'spdy', client: 'spdy', remembered: 'websocket' }, 'passthrough/spdy'],
    ['spdy, v5 whose query cannot be translated: the translator answers its 400', { upstreamStreaming: 'spdy', translatable: false }, 'translated(translated_at_apiserver)/spdy'],
    // --upstream-streaming websocket: never SPDY upstream.
    ['websocket, v5', { upstreamStreaming: 'websocket', remembered: 'spdy' }, 'passthrough(proxied_to_upstream)/websocket'],
    ['websocket, the tunnel', { upstreamStreaming: 'websocket', subresource: 'portforward', client: 'websocket-tunnel' }, 'passthrough(proxied_to_upstream)/websocket'],
    ['websocket, SPDY exec', { upstreamStreaming: 'websocket', client: 'spdy' }, 'reverse_translated/websocket'],
    ['websocket, SPDY port-forward', { upstreamStreaming: 'websocket', subresource: 'portforward', client: 'spdy' }, 'reverse_tunnel/websocket'],
    ['websocket, WebSocket v4', { upstreamStreaming: 'websocket', client: 'websocket-legacy' }, 'passthrough(proxied_to_upstream)/websocket'],
  ])('%s → %s', (_name, input, want) => {
    expect(show(decideStreamPath({ ...base, ...input }))).toBe(want);
  });
});

describe('isFallbackAnswer', () => {
  const forward = { path: 'translated', upstreamProtocol: 'spdy' } as const;
  const reverse = { path: 'reverse_translated', upstreamProtocol: 'websocket' } as const;
  const reverseTunnel = { path: 'reverse_tunnel', upstreamProtocol: 'websocket' } as const;
  const status = (code: number, reason: string): V1Status => ({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason, code, message: reason });
  it.each<[string, UpstreamRefusal, StreamAttempt, boolean]>([
    ['400 without a body', { statusCode: 400 }, forward, true],
    ["403 without a body (OpenShift's WebSocket refusal)", { statusCode: 403 }, forward, true],
    ['403 without a body before a reverse translation (a gateway refusing SPDY)', { statusCode: 403 }, reverse, true],
    ['404 without a Status (a gateway without the route)', { statusCode: 404 }, reverse, true],
    ['500', { statusCode: 500 }, forward, true],
    ['503', { statusCode: 503 }, reverseTunnel, true],
    ['302', { statusCode: 302 }, forward, true],
    ['a BadRequest Status', { statusCode: 400, status: status(400, 'BadRequest') }, reverse, true],
    ['a Forbidden Status, v5 → SPDY (get → create: asks no less)', { statusCode: 403, status: status(403, 'Forbidden') }, forward, true],
    ['a Forbidden Status, SPDY → v5 (create must never be retried as get)', { statusCode: 403, status: status(403, 'Forbidden') }, reverse, false],
    ['a Forbidden Status, SPDY port-forward → the tunnel', { statusCode: 403, status: status(403, 'Forbidden') }, reverseTunnel, false],
    ['a NotFound Status (no such pod, in any protocol)', { statusCode: 404, status: status(404, 'NotFound') }, forward, false],
    ['a NotFound Status before a reverse translation', { statusCode: 404, status: status(404, 'NotFound') }, reverse, false],
    ['401', { statusCode: 401 }, forward, false],
    ['101', { statusCode: 101 }, reverse, false],
  ])('%s → %s', (_name, refusal, fallback, want) => expect(isFallbackAnswer(refusal, fallback)).toBe(want));
});

describe('isVerdict: a refusal that never turns the per-upstream memory', () => {
  it.each<[string, UpstreamRefusal, boolean]>([
    ['a Forbidden Status', { statusCode: 403, status: { metadata: {}, status: 'Failure', reason: 'Forbidden', code: 403 } }, true],
    ['a NotFound Status', { statusCode: 404, status: { metadata: {}, status: 'Failure', reason: 'NotFound', code: 404 } }, true],
    ['a 403 without a Status', { statusCode: 403 }, false],
    ['a BadRequest Status', { statusCode: 400, status: { metadata: {}, status: 'Failure', reason: 'BadRequest', code: 400 } }, false],
  ])('%s → %s', (_name, refusal, want) => expect(isVerdict(refusal)).toBe(want));
});

describe('clientStreamProtocolOf', () => {
  const raw = (lines: Array<[string, string]>): string[] => lines.flat();
  const headersOf = (lines: Array<[string, string]>): Record<string, string> => Object.fromEntries(lines.map(([n, v]) => [n.toLowerCase(), v]));
  const ws = (protocols: string): Array<[string, string]> => [['Connection', 'Upgrade'], ['Upgrade', 'websocket'], ['Sec-WebSocket-Protocol', protocols]];
  const spdy: Array<[string, string]> = [['Connection', 'Upgrade'], ['Upgrade', 'SPDY/3.1'], ['X-Stream-Protocol-Version', 'v4.channel.k8s.io']];
  it.each<[string, Array<[string, string]>, 'exec' | 'portforward', Partial<FeatureGates>, string]>([
    ['kubectl ≥ 1.30 exec', ws('v5.channel.k8s.io,v4.channel.k8s.io'), 'exec', {}, 'websocket-v5'],
    ['v5 with TranslateStreamCloseWebsocketRequests off', ws('v5.channel.k8s.io'), 'exec', { TranslateStreamCloseWebsocketRequests: false }, 'websocket-legacy'],
    ['client-node v4', ws('v4.channel.k8s.io'), 'exec', {}, 'websocket-legacy'],
    ['the tunnel on exec', ws('SPDY/3.1+portforward.k8s.io'), 'exec', {}, 'websocket-legacy'],
    ['kubectl ≥ 1.31 port-forward', ws('SPDY/3.1+portforward.k8s.io'), 'portforward', {}, 'websocket-tunnel'],
    ['the tunnel with PortForwardWebsockets off', ws('SPDY/3.1+portforward.k8s.io'), 'portforward', { PortForwardWebsockets: false }, 'websocket-legacy'],
    ['v5 on portforward', ws('v5.channel.k8s.io'), 'portforward', {}, 'websocket-legacy'],
    ['SPDY exec', spdy, 'exec', {}, 'spdy'],
    ['SPDY port-forward', spdy, 'portforward', {}, 'spdy'],
    ['an unknown upgrade', [['Connection', 'Upgrade'], ['Upgrade', 'h2c']], 'exec', {}, 'other'],
  ])('%s → %s', (_name, lines, subresource, gates, want) => {
    expect(clientStreamProtocolOf(raw(lines), headersOf(lines), subresource, { ...FEATURE_GATE_DEFAULTS, ...gates })).toBe(want);
  });
});

describe('offersReverseProtocol: what the reverse translator could negotiate with a SPDY client', () => {
  it.each<[string, string | string[] | undefined, 'exec' | 'attach' | 'portforward', boolean]>([
    ['kubectl ≥ 1.29 over SPDY (v5 first, then v4 …)', ['v5.channel.k8s.io', 'v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io'], 'exec', true],
    ['v1 only', 'channel.k8s.io', 'attach', true],
    ['a comma list on one line', 'v9.channel.k8s.io, v3.channel.k8s.io', 'exec', true],
    ['no X-Stream-Protocol-Version line', undefined, 'exec', false],
    ['an empty line', '', 'exec', false],
    ['only unknown versions', 'v9.channel.k8s.io', 'exec', false],
    ['only v5 (WebSocket-only, never over SPDY here)', 'v5.channel.k8s.io', 'exec', false],
    ['a bogus name', 'bogus.k8s.io', 'exec', false],
    ['port-forward', 'portforward.k8s.io', 'portforward', true],
    ['port-forward offering exec versions only', 'v4.channel.k8s.io', 'portforward', false],
    ['exec offering port-forward only', 'portforward.k8s.io', 'exec', false],
    ['port-forward with no line', undefined, 'portforward', false],
  ])('%s → %s', (_name, value, subresource, want) => {
    expect(offersReverseProtocol(value === undefined ? {} : { 'x-stream-protocol-version': value }, subresource)).toBe(want);
  });
});
