import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { frontProxyHeaders } from '../../../src/auth/identity-headers.js';
import { errorStatus } from '../../../src/status.js';
import { routeOf, routeVia } from '../../../src/routing/route.js';
import { primaryRoute, Router, type RouteResolver } from '../../../src/routing/router.js';
import { Upstream } from '../../../src/routing/upstream.js';

const upstream = new Upstream(new URL('https://apiserver.example:6443/prefix'), { rejectUnauthorized: true }, async () => ({ Authorization: 'Bearer proxy' }));
const alice = { username: 'alice', uid: '7', groups: ['devs', 'system:authenticated'], extra: { 'example.com/team': ['a', 'b'] } };
const req = (url: string): IncomingMessage => ({ url, headers: {}, rawHeaders: [] }) as unknown as IncomingMessage;

describe('primaryRoute', () => {
  it('is the upstream itself in passthrough: the caller request-target joined to the prefix, no identity lines', async () => {
    const route = primaryRoute(upstream, 'passthrough', alice);
    expect(route).toBe(upstream);
    expect(route.target('/api/v1/pods?watch=1')).toBe('/prefix/api/v1/pods?watch=1');
    expect(await route.callerAuthHeaders()).toEqual({});
  });

  it('carries the proxy credentials plus Impersonate-* for the verified caller in impersonate mode', async () => {
    const route = primaryRoute(upstream, 'impersonate', alice);
    expect(route.name).toBe('upstream');
    expect(await route.callerAuthHeaders()).toEqual({
      Authorization: 'Bearer proxy',
      'Impersonate-User': 'alice',
      'Impersonate-Uid': '7',
      'Impersonate-Group': ['devs', 'system:authenticated'],
      'Impersonate-Extra-example.com%2Fteam': ['a', 'b'],
    });
  });
});

describe('Router', () => {
  it('asks resolvers in order, the first that claims a request decides, and the rest go to the primary upstream', async () => {
    const asked: string[] = [];
    const kubelet = routeVia(upstream, { name: 'kubelet/n1', target: '/exec/default/demo/c' });
    const resolvers: RouteResolver[] = [
      { resolve: (r) => (asked.push(`a:${r.url}`), r.url === '/refused' ? { refuse: errorStatus(503, 'service unavailable', 'ServiceUnavailable') } : undefined) },
      { resolve: async (r) => (asked.push(`b:${r.url}`), r.url!.endsWith('/exec') ? { route: kubelet } : undefined) },
    ];
    const router = new Router({ upstream, authn: 'passthrough', resolvers });
    expect(await router.resolve(req('/refused'))).toEqual({ refuse: expect.objectContaining({ code: 503, message: 'service unavailable' }) });
    expect(await router.resolve(req('/api/v1/namespaces/default/pods/demo/exec'))).toEqual({ route: kubelet });
    expect(await router.resolve(req('/api/v1/pods'))).toEqual({ route: upstream });
    expect(asked).toEqual(['a:/refused', 'a:/api/v1/namespaces/default/pods/demo/exec', 'b:/api/v1/namespaces/default/pods/demo/exec', 'a:/api/v1/pods', 'b:/api/v1/pods']);
  });

  it('routeOf falls back only for requests the router never placed', () => {
    expect(routeOf(req('/x'), upstream)).toBe(upstream);
  });
});

describe('frontProxyHeaders', () => {
  it('presents the caller as kube-aggregator does: every group (system:authenticated too), escaped extra keys, the uid', () => {
    expect(frontProxyHeaders({ ...alice, extra: { 'example.com/team': ['a'], 'scopes ü': ['x'] } })).toEqual({
      'X-Remote-User': 'alice',
      'X-Remote-Uid': '7',
      'X-Remote-Group': ['devs', 'system:authenticated'],
      'X-Remote-Extra-example.com%2Fteam': ['a'],
      'X-Remote-Extra-scopes%20%C3%BC': ['x'],
    });
  });
});
