/**
 * The framing property behind issue 25, with fast-check: random pipelines of requests — methods,
 * paths, bodies holding whole requests, framings (`Content-Length`, chunked, both, neither, a length
 * shorter than the body, codings before `chunked`), `Connection` naming any header, upgrade
 * requests followed by early data — written on one connection through the proxy to an upstream that
 * serves pipelined requests in order (`pipelined-upstream.ts`). Whatever the client sends:
 *
 * - every request that reaches the upstream is one the client sent as a request (read off the
 *   client's bytes by a strict HTTP/1.1 parser, stopping at an upgrade or anything ambiguous), with
 *   the same method, target and body bytes, each at most once;
 * - nothing else reaches the upstream: no request hidden in a body, none after an upgrade request
 *   (its bytes belong to the new protocol, and are relayed only after a 101, as the upgraded stream),
 *   and the upstream never sees bytes it cannot parse as a well-framed request.
 *
 * Runs in passthrough and in impersonate mode (the proxy's client certificate upstream). Runs scale
 * with FUZZ_RUNS (a multiplier, default 1).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALICE_TOKEN, startSmugglingRig, type SmugglingMode, type SmugglingRig } from './smuggling-fixture.js';
import { Http1RequestParser, type ParsedRequest } from './http1-request-parser.js';
import type { SeenRequest } from './pipelined-upstream.js';
import { canonicalQuery } from '../../src/wire/go-query.js';

const MULT = Number(process.env.FUZZ_RUNS ?? '1') || 1;
const runs = (n: number): number => Math.max(1, Math.round(n * MULT));

/** Bytes of a body or of early data: random, or requests an attacker hopes the upstream reads. */
type Part = { kind: 'bytes'; bytes: Buffer } | { kind: 'hidden'; method: string; k: number };

/** One generated request. */
interface GenRequest {
  method: string;
  path: string;
  body: Part[];
  framing: 'content-length' | 'chunked' | 'both' | 'neither' | 'short-length' | 'gzip-chunked';
  /** Split points of a chunked body. */
  chunks: number[];
  /** Tokens of the `Connection` line (none: no line). */
  connection: string[];
  upgrade: 'none' | 'websocket-404' | 'spdy-101' | 'spdy-403';
  /** Bytes written after this request's head when it is an upgrade (the new protocol's, or a smuggling attempt). */
  early: Part[];
}

const PATHS = [
  '/api/v1/namespaces/default/pods',
  '/api/v1/namespaces/default/pods/p1',
  '/apis/apps/v1/namespaces/default/deployments',
  '/api/v1/namespaces/default/pods/demo/log',
  '/healthz',
  '/livez',
  '/metrics',
  '/version',
];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'];
const CONNECTION_TOKENS = ['Content-Length', 'Transfer-Encoding', 'Host', 'Authorization', 'X-Forwarded-For', 'Upgrade', 'keep-alive', 'Te', 'X-Other'];

const part: fc.Arbitrary<Part> = fc.oneof(
  fc.uint8Array({ maxLength: 48 }).map((a): Part => ({ kind: 'bytes', bytes: Buffer.from(a) })),
  fc.string({ maxLength: 16 }).map((t): Part => ({ kind: 'bytes', bytes: Buffer.from(t) })),
  fc.record({ method: fc.constantFrom('GET', 'POST', 'DELETE'), k: fc.nat(999) }).map(({ method, k }): Part => ({ kind: 'hidden', method, k })),
);
const parts = fc.array(part, { maxLength: 3 });

const genRequest: fc.Arbitrary<GenRequest> = fc.record({
  method: fc.constantFrom(...METHODS),
  path: fc.constantFrom(...PATHS),
  body: parts,
  framing: fc.constantFrom('content-length', 'chunked', 'both', 'neither', 'short-length', 'gzip-chunked'),
  chunks: fc.array(fc.nat(200), { maxLength: 3 }),
  connection: fc.subarray(CONNECTION_TOKENS),
  upgrade: fc.constantFrom('none', 'none', 'none', 'websocket-404', 'spdy-101', 'spdy-403'),
  early: parts,
}) as fc.Arbitrary<GenRequest>;

