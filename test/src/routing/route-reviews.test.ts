/**
 * Reviews along a route (`reviewApiOver`): the TokenReview and SubjectAccessReview bodies the
 * client-node path sends, their answers read the same way, and a non-2xx answer rejected with its
 * Status message. Against a loopback HTTP server standing in for a cluster's apiserver.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ReviewRequestError, reviewApiOver } from '../../../src/routing/route-reviews.js';
import { Upstream } from '../../../src/routing/upstream.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

let server: Server | undefined;
afterEach(async () => {
  if (server) await new Promise<void>((r) => server!.close(() => r()));
  server = undefined;
});

async function apiserver(answer: (seen: Seen) => { code: number; body: unknown }): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (text += d));
    req.on('end', () => {
      const s: Seen = { method: req.method!, url: req.url!, headers: req.headers, body: JSON.parse(text) };
      seen.push(s);
      const a = answer(s);
      res.writeHead(a.code, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(a.body));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

describe('reviewApiOver', () => {
  it('TokenReview: the body, no caller identity, the user read with extra keys lower-cased', async () => {
    const api = await apiserver(() => ({
      code: 201,
      body: { kind: 'TokenReview', status: { authenticated: true, user: { username: 'alice', uid: 'u1', groups: ['devs'], extra: { Scopes: ['a'] } } } },
    }));
    const reviews = reviewApiOver(new Upstream(new URL(`${api.url}/prefix`), undefined));
    expect(await reviews.reviewToken('tok')).toEqual({ authenticated: true, user: { username: 'alice', uid: 'u1', groups: ['devs'], extra: { scopes: ['a'] } } });
    expect(api.seen[0]).toMatchObject({
      method: 'POST',
      url: '/prefix/apis/authentication.k8s.io/v1/tokenreviews',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 'tok' } },
    });
    expect(api.seen[0]!.headers.authorization).toBeUndefined();
    expect(api.seen[0]!.headers['impersonate-user']).toBeUndefined();
  });

  it('SubjectAccessReview: the attributes, allowed only when not also denied', async () => {
    const api = await apiserver((s) => ({ code: 201, body: { status: (s.body as { spec: { user: string } }).spec.user === 'admin' ? { allowed: true } : { allowed: false, reason: 'no rule' } } }));
    const reviews = reviewApiOver(new Upstream(new URL(api.url), undefined));
    const attrs = { verb: 'create', resource: 'pods', subresource: 'exec', namespace: 'default', name: 'gamma' };
    expect(await reviews.reviewAccess({ username: 'admin', groups: ['admins'], extra: {} }, attrs)).toEqual({ allowed: true, reason: '' });
    expect(await reviews.reviewAccess({ username: 'viewer', groups: [], extra: {} }, attrs)).toEqual({ allowed: false, reason: 'no rule' });
    expect(api.seen[0]!.body).toEqual({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user: 'admin', groups: ['admins'], resourceAttributes: { verb: 'create', group: '', resource: 'pods', subresource: 'exec', namespace: 'default', name: 'gamma' } },
    });
  });

  it('a non-2xx answer rejects with its Status message and code', async () => {
    const api = await apiserver(() => ({ code: 403, body: { kind: 'Status', code: 403, message: 'tokenreviews.authentication.k8s.io is forbidden: User "agent" cannot create' } }));
    const err = await reviewApiOver(new Upstream(new URL(api.url), undefined)).reviewToken('t').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReviewRequestError);
    expect((err as ReviewRequestError).statusCode).toBe(403);
    expect((err as Error).message).toContain('403 tokenreviews.authentication.k8s.io is forbidden');
  });
});
