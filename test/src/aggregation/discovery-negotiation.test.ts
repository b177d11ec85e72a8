/** Accept negotiation for /apis, ETag and If-None-Match, with the headers real clients send. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  AGGREGATED_CONTENT_TYPE_V2,
  AGGREGATED_CONTENT_TYPE_V2BETA1,
  discoveryETag,
  discoveryHeaders,
  discoveryReply,
  ifNoneMatchHits,
  negotiateDiscovery,
  notAcceptableStatus,
  parseAccept,
} from '../../../src/aggregation/discovery-negotiation.js';

// client-go discovery_client.go: AcceptV2, AcceptV2Beta1, AcceptV1, AcceptV2NoPeer.
const V2 = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';
const V2BETA1 = 'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList';
const V2_NOPEER = `${V2};profile=nopeer`;

describe('negotiateDiscovery', () => {
  it.each([
    ['kubectl ≥1.30 (v2, v2beta1, json)', `${V2},${V2BETA1},application/json`, 'v2', AGGREGATED_CONTENT_TYPE_V2],
    ['kubectl 1.26–1.29 (v2beta1, json)', `${V2BETA1},application/json`, 'v2beta1', AGGREGATED_CONTENT_TYPE_V2BETA1],
    ['newest client-go with NoPeerDiscovery', `${V2_NOPEER},${V2},${V2BETA1},application/json`, 'v2', AGGREGATED_CONTENT_TYPE_V2],
    ['kubectl ≤1.25 / UseLegacyDiscovery', 'application/json', 'legacy', 'application/json'],
    ['no Accept', '', 'legacy', 'application/json'],
    ['curl default', '*/*', 'legacy', 'application/json'],
    ['parameters in another order, with spaces', 'application/json; as=APIGroupDiscoveryList ; v=v2beta1; g=apidiscovery.k8s.io', 'v2beta1', AGGREGATED_CONTENT_TYPE_V2BETA1],
    ['upper-case media type', 'Application/JSON;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList', 'v2', AGGREGATED_CONTENT_TYPE_V2],
    ['wildcard type with the aggregated parameters', '*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList', 'v2', AGGREGATED_CONTENT_TYPE_V2],
    ['higher q picks v2beta1 over v2', `${V2};q=0.5,${V2BETA1};q=0.9`, 'v2beta1', AGGREGATED_CONTENT_TYPE_V2BETA1],
    ['aggregated wins over a plain clause of higher q (as on kube-apiserver)', `application/json;q=1,${V2};q=0.1`, 'v2', AGGREGATED_CONTENT_TYPE_V2],
    ['protobuf first, then JSON aggregated', `application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,${V2}`, 'v2', AGGREGATED_CONTENT_TYPE_V2],
    ['an unknown discovery version falls back to legacy', 'application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json', 'legacy', 'application/json'],
    ['a Table conversion falls back to legacy', 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json', 'legacy', 'application/json'],
    ['an unknown profile is skipped', `${V2};profile=peer,application/json`, 'legacy', 'application/json'],
    ['q=0 aggregated is not acceptable', `${V2};q=0,application/json`, 'legacy', 'application/json'],
  ])('%s', (_name, accept, format, contentType) => {
    expect(negotiateDiscovery(accept)).toEqual({ format, contentType });
  });

  it.each([
    ['text/html'],
    ['application/yaml'],
    ['application/vnd.kubernetes.protobuf'],
    ['application/json;q=0'],
    [`application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList`],
    ['garbage'],
  ])('answers 406 for %s', (accept) => {
    expect(negotiateDiscovery(accept)).toEqual({ format: 'none', contentType: '' });
  });

  it('builds the 406 Status', () => {
    expect(notAcceptableStatus()).toMatchObject({ kind: 'Status', code: 406, reason: 'NotAcceptable', status: 'Failure' });
    expect(notAcceptableStatus().message).toContain('only the following media types are accepted: application/json, ');
  });
});

describe('parseAccept', () => {
  it('orders by q, then concrete before wildcard, stably', () => {
    const order = parseAccept('*/*, text/*;q=0.9, application/json, text/plain;q=0.9, application/*').map((c) => `${c.type}/${c.subType};${c.q}`);
    expect(order).toEqual(['application/json;1', 'application/*;1', '*/*;1', 'text/plain;0.9', 'text/*;0.9']);
  });
});

describe('discoveryETag and If-None-Match', () => {
  const body = Buffer.from('{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[]}');
  const etag = discoveryETag(body);

  it('is the quoted upper-case hex SHA-512 of the bytes', () => {
    expect(etag).toBe(`"${createHash('sha512').update(body).digest('hex').toUpperCase()}"`);
    expect(etag).toMatch(/^"[0-9A-F]{128}"$/);
    expect(discoveryETag(Buffer.concat([body, Buffer.from(' ')]))).not.toBe(etag);
  });

  it('matches the exact tag, a list containing it, a weak form, and *', () => {
    expect(ifNoneMatchHits(etag, etag)).toBe(true);
    expect(ifNoneMatchHits(`"abc", ${etag}`, etag)).toBe(true);
    expect(ifNoneMatchHits(`W/${etag}`, etag)).toBe(true);
    expect(ifNoneMatchHits('*', etag)).toBe(true);
    expect(ifNoneMatchHits(undefined, etag)).toBe(false);
    expect(ifNoneMatchHits(etag.toLowerCase(), etag)).toBe(false);
    expect(ifNoneMatchHits(etag.slice(1, -1), etag)).toBe(false);
  });

  it('gives the caching headers', () => {
    expect(discoveryHeaders(AGGREGATED_CONTENT_TYPE_V2, etag)).toEqual({ 'content-type': AGGREGATED_CONTENT_TYPE_V2, etag, vary: 'Accept', 'cache-control': 'public' });
  });
});

describe('discoveryReply', () => {
  it('sends 200 with the body, then 304 without one for the same ETag', () => {
    const body = Buffer.from('{"kind":"APIGroupList","apiVersion":"v1","groups":[]}');
    const doc = { body, etag: discoveryETag(body), contentType: 'application/json' };
    const first = discoveryReply(doc, undefined);
    expect(first).toEqual({ statusCode: 200, headers: discoveryHeaders('application/json', doc.etag), body });
    expect(discoveryReply(doc, first.headers.etag)).toEqual({ statusCode: 304, headers: first.headers, body: undefined });
    expect(discoveryReply(doc, '"other"').statusCode).toBe(200);
  });
});
