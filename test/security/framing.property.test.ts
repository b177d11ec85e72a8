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
 *   and the upstream never sees bytes it cannot parse as a well-framed request;
 * - but one: a SPDY upgrade the upstream refuses before any 101 (not 401) is followed by the proxy's
 *   planned fallback (issue 32, handlers/stream-path.ts), and that is exactly ONE more request for the
 *   same caller and target — the reverse translator's WebSocket upgrade: `GET`, the very
 *   request-target, the same credential, its head only (no body, no byte the client sent after its
 *   upgrade request), on a new connection. The generated `spdy-refused` upgrades go to an upstream
 *   that refuses both protocols (`REFUSE_UPGRADES`), so that fallback is made, refused as well, and
 *   its refusal is the client's answer. A refused SPDY upgrade that offers no version the reverse
 *   translator serves (`spdy-403`) takes no fallback: the upstream's answer alone. (A client whose
 *   connection the proxy ended before its upgrade was answered — a pipeline cut short by a 501 — gets
 *   no answer; its upgrade may still reach the upstream, and the fallback is then made at most once.)
 *
 * Runs in passthrough and in impersonate mode (the proxy's client certificate upstream). Runs scale
 * with FUZZ_RUNS (a multiplier, default 1).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALICE_TOKEN, startSmugglingRig, type SmugglingMode, type SmugglingRig } from './smuggling-fixture.js';
import { headerOf, Http1RequestParser, type ParsedRequest } from './http1-request-parser.js';
import { REFUSE_UPGRADES, upgradeRefusedText, type SeenRequest } from './pipelined-upstream.js';
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
  /**
   * `spdy-403`: a version nobody serves (the upstream refuses, no fallback is planned); `spdy-refused`:
   * v4 to an upstream that refuses every upgrade of that target (the planned fallback is made, refused too).
   */
  upgrade: 'none' | 'websocket-404' | 'spdy-101' | 'spdy-403' | 'spdy-refused';
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
  upgrade: fc.constantFrom('none', 'none', 'none', 'websocket-404', 'spdy-101', 'spdy-403', 'spdy-refused'),
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
  // `spdy-refused` asks for stdout: a query the reverse translator could serve, so a fallback is planned.
  const streamQuery = canonicalQuery(`command=x&${tag}${r.upgrade === 'spdy-refused' ? `&stdout=1&${REFUSE_UPGRADES}=1` : ''}`);
  if (!streamQuery.ok) throw new Error(streamQuery.reason);
  const target = upgrade && r.upgrade !== 'websocket-404' ? `/api/v1/namespaces/default/pods/demo/exec?${streamQuery.query}` : `${r.path}?${tag}`;
  const method = r.upgrade === 'websocket-404' ? 'GET' : upgrade ? 'POST' : r.method;
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: proxy'];
  if (auth) lines.push(`Authorization: Bearer ${ALICE_TOKEN}`);
  const connection = [...r.connection, ...(upgrade ? ['Upgrade'] : [])];
  if (connection.length > 0) lines.push(`Connection: ${connection.join(', ')}`);
  if (r.upgrade === 'websocket-404') lines.push('Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==');
  if (r.upgrade === 'spdy-101' || r.upgrade === 'spdy-403' || r.upgrade === 'spdy-refused') {
    lines.push('Upgrade: SPDY/3.1', `X-Stream-Protocol-Version: ${r.upgrade === 'spdy-403' ? 'bogus.k8s.io' : 'v4.channel.k8s.io'}`);
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

/** The credential a request came on: the proxy's certificate, or the `Authorization` line. */
const credentialOf = (r: SeenRequest): string => r.clientCN ?? r.authorization ?? 'none';

/**
 * Take the planned fallback out of what the upstream saw for one case, checking that it is exactly
 * what a fallback may be (at most one). `planned`: the case's upgrade is `spdy-refused`. Returns the
 * requests left, which must all be the client's own, and the fallbacks taken out (the caller asserts
 * how many there must be).
 */
function takePlannedFallback(seen: readonly SeenRequest[], planned: boolean): { rest: SeenRequest[]; fallbacks: SeenRequest[]; problems: string[] } {
  const problems: string[] = [];
  // The first attempt: the client's own upgrade request, as the client sent it (a POST).
  const first = seen.find((r) => r.upgrade && r.method === 'POST');
  if (!planned || !first) return { rest: [...seen], fallbacks: [], problems };
  const fallbacks = seen.filter((r) => r.upgrade && r.method === 'GET' && r.target === first.target);
  if (fallbacks.length > 1) problems.push(`${fallbacks.length} fallback requests after one refused upgrade`);
  for (const f of fallbacks) {
    if (headerOf(f, 'upgrade')?.toLowerCase() !== 'websocket') problems.push(`the fallback is no WebSocket upgrade: Upgrade ${headerOf(f, 'upgrade')}`);
    if (f.body.length > 0 || f.framing !== 'none') problems.push(`the fallback carried a body (${f.framing}, ${f.body.length} bytes)`);
    if (credentialOf(f) !== credentialOf(first)) problems.push(`the fallback came on ${credentialOf(f)}, the first attempt on ${credentialOf(first)}`);
    if (f.conn === first.conn || f.index !== 0) problems.push(`the fallback was request ${f.index} on connection ${f.conn} (the first attempt: connection ${first.conn}), not the first on a new one`);
    if (seen.indexOf(f) < seen.indexOf(first)) problems.push('the fallback arrived before the attempt it follows');
  }
  return { rest: seen.filter((r) => !fallbacks.includes(r)), fallbacks, problems };
}

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
  // A refused upgrade, its planned fallback, and requests hidden in the early bytes that must never go up.
  [[{ ...base, upgrade: 'spdy-refused', early: [{ kind: 'bytes', bytes: Buffer.from('spdy-frames') }, HIDDEN] }], []],
  [[{ ...base, method: 'GET' }, { ...base, upgrade: 'spdy-refused', connection: ['Authorization', 'X-Forwarded-For'], early: [HIDDEN] }], [40]],
];