/** The bytes of `parts`; a hidden request carries the case's tag, so wherever it arrives it is told apart. */
function partBytes(ps: readonly Part[], tag: string): Buffer {
  return Buffer.concat(
    ps.map((p) =>
      p.kind === 'bytes'
        ? p.bytes
        : Buffer.from(`${p.method} /smuggled?${tag}&k=${p.k} HTTP/1.1\r\nHost: x\r\nImpersonate-User: system:admin\r\nContent-Length: 0\r\n\r\n`),
    ),
  );
}

/** The bytes of one request (and, for an upgrade, what follows its head). */
function serialize(r: GenRequest, tag: string, auth: boolean): Buffer {
  const upgrade = r.upgrade !== 'none';
  // A pod stream's query goes upstream in Go's encoding (src/routing/stream-query.ts): sent that way, it arrives unchanged.
  const streamQuery = canonicalQuery(`command=x&${tag}`);
  if (!streamQuery.ok) throw new Error(streamQuery.reason);
  const target = upgrade && r.upgrade !== 'websocket-404' ? `/api/v1/namespaces/default/pods/demo/exec?${streamQuery.query}` : `${r.path}?${tag}`;
  const method = r.upgrade === 'websocket-404' ? 'GET' : upgrade ? 'POST' : r.method;
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: proxy'];
  if (auth) lines.push(`Authorization: Bearer ${ALICE_TOKEN}`);
  const connection = [...r.connection, ...(upgrade ? ['Upgrade'] : [])];
  if (connection.length > 0) lines.push(`Connection: ${connection.join(', ')}`);
  if (r.upgrade === 'websocket-404') lines.push('Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==');
  if (r.upgrade === 'spdy-101' || r.upgrade === 'spdy-403') {
    lines.push('Upgrade: SPDY/3.1', `X-Stream-Protocol-Version: ${r.upgrade === 'spdy-101' ? 'v4.channel.k8s.io' : 'bogus.k8s.io'}`);
  }
  // An upgrade's bytes after its head are the early data, never a body.
  const body = upgrade ? Buffer.alloc(0) : partBytes(r.body, tag);
  let framed = body;
  switch (upgrade ? 'neither' : r.framing) {
    case 'content-length':
      lines.push(`Content-Length: ${body.length}`);
      break;
    case 'short-length':
      lines.push(`Content-Length: ${Math.floor(body.length / 2)}`);
      break;
    case 'chunked':
    case 'gzip-chunked':
    case 'both': {
      if (r.framing === 'both') lines.push(`Content-Length: ${body.length}`);
      lines.push(`Transfer-Encoding: ${r.framing === 'gzip-chunked' ? 'gzip, chunked' : 'chunked'}`);
      const cuts = [...new Set(r.chunks.map((c) => c % (body.length + 1)))].sort((a, b) => a - b);
      const parts: Buffer[] = [];
      let prev = 0;
      for (const c of [...cuts, body.length]) {
        if (c > prev) parts.push(Buffer.concat([Buffer.from(`${(c - prev).toString(16)}\r\n`), body.subarray(prev, c), Buffer.from('\r\n')]));
        prev = c;
      }
      framed = Buffer.concat([...parts, Buffer.from('0\r\n\r\n')]);
      break;
    }
    case 'neither':
      break;
  }
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), framed, upgrade ? partBytes(r.early, tag) : Buffer.alloc(0)]);
}

/** What the client sent as requests, read as a strict server would, and the bytes after an upgrade request. */
function clientRequests(stream: Buffer): { requests: ParsedRequest[]; afterUpgrade?: Buffer } {
  const parser = new Http1RequestParser({ codingsEndingInChunked: true });
  parser.push(stream);
  const requests: ParsedRequest[] = [];
  for (let r = parser.next(); r; r = parser.next()) {
    requests.push(r);
    if (r.upgrade) return { requests, afterUpgrade: parser.takePending() };
  }
  return { requests };
}

