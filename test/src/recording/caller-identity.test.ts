/**
 * Who a passthrough caller is (issue 31, finding 12): a SelfSubjectReview sent along the request's
 * own route with the caller's own credential lines — exactly its `Authorization` and `Impersonate-*`
 * lines as the upstream would see them (a WebSocket subprotocol token as `Authorization: Bearer`),
 * read here by Node's own HTTP parser on the upstream side — and cached per credential (TTL, size
 * bound), as TokenReview answers are. Without a credential the proxy can forward, or when the review
 * fails, the identity is unknown with the reason; a failed review is never cached.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CallerIdentities } from '../../../src/recording/caller-identity.js';
import { Upstream } from '../../../src/routing/upstream.js';

interface Seen {
  method: string;
  url: string;
  rawHeaders: string[];
  body: string;
}

/** An upstream answering SelfSubjectReviews with `answer(seen)`; every request it got is kept. */
async function upstream(answer: (seen: Seen) => { status: number; body?: unknown; delayMs?: number }): Promise<{ route: Upstream; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const s = { method: req.method!, url: req.url!, rawHeaders: req.rawHeaders, body };
      seen.push(s);
      const a = answer(s);
      setTimeout(() => {
        res.writeHead(a.status, { 'Content-Type': 'application/json' });
        res.end(a.body === undefined ? '' : JSON.stringify(a.body));
      }, a.delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  const { port } = server.address() as AddressInfo;
  return { route: new Upstream(new URL(`http://127.0.0.1:${port}/prefix`), undefined), seen, server };
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

const review = (userInfo: Record<string, unknown>, version = 'v1') => ({ status: 201, body: { kind: 'SelfSubjectReview', apiVersion: `authentication.k8s.io/${version}`, status: { userInfo } } });
const alice = { username: 'alice', uid: 'uid-a', groups: ['devs', 'system:authenticated'] };
/** A request as the proxy received it (Node's rawHeaders). */
const caller = (...rawHeaders: string[]) => ({ rawHeaders });
const identityLines = (s: Seen): string[][] => {
  const out: string[][] = [];
  for (let i = 0; i < s.rawHeaders.length; i += 2) {
    const n = s.rawHeaders[i]!.toLowerCase();
    if (n === 'authorization' || n.startsWith('impersonate-') || n.startsWith('x-remote-') || n === 'cookie') out.push([s.rawHeaders[i]!, s.rawHeaders[i + 1]!]);
  }
  return out;
};

describe('CallerIdentities', () => {
  it("asks with exactly the caller's Authorization and Impersonate-* lines, along the route; names the user", async () => {
    const up = await upstream(() => review(alice));
    const ids = new CallerIdentities();
    const who = await ids.review(
      caller(
        // Node's parser hands header bytes over as latin1 characters: 'jos\u00e9' is the byte 0xE9.
        'Host', 'proxy', 'Authorization', 'Bearer t-alice', 'Impersonate-User', 'jos\u00e9', 'Impersonate-Group', 'g1', 'impersonate-group', 'g2',
        'Impersonate-Extra-Scopes', 'a%2Fb', 'X-Remote-User', 'mallory', 'Cookie', 'session=1', 'Upgrade', 'SPDY/3.1',
      ),
      up.route,
    );
    expect(who).toEqual({ user: 'alice', uid: 'uid-a', groups: ['devs', 'system:authenticated'] });
    expect(up.seen).toHaveLength(1);
    const [s] = up.seen;
    expect([s!.method, s!.url]).toEqual(['POST', '/prefix/apis/authentication.k8s.io/v1/selfsubjectreviews']);
    // Byte for byte the lines the upstream would authenticate the stream request with, in order;
    // nothing the passthrough drops (front-proxy lines) and nothing else of the caller's.
    expect(identityLines(s!)).toEqual([
      ['Authorization', 'Bearer t-alice'],
      ['Impersonate-User', 'jos\u00e9'],
      ['Impersonate-Group', 'g1'],
      ['impersonate-group', 'g2'],
      ['Impersonate-Extra-Scopes', 'a%2Fb'],
    ]);
    expect(JSON.parse(s!.body)).toEqual({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
  });

  it('a WebSocket subprotocol token goes as Authorization: Bearer', async () => {
    const up = await upstream(() => review(alice));
    const token = Buffer.from('t-alice').toString('base64url');
    const who = await new CallerIdentities().review(caller('Sec-WebSocket-Protocol', `base64url.bearer.authorization.k8s.io.${token}, v5.channel.k8s.io`), up.route);
    expect(who).toMatchObject({ user: 'alice' });
    expect(identityLines(up.seen[0]!)).toEqual([['Authorization', 'Bearer t-alice']]);
  });

  it('cached per credential (TTL, size bound); concurrent asks share one review', async () => {
    let now = 1_000_000;
    const up = await upstream((s) => review({ username: identityLines(s)[0]![1]!.slice(7), groups: [] }));
    const ids = new CallerIdentities({ ttlMs: 10_000, maxEntries: 2, now: () => now });
    const as = (t: string) => ids.review(caller('Authorization', `Bearer ${t}`), up.route);
    const [a1, a2] = await Promise.all([as('a'), as('a')]);
    expect([a1, a2]).toEqual([{ user: 'a', groups: [] }, { user: 'a', groups: [] }]);
    expect(up.seen).toHaveLength(1);
    await as('a');
    expect(up.seen).toHaveLength(1);
    await as('b');
    expect(up.seen).toHaveLength(2);
    await as('c'); // evicts the oldest: a
    await as('b');
    expect(up.seen).toHaveLength(3);
    await as('a');
    expect(up.seen).toHaveLength(4);
    now += 10_001;
    await as('a');
    expect(up.seen).toHaveLength(5);
  });

  it('an upstream without v1 (kube-apiserver 1.27): v1beta1, then v1alpha1', async () => {
    const up = await upstream((s) => (s.url.includes('/v1alpha1/') ? review(alice, 'v1alpha1') : { status: 404, body: { kind: 'Status', code: 404 } }));
    const who = await new CallerIdentities().review(caller('Authorization', 'Bearer t'), up.route);
    expect(who).toMatchObject({ user: 'alice' });
    expect(up.seen.map((s) => s.url.split('/')[4])).toEqual(['v1', 'v1beta1', 'v1alpha1']);
  });

  it('unknown, with the reason: no credential to forward (nothing asked); refused; failed — failures not cached, the token in no reason', async () => {
    const up = await upstream((s) => (identityLines(s)[0]![1] === 'Bearer bad' ? { status: 401, body: { kind: 'Status', code: 401 } } : { status: 500, body: 'x' }));
    const ids = new CallerIdentities();
    const none = await ids.review(caller('Host', 'proxy', 'X-Remote-User', 'mallory'), up.route);
    expect(none).toEqual({ unknown: expect.stringMatching(/no credential the proxy can forward/) });
    expect(up.seen).toHaveLength(0);
    const bad = await ids.review(caller('Authorization', 'Bearer bad'), up.route);
    expect(bad).toEqual({ unknown: expect.stringMatching(/401/) });
    const broken = await ids.review(caller('Authorization', 'Bearer secret-token-xyz'), up.route);
    expect(broken).toEqual({ unknown: expect.stringMatching(/500/) });
    await ids.review(caller('Authorization', 'Bearer secret-token-xyz'), up.route);
    expect(up.seen.filter((s) => identityLines(s)[0]![1] === 'Bearer secret-token-xyz')).toHaveLength(2);
    expect(JSON.stringify([none, bad, broken])).not.toContain('secret-token-xyz');
  });

  it('an upstream that does not answer in time: unknown (timeout), the session not held longer', async () => {
    const up = await upstream(() => ({ ...review(alice), delayMs: 2000 }));
    const started = Date.now();
    const who = await new CallerIdentities({ timeoutMs: 200 }).review(caller('Authorization', 'Bearer t'), up.route);
    expect(who).toEqual({ unknown: expect.stringMatching(/200 ms/) });
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('an answer without a user name, or not JSON: unknown', async () => {
    let body: unknown = { kind: 'SelfSubjectReview', status: { userInfo: {} } };
    const up = await upstream(() => ({ status: 201, body }));
    const ids = new CallerIdentities({ ttlMs: 0 });
    expect(await ids.review(caller('Authorization', 'Bearer t'), up.route)).toEqual({ unknown: expect.any(String) });
    body = 'not json';
    expect(await ids.review(caller('Authorization', 'Bearer t'), up.route)).toEqual({ unknown: expect.any(String) });
  });
});