describe.each(['passthrough', 'impersonate'] as SmugglingMode[])('request framing property, %s', (mode) => {
  let rig: SmugglingRig;
  let caseNo = 0;
  /**
   * Every case's client requests, whether a fallback was planned and whether the client got the
   * fallback's answer, for the final check over late arrivals.
   */
  const sentByCase = new Map<string, { requests: ParsedRequest[]; planned: boolean; fallbackAnswered: boolean }>();
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
        const planned = upgradeAt >= 0 && reqs[upgradeAt]!.upgrade === 'spdy-refused';
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
        // A refused upgrade is followed by exactly its planned fallback, whose refusal is the client's
        // answer (never the first attempt's); nothing else but the client's own requests.
        const fallbackAnswered = answer.includes(upgradeRefusedText('websocket'));
        sentByCase.set(tag, { requests, planned, fallbackAnswered });
        expect(answer.includes(upgradeRefusedText('SPDY/3.1')), `the first attempt's refusal was relayed though a fallback was planned\n${why}`).toBe(false);
        const { rest, fallbacks, problems } = takePlannedFallback(seen, planned);
        expect(problems, why).toEqual([]);
        if (fallbackAnswered) expect(fallbacks, why).toHaveLength(1);
        else if (!planned) expect(fallbacks, why).toEqual([]);
        expect(isSubset(rest, requests), why).toBe(true);
        expect(new Set(rest.map(key)).size, why).toBe(rest.length);
        for (const [conn, anomaly] of rig.upstream.anomalies) {
          if (!anomaliesBefore.has(conn)) expect.fail(`upstream connection ${conn} got bytes that are no well-framed request: ${anomaly}\n${why}`);
        }
        // After an upgrade request its bytes are the new protocol's: upstream only after a 101, byte for
        // byte; on a refused attempt and on its fallback, none at all.
        if (upgradeAt >= 0) {
          for (const up of seen.filter((r) => r.upgrade)) {
            const upgraded = rig.upstream.upgraded.get(up.conn);
            if (spdy101) expect(upgraded ?? Buffer.alloc(0), why).toEqual(early);
            else expect(upgraded, why).toBeUndefined();
          }
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
    let fallbacksSeen = 0;
    for (const [tag, sent] of sentByCase) {
      const seen = seenOf(tag).filter((r) => !r.target.endsWith('&sentinel'));
      const { rest, fallbacks, problems } = takePlannedFallback(seen, sent.planned);
      expect(problems, tag).toEqual([]);
      if (sent.fallbackAnswered) expect(fallbacks.length, tag).toBe(1);
      fallbacksSeen += fallbacks.length;
      expect(isSubset(rest, sent.requests), tag).toBe(true);
    }
    expect([...rig.upstream.anomalies.values()]).toEqual([]);
    // The property was not vacuous: bodies, both framings and upgraded early bytes went through.
    const arrived = [...sentByCase.keys()].flatMap((tag) => seenOf(tag));
    expect(arrived.filter((r) => r.body.length > 0 && r.framing === 'chunked').length).toBeGreaterThan(0);
    expect(arrived.filter((r) => r.body.length > 0 && r.framing === 'content-length').length).toBeGreaterThan(0);
    // (A request the client sent after a short Content-Length is one; it carries no credentials, so only passthrough lets it through.)
    if (mode === 'passthrough') expect(arrived.filter((r) => r.path === '/smuggled').length).toBeGreaterThan(0);
    expect([...rig.upstream.upgraded.values()].some((b) => b.length > 0)).toBe(true);
    // And a refused upgrade was followed by its planned fallback.
    expect(fallbacksSeen).toBeGreaterThan(0);
    // Every request upstream belongs to a case, a sentinel, or the proxy's own reviews.
    const strays = rig.upstream.callerRequests().filter((r) => !/[?&]case=|[?&]final/.test(r.target));
    expect(strays.map((r) => `${r.method} ${r.target}`)).toEqual([]);
  });
});