const key = (r: Pick<ParsedRequest, 'method' | 'target' | 'body'>): string => `${r.method} ${r.target} ${r.body.toString('base64')}`;

/**
 * True when every request in `seen` matches a distinct request in `sent` (method, target and body).
 * Not in order: the proxy sends pipelined requests upstream concurrently, each on its own pooled
 * connection, and answers them in order.
 */
function isSubset(seen: readonly SeenRequest[], sent: readonly ParsedRequest[]): boolean {
  const left = new Map<string, number>();
  for (const r of sent) left.set(key(r), (left.get(key(r)) ?? 0) + 1);
  for (const s of seen) {
    const n = left.get(key(s)) ?? 0;
    if (n === 0) return false;
    left.set(key(s), n - 1);
  }
  return true;
}

const HIDDEN: Part = { kind: 'hidden', method: 'DELETE', k: 1 };
const base: GenRequest = { method: 'POST', path: PATHS[0]!, body: [], framing: 'content-length', chunks: [], connection: [], upgrade: 'none', early: [] };
const EXAMPLES: Array<[GenRequest[], number[]]> = [
  [[{ ...base, body: [HIDDEN], framing: 'chunked', chunks: [7, 30] }], []],
  [[{ ...base, method: 'GET', body: [HIDDEN], connection: ['Content-Length'] }], [10]],
  [[{ ...base, method: 'GET', body: [{ kind: 'bytes', bytes: Buffer.from('xxxxxxxx') }, HIDDEN], framing: 'short-length' }], []],
  [[{ ...base, upgrade: 'spdy-101', early: [{ kind: 'bytes', bytes: Buffer.from('spdy-frames') }, HIDDEN] }], []],
  [[{ ...base, method: 'GET' }, { ...base, upgrade: 'websocket-404', early: [HIDDEN] }], []],
];

describe.each(['passthrough', 'impersonate'] as SmugglingMode[])('request framing property, %s', (mode) => {
  let rig: SmugglingRig;
  let caseNo = 0;
  /** Every case's client requests, for the final check over late arrivals. */
  const sentByCase = new Map<string, ParsedRequest[]>();
  beforeAll(async () => {
    rig = await startSmugglingRig(mode);
  }, 60_000);
  afterAll(async () => rig?.close());

  /** The upstream requests of one case (tagged), in arrival order. */
  const seenOf = (tag: string): SeenRequest[] => rig.upstream.requests.filter((r) => new URLSearchParams(r.target.split('?')[1] ?? '').get('case') === tag.slice('case='.length));

  it('every request upstream is one the client sent, at most once, unchanged; nothing else arrives', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(genRequest, { minLength: 1, maxLength: 4 }), fc.array(fc.nat(400), { maxLength: 2 }), async (reqs, cuts) => {
        const tag = `case=${mode}-${++caseNo}`;
        const anomaliesBefore = new Set(rig.upstream.anomalies.keys());
        const auth = mode !== 'passthrough';
        const pieces = reqs.map((r, n) => serialize(r, `${tag}&n=${n}`, auth));
        const upgradeAt = reqs.findIndex((r) => r.upgrade !== 'none');
        // The connection ends with a request that closes it (read only when nothing before derailed the parser).
        if (upgradeAt < 0) pieces.push(Buffer.from(`GET /version?${tag}&n=end HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n`));
        const stream = Buffer.concat(pieces);
        const { requests, afterUpgrade } = clientRequests(stream);
        sentByCase.set(tag, requests);
        const spdy101 = upgradeAt >= 0 && reqs[upgradeAt]!.upgrade === 'spdy-101';
        const early = afterUpgrade ?? Buffer.alloc(0);
        const answer = await rig.send(stream, {
          timeoutMs: 10_000,
          splitAt: cuts,
          // An upgraded stream stays open: close once the upstream's echo of the early bytes is back.
          ...(spdy101 ? { closeWhen: (got: Buffer) => { const at = got.indexOf('\r\n\r\n'); return at >= 0 && got.subarray(at + 4).length >= early.length; } } : {}),
        });
        // A sentinel through the same route: anything the case sent upstream before it has been read.
        const sentinel = await rig.send(`GET /version?${tag}&sentinel HTTP/1.1\r\nHost: proxy\r\n${auth ? `Authorization: Bearer ${ALICE_TOKEN}\r\n` : ''}Connection: close\r\n\r\n`);
        expect(sentinel.toString('latin1')).toMatch(/^HTTP\/1\.1 200 /);
        const seen = seenOf(tag).filter((r) => !r.target.endsWith('&sentinel'));
        const why = `client sent:\n${stream.toString('latin1')}\nproxy answered:\n${answer.toString('latin1').slice(0, 2000)}\nupstream saw:\n${seen.map((r) => key(r)).join('\n')}`;
        expect(isSubset(seen, requests), why).toBe(true);
        expect(new Set(seen.map(key)).size, why).toBe(seen.length);
        for (const [conn, anomaly] of rig.upstream.anomalies) {
          if (!anomaliesBefore.has(conn)) expect.fail(`upstream connection ${conn} got bytes that are no well-framed request: ${anomaly}\n${why}`);
        }
        // After an upgrade request its bytes are the new protocol's: upstream only after a 101, byte for byte.
        if (upgradeAt >= 0) {
          const up = seen.find((r) => r.upgrade);
          const upgraded = up ? rig.upstream.upgraded.get(up.conn) : undefined;
          if (spdy101 && up) expect(upgraded ?? Buffer.alloc(0), why).toEqual(early);
          else expect(upgraded, why).toBeUndefined();
        }
      }),
      {
        numRuns: runs(mode === 'passthrough' ? 120 : 50),
        // Always among the runs: each framing with a body, a request after a short length, early bytes after a 101.
        examples: EXAMPLES,
        ...(process.env.FRAMING_SEED ? { seed: Number(process.env.FRAMING_SEED), path: process.env.FRAMING_PATH, endOnFailure: true } : {}),
      },
    );
  }, 180_000);

  it('and no request arrived late that the client did not send', async () => {
    // Requests still in flight when a case was checked (the client's connection already closed) are in now.
    await rig.send(`GET /version?final HTTP/1.1\r\nHost: proxy\r\n${mode !== 'passthrough' ? `Authorization: Bearer ${ALICE_TOKEN}\r\n` : ''}Connection: close\r\n\r\n`);
    expect(sentByCase.size).toBeGreaterThan(0);
    for (const [tag, sent] of sentByCase) {
      const seen = seenOf(tag).filter((r) => !r.target.endsWith('&sentinel'));
      expect(isSubset(seen, sent), tag).toBe(true);
    }
    expect([...rig.upstream.anomalies.values()]).toEqual([]);
    // The property was not vacuous: bodies, both framings and upgraded early bytes went through.
    const arrived = [...sentByCase.keys()].flatMap((tag) => seenOf(tag));
    expect(arrived.filter((r) => r.body.length > 0 && r.framing === 'chunked').length).toBeGreaterThan(0);
    expect(arrived.filter((r) => r.body.length > 0 && r.framing === 'content-length').length).toBeGreaterThan(0);
    // (A request the client sent after a short Content-Length is one; it carries no credentials, so only passthrough lets it through.)
    if (mode === 'passthrough') expect(arrived.filter((r) => r.path === '/smuggled').length).toBeGreaterThan(0);
    expect([...rig.upstream.upgraded.values()].some((b) => b.length > 0)).toBe(true);
    // Every request upstream belongs to a case, a sentinel, or the proxy's own reviews.
    const strays = rig.upstream.callerRequests().filter((r) => !/[?&]case=|[?&]final/.test(r.target));
    expect(strays.map((r) => `${r.method} ${r.target}`)).toEqual([]);
  });
});
